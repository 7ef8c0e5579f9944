package dashboard

import (
	"encoding/xml"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

// xnode is an element of a parsed SVG.
type xnode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []xnode    `xml:",any"`
	Text     string     `xml:",chardata"`
}

func (n *xnode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n *xnode) hasClass(c string) bool {
	for _, f := range strings.Fields(n.attr("class")) {
		if f == c {
			return true
		}
	}
	return false
}

// find returns the elements under n (n included) that match.
func (n *xnode) find(match func(*xnode) bool) []*xnode {
	var out []*xnode
	if match(n) {
		out = append(out, n)
	}
	for i := range n.Children {
		out = append(out, n.Children[i].find(match)...)
	}
	return out
}

func (n *xnode) child(name string) *xnode {
	for i := range n.Children {
		if n.Children[i].XMLName.Local == name {
			return &n.Children[i]
		}
	}
	return nil
}

var numRE = regexp.MustCompile(`-?[0-9.]+(e[-+]?[0-9]+)?|NaN|Inf`)

// parseSVG checks that s is well-formed XML with an <svg> root that has
// a viewBox, width and height, and that no coordinate is NaN, infinite or
// negative; it returns the parsed tree.
func parseSVG(t *testing.T, s string) *xnode {
	t.Helper()
	var root xnode
	if err := xml.Unmarshal([]byte(s), &root); err != nil {
		t.Fatalf("the SVG does not parse: %v\n%s", err, s)
	}
	if root.XMLName.Local != "svg" || root.attr("viewBox") == "" || root.attr("width") == "" || root.attr("height") == "" {
		t.Fatalf("root <%s> viewBox=%q width=%q height=%q", root.XMLName.Local, root.attr("viewBox"), root.attr("width"), root.attr("height"))
	}
	coords := map[string]bool{"x": true, "y": true, "width": true, "height": true, "cx": true, "cy": true, "r": true,
		"x1": true, "x2": true, "y1": true, "y2": true, "viewBox": true, "d": true}
	root.find(func(n *xnode) bool {
		for _, a := range n.Attrs {
			if !coords[a.Name.Local] || n.XMLName.Local == "marker" || n.XMLName.Local == "path" && a.Name.Local == "d" && strings.Contains(a.Value, "z") {
				continue
			}
			for _, m := range numRE.FindAllString(a.Value, -1) {
				f, err := strconv.ParseFloat(m, 64)
				if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
					t.Errorf("<%s %s=%q>: %q is not a coordinate", n.XMLName.Local, a.Name.Local, a.Value, m)
				}
			}
		}
		return false
	})
	return &root
}

func nodesOf(root *xnode) []*xnode {
	return root.find(func(n *xnode) bool { return n.XMLName.Local == "g" && n.hasClass("node") })
}

func edgesOf(root *xnode) []*xnode {
	return root.find(func(n *xnode) bool { return n.XMLName.Local == "g" && n.hasClass("edge") })
}

// box is a node's box or circle, with its centre.
type box struct{ x, y, w, h float64 }

func boxOf(t *testing.T, g *xnode) box {
	t.Helper()
	f := func(n *xnode, a string) float64 {
		v, err := strconv.ParseFloat(n.attr(a), 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", a, n.attr(a), err)
		}
		return v
	}
	for i := range g.Children {
		c := &g.Children[i]
		switch {
		case c.XMLName.Local == "rect" && !c.hasClass("stack"):
			return box{f(c, "x"), f(c, "y"), f(c, "width"), f(c, "height")}
		case c.XMLName.Local == "circle":
			r := f(c, "r")
			return box{f(c, "cx") - r, f(c, "cy") - r, 2 * r, 2 * r}
		}
	}
	t.Fatalf("node %s has no shape", g.attr("data-step"))
	return box{}
}

// checkDAG checks the picture of g: a node per graph node with its data
// attributes and classes, an edge per graph edge, no two shapes
// overlapping, every edge of a DAG going left to right; it returns the
// node boxes by id.
func checkDAG(t *testing.T, g *graphtext.Graph, acyclic bool) map[string]box {
	t.Helper()
	root := parseSVG(t, string(dagSVG(g)))
	nodes := nodesOf(root)
	if len(nodes) != len(g.Nodes) {
		t.Fatalf("%d nodes drawn, want %d", len(nodes), len(g.Nodes))
	}
	boxes := map[string]box{}
	for i, n := range nodes {
		want := g.Nodes[i]
		state := want.State
		if n.attr("data-step") != want.ID || n.attr("data-state") != state {
			t.Errorf("node %d: data-step=%q data-state=%q, want %q %q", i, n.attr("data-step"), n.attr("data-state"), want.ID, state)
		}
		if !n.hasClass("kind-"+want.Kind) || !n.hasClass("state-"+stateClass(state)) {
			t.Errorf("node %s: class %q, want kind-%s state-%s", want.ID, n.attr("class"), want.Kind, stateClass(state))
		}
		title := n.child("title")
		if title == nil || !strings.HasPrefix(title.Text, want.Label) {
			t.Errorf("node %s: title %+v, want it to start with the label %q", want.ID, title, want.Label)
		}
		boxes[want.ID] = boxOf(t, n)
	}
	for i, a := range nodes {
		for _, c := range nodes[i+1:] {
			p, q := boxes[a.attr("data-step")], boxes[c.attr("data-step")]
			if p.x < q.x+q.w && q.x < p.x+p.w && p.y < q.y+q.h && q.y < p.y+p.h {
				t.Errorf("nodes %s %+v and %s %+v overlap", a.attr("data-step"), p, c.attr("data-step"), q)
			}
		}
	}
	edges := edgesOf(root)
	if len(edges) != len(g.Edges) {
		t.Fatalf("%d edges drawn, want %d", len(edges), len(g.Edges))
	}
	for i, e := range edges {
		want := g.Edges[i]
		if e.attr("data-from") != want.From || e.attr("data-to") != want.To || e.attr("data-event") != want.Event {
			t.Errorf("edge %d: %q -> %q on %q, want %+v", i, e.attr("data-from"), e.attr("data-to"), e.attr("data-event"), want)
		}
		if e.hasClass("failure") != want.Failure {
			t.Errorf("edge %+v: class %q", want, e.attr("class"))
		}
		path := e.child("path")
		if path == nil || !strings.HasPrefix(path.attr("d"), "M") || !strings.Contains(path.attr("marker-end"), "url(#") {
			t.Errorf("edge %+v: path %+v", want, path)
		}
		label := e.child("text")
		if hasLabel := want.Event != "" && want.Event != "ok"; hasLabel != (label != nil) || label != nil && label.Text != cut(want.Event, dagLabelMax) {
			t.Errorf("edge %+v: label %+v", want, label)
		}
		if acyclic && boxes[want.From].x >= boxes[want.To].x {
			t.Errorf("edge %s -> %s goes right to left: %+v %+v", want.From, want.To, boxes[want.From], boxes[want.To])
		}
	}
	return boxes
}

// chain returns start -> s0 -> ... -> s(n-1) -> done.
func chain(n int) *graphtext.Graph {
	g := &graphtext.Graph{Flow: "chain", Version: 1}
	g.Nodes = append(g.Nodes, graphtext.Node{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart})
	prev := graphtext.StartID
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		g.Nodes = append(g.Nodes, graphtext.Node{ID: id, Label: id, Kind: graphtext.KindStep, State: "completed"})
		ev := "ok"
		if prev == graphtext.StartID {
			ev = ""
		}
		g.Edges = append(g.Edges, graphtext.Edge{From: prev, To: id, Event: ev})
		prev = id
	}
	g.Nodes = append(g.Nodes, graphtext.Node{ID: graphtext.DoneID, Label: "done", Kind: graphtext.KindDone})
	g.Edges = append(g.Edges, graphtext.Edge{From: prev, To: graphtext.DoneID, Event: "ok"})
	return g
}

// fan returns start -> split -> n parallel steps -> join -> done.
func fan(n int) *graphtext.Graph {
	g := &graphtext.Graph{Flow: "fan"}
	g.Nodes = []graphtext.Node{{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart}, {ID: "split", Label: "split", Kind: graphtext.KindStep}}
	g.Edges = []graphtext.Edge{{From: graphtext.StartID, To: "split"}}
	for i := range n {
		id := fmt.Sprintf("branch_%02d", i)
		g.Nodes = append(g.Nodes, graphtext.Node{ID: id, Label: id, Kind: graphtext.KindStep, State: []string{"completed", "running", "failed"}[i%3]})
		g.Edges = append(g.Edges, graphtext.Edge{From: "split", To: id, Event: "ok"}, graphtext.Edge{From: id, To: "join", Event: "ok"})
	}
	g.Nodes = append(g.Nodes, graphtext.Node{ID: "join", Label: "join", Kind: graphtext.KindStep},
		graphtext.Node{ID: graphtext.DoneID, Label: "done", Kind: graphtext.KindDone})
	g.Edges = append(g.Edges, graphtext.Edge{From: "join", To: graphtext.DoneID, Event: "ok"})
	return g
}

func diamond() *graphtext.Graph {
	return &graphtext.Graph{Flow: "diamond", Nodes: []graphtext.Node{
		{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart},
		{ID: "a", Label: "a", Kind: graphtext.KindStep, State: "completed"},
		{ID: "b", Label: "b", Kind: graphtext.KindMap, Detail: "map over a", State: "running"},
		{ID: "c", Label: "c", Kind: graphtext.KindWait, Detail: "wait, timeout 1h0m0s", State: "waiting"},
		{ID: "d", Label: "d", Kind: graphtext.KindStep, State: "pending"},
		{ID: "e", Label: "e", Kind: graphtext.KindStep, State: "skipped"},
		{ID: graphtext.DoneID, Label: "done", Kind: graphtext.KindDone},
	}, Edges: []graphtext.Edge{
		{From: graphtext.StartID, To: "a"},
		{From: "a", To: "b", Event: "ok"}, {From: "a", To: "c", Event: "ok"},
		{From: "b", To: "d", Event: "ok"}, {From: "c", To: "d", Event: "approved"},
		{From: "c", To: graphtext.DoneID, Event: "rejected"},
		{From: "b", To: "e", Event: "failed", Failure: true}, {From: "e", To: graphtext.DoneID, Event: "ok"},
		{From: "d", To: graphtext.DoneID, Event: "ok"},
	}}
}

// big is 60 nodes: a few chains, fan-outs and joins, with long edges.
func big() *graphtext.Graph {
	g := &graphtext.Graph{Flow: "big"}
	g.Nodes = append(g.Nodes, graphtext.Node{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart})
	for i := range 58 {
		g.Nodes = append(g.Nodes, graphtext.Node{ID: fmt.Sprintf("n%02d", i), Label: fmt.Sprintf("step_number_%02d_with_a_long_name", i), Kind: graphtext.KindStep})
	}
	g.Nodes = append(g.Nodes, graphtext.Node{ID: graphtext.DoneID, Label: "done", Kind: graphtext.KindDone})
	g.Edges = append(g.Edges, graphtext.Edge{From: graphtext.StartID, To: "n00"}, graphtext.Edge{From: graphtext.StartID, To: "n01"})
	for i := 2; i < 58; i++ {
		// Each node follows one or two earlier ones, some far back.
		g.Edges = append(g.Edges, graphtext.Edge{From: fmt.Sprintf("n%02d", max(0, i-1-(i*7)%4)), To: fmt.Sprintf("n%02d", i), Event: "ok"})
		if i%5 == 0 {
			g.Edges = append(g.Edges, graphtext.Edge{From: fmt.Sprintf("n%02d", i/2), To: fmt.Sprintf("n%02d", i), Event: "ok"})
		}
	}
	for _, id := range []string{"n55", "n56", "n57"} {
		g.Edges = append(g.Edges, graphtext.Edge{From: id, To: graphtext.DoneID, Event: "ok"})
	}
	return g
}

func TestDAGShapes(t *testing.T) {
	for name, g := range map[string]*graphtext.Graph{
		"one node":  {Flow: "one", Nodes: []graphtext.Node{{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart}}},
		"one step":  {Flow: "one", Nodes: []graphtext.Node{{ID: "only", Label: "only", Kind: graphtext.KindStep, State: "failed"}}},
		"chain 60":  chain(60),
		"fan 30":    fan(30),
		"diamond":   diamond(),
		"60 nodes":  big(),
		"order run": withStates(loadFixture(t, "order").Graph, loadFixture(t, "order").Run.Steps),
	} {
		t.Run(name, func(t *testing.T) {
			boxes := checkDAG(t, g, true)
			if name == "fan 30" {
				// The branches share a column, and the join is right of them.
				x := boxes["branch_00"].x
				for id, b := range boxes {
					if strings.HasPrefix(id, "branch_") && b.x != x {
						t.Errorf("%s at x=%v, branch_00 at %v", id, b.x, x)
					}
				}
				if boxes["join"].x <= x {
					t.Errorf("join at %v, branches at %v", boxes["join"].x, x)
				}
			}
			if name == "chain 60" && boxes[graphtext.DoneID].x <= boxes["s59"].x {
				t.Errorf("done %+v is not right of the last step %+v", boxes[graphtext.DoneID], boxes["s59"])
			}
		})
	}
}

// TestDAGNoCrossings: declared in the order that crosses, the barycenter
// sweeps uncross the edges.
func TestDAGNoCrossings(t *testing.T) {
	g := &graphtext.Graph{Nodes: []graphtext.Node{
		{ID: graphtext.StartID, Kind: graphtext.KindStart},
		{ID: "a", Kind: graphtext.KindStep}, {ID: "b", Kind: graphtext.KindStep}, {ID: "c", Kind: graphtext.KindStep},
		{ID: "x", Kind: graphtext.KindStep}, {ID: "y", Kind: graphtext.KindStep}, {ID: "z", Kind: graphtext.KindStep},
	}, Edges: []graphtext.Edge{
		{From: graphtext.StartID, To: "a"}, {From: graphtext.StartID, To: "b"}, {From: graphtext.StartID, To: "c"},
		{From: "a", To: "z"}, {From: "b", To: "y"}, {From: "c", To: "x"},
	}}
	nodes, edges, layers := dagLayout(g)
	if layers != 3 {
		t.Fatalf("%d layers, want 3", layers)
	}
	succs := make([][]int, len(nodes))
	for _, e := range edges {
		for i := 1; i < len(e.path); i++ {
			succs[e.path[i-1]] = append(succs[e.path[i-1]], e.path[i])
		}
	}
	byLayer := make([][]int, layers)
	for i, n := range nodes {
		byLayer[n.layer] = append(byLayer[n.layer], i)
	}
	if c := crossings(nodes, succs, byLayer); c != 0 {
		t.Fatalf("%d crossings left: %+v", c, nodes)
	}
	// And the picture agrees: z is above y, y above x.
	boxes := checkDAG(t, g, true)
	if !(boxes["z"].y < boxes["y"].y && boxes["y"].y < boxes["x"].y) {
		t.Fatalf("x, y, z at %v, %v, %v", boxes["x"].y, boxes["y"].y, boxes["z"].y)
	}
}

// TestDAGCycle: a graph with a cycle (not a flow's) is still drawn.
func TestDAGCycle(t *testing.T) {
	g := &graphtext.Graph{Nodes: []graphtext.Node{{ID: "a", Kind: "step"}, {ID: "b", Kind: "step"}, {ID: "c", Kind: "step"}},
		Edges: []graphtext.Edge{{From: "a", To: "b"}, {From: "b", To: "c"}, {From: "c", To: "a"}, {From: "a", To: "ghost"}, {From: "b", To: "b"}}}
	root := parseSVG(t, string(dagSVG(g)))
	if n, e := len(nodesOf(root)), len(edgesOf(root)); n != 3 || e != 3 {
		t.Fatalf("%d nodes and %d edges drawn, want 3 and 3 (the edge to an unknown node and the loop are left out)", n, e)
	}
}

func TestDAGEscapes(t *testing.T) {
	evil := `<a&"b>`
	g := &graphtext.Graph{Flow: evil, Nodes: []graphtext.Node{
		{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart},
		{ID: evil, Label: evil, Kind: `step"><script>`, Detail: evil, State: `x" onload="alert(1)`},
	}, Edges: []graphtext.Edge{{From: graphtext.StartID, To: evil, Event: evil}}}
	s := string(dagSVG(g))
	if strings.Contains(s, "<a&") || strings.Contains(s, "<script") || strings.Contains(s, `" onload`) {
		t.Fatalf("unescaped text in:\n%s", s)
	}
	root := parseSVG(t, s)
	nodes := nodesOf(root)
	if len(nodes) != 2 || nodes[1].attr("data-step") != evil || !strings.HasPrefix(nodes[1].child("title").Text, evil) {
		t.Fatalf("the step named %s is not drawn as itself: %+v", evil, nodes)
	}
	if !nodes[1].hasClass("kind-stepscript") {
		t.Errorf("the kind is not reduced to a class token: %q", nodes[1].attr("class"))
	}
	if got := edgesOf(root)[0].child("text").Text; got != evil {
		t.Errorf("edge label %q, want %q", got, evil)
	}
}

func TestDAGTruncatesLabels(t *testing.T) {
	long := "a_step_whose_name_is_much_too_long_to_fit"
	g := &graphtext.Graph{Nodes: []graphtext.Node{{ID: long, Label: long, Kind: graphtext.KindStep}}}
	root := parseSVG(t, string(dagSVG(g)))
	n := nodesOf(root)[0]
	label := n.find(func(x *xnode) bool { return x.hasClass("label") })[0].Text
	if label != cut(long, dagLabelMax) || !strings.HasSuffix(label, "…") || len([]rune(label)) != dagLabelMax {
		t.Errorf("label %q, want the first %d runes with an ellipsis", label, dagLabelMax-1)
	}
	if n.child("title").Text != long {
		t.Errorf("title %q, want the full name", n.child("title").Text)
	}
}

func TestDAGEmpty(t *testing.T) {
	for _, g := range []*graphtext.Graph{nil, {}} {
		root := parseSVG(t, string(dagSVG(g)))
		if len(nodesOf(root)) != 0 || !root.hasClass("empty") {
			t.Errorf("empty graph drawn as %+v", root)
		}
	}
}

func TestWithStates(t *testing.T) {
	f := loadFixture(t, "order_failed")
	before := fmt.Sprint(f.Graph)
	g := withStates(f.Graph, append(f.Run.Steps, server.StepJSON{Name: "reserve_inventory", Status: "scheduled"}, server.StepJSON{Name: "_done", Status: "completed"}))
	if fmt.Sprint(f.Graph) != before {
		t.Fatal("withStates changed its graph")
	}
	states := map[string]string{}
	for _, n := range g.Nodes {
		states[n.ID] = n.State
	}
	want := map[string]string{graphtext.StartID: "", "validate_order": "completed", "charge_payment": "cancelled", "price_items": "failed",
		"reserve_inventory": "running", "approve": "pending", "ship_order": "pending", "refund": "pending", graphtext.DoneID: ""}
	for id, st := range want {
		if states[id] != st {
			t.Errorf("%s: state %q, want %q", id, states[id], st)
		}
	}
	g.Edges[0].Event = "changed"
	if f.Graph.Edges[0].Event == "changed" {
		t.Error("the copy shares its edges with the graph")
	}
}

// TestDAGGolden draws the recorded runs' graphs with their states.
func TestDAGGolden(t *testing.T) {
	for _, name := range []string{"order", "order_failed", "doc_gate"} {
		f := loadFixture(t, name)
		golden(t, name+".dag.svg", string(dagSVG(withStates(f.Graph, f.Run.Steps)))+"\n")
	}
	golden(t, "diamond.dag.svg", string(dagSVG(diamond()))+"\n")
	golden(t, "fan.dag.svg", string(dagSVG(fan(30)))+"\n")
	golden(t, "big.dag.svg", string(dagSVG(big()))+"\n")
}
