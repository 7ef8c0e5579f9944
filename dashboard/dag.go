package dashboard

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

// The DAG picture's geometry, in SVG user units.
const (
	dagNodeW     = 160 // a step's box
	dagNodeH     = 44
	dagPointR    = 14 // the start and done circles
	dagLayerGap  = 70 // between the boxes of two layers
	dagRowGap    = 18 // between two boxes of a layer
	dagMargin    = 16
	dagLabelMax  = 20 // runes of a label before it is cut with an ellipsis
	dagDetailMax = 26
	dagSweeps    = 6 // barycenter sweeps (down and up) to reduce crossings
)

// dagNode is a node of the layout: a node of the graph, or a virtual
// point that a long edge passes through (node == -1).
type dagNode struct {
	node  int // index in Graph.Nodes, or -1
	layer int
	pos   float64 // order within the layer
	x, y  float64 // centre
}

// dagEdge is an edge of the graph routed through its virtual points.
type dagEdge struct {
	edge graphtext.Edge
	path []int // layout nodes from the source to the target
}

// dagSVG draws a graph as an SVG picture: layers left to right by the
// longest path from the start, the order within each layer chosen by a
// barycenter heuristic to reduce crossings, steps as rounded boxes (start
// and done as circles), edges as Bézier curves with arrowheads, labelled
// with their event unless it is "ok". Each step is a
// <g class="node kind-K state-S" data-step="ID" data-state="S">; the
// picture is styled by CSS classes only.
func dagSVG(g *graphtext.Graph) template.HTML {
	if g == nil || len(g.Nodes) == 0 {
		return emptySVG("dag", "no graph")
	}
	nodes, edges, layers := dagLayout(g)
	width, height := 0.0, 0.0
	for _, n := range nodes {
		width, height = max(width, n.x+dagNodeW/2+dagMargin), max(height, n.y+dagNodeH/2+dagMargin)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="dag" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="%s" data-layers="%d">`,
		num(width), num(height), num(width), num(height), esc(graphTitle(g)), layers)
	b.WriteString(`<defs>`)
	for _, id := range []string{"dag-arrow", "dag-arrow-failure"} {
		fmt.Fprintf(&b, `<marker id="%s" class="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker>`, id)
	}
	b.WriteString(`</defs>`)
	b.WriteString(`<g class="edges">`)
	for _, e := range edges {
		writeEdge(&b, g, nodes, e)
	}
	b.WriteString(`</g><g class="nodes">`)
	for _, n := range nodes {
		if n.node >= 0 {
			writeNode(&b, g.Nodes[n.node], n)
		}
	}
	b.WriteString(`</g></svg>`)
	return template.HTML(b.String()) //nolint:gosec // every piece of text in it is escaped
}

func graphTitle(g *graphtext.Graph) string {
	if g.Flow == "" {
		return "graph"
	}
	if g.Version > 0 {
		return fmt.Sprintf("graph of %s v%d", g.Flow, g.Version)
	}
	return "graph of " + g.Flow
}

// writeNode draws one node of the graph.
func writeNode(b *strings.Builder, n graphtext.Node, p dagNode) {
	kind, state := token(n.Kind), token(n.State)
	fmt.Fprintf(b, `<g class="node kind-%s state-%s" data-step="%s" data-state="%s">`, kind, stateClass(state), esc(n.ID), state)
	title := n.Label
	if n.Detail != "" {
		title += "\n" + n.Detail
	}
	if state != "" {
		title += "\nstate: " + state
	}
	fmt.Fprintf(b, `<title>%s</title>`, esc(title))
	if n.Kind == graphtext.KindStart || n.Kind == graphtext.KindDone {
		fmt.Fprintf(b, `<circle class="shape" cx="%s" cy="%s" r="%d"/>`, num(p.x), num(p.y), dagPointR)
		if n.Kind == graphtext.KindDone {
			fmt.Fprintf(b, `<circle class="shape inner" cx="%s" cy="%s" r="%d"/>`, num(p.x), num(p.y), dagPointR-4)
		}
		fmt.Fprintf(b, `<text class="label point" x="%s" y="%s" text-anchor="middle">%s</text>`, num(p.x), num(p.y+dagPointR+14), esc(cut(n.Label, dagLabelMax)))
		b.WriteString(`</g>`)
		return
	}
	x, y := p.x-dagNodeW/2, p.y-dagNodeH/2
	if n.Kind == graphtext.KindMap { // a stack of boxes: one per element
		fmt.Fprintf(b, `<rect class="shape stack" x="%s" y="%s" width="%d" height="%d" rx="6"/>`, num(x+5), num(y-5), dagNodeW, dagNodeH)
	}
	fmt.Fprintf(b, `<rect class="shape" x="%s" y="%s" width="%d" height="%d" rx="6"/>`, num(x), num(y), dagNodeW, dagNodeH)
	labelY := p.y + 5
	if n.Detail != "" {
		labelY = p.y - 2
	}
	fmt.Fprintf(b, `<text class="label" x="%s" y="%s" text-anchor="middle">%s</text>`, num(p.x), num(labelY), esc(cut(n.Label, dagLabelMax)))
	if n.Detail != "" {
		fmt.Fprintf(b, `<text class="detail" x="%s" y="%s" text-anchor="middle">%s</text>`, num(p.x), num(p.y+13), esc(cut(n.Detail, dagDetailMax)))
	}
	b.WriteString(`</g>`)
}

// writeEdge draws an edge as a chain of cubic Béziers through its
// points, leaving and entering the boxes horizontally.
func writeEdge(b *strings.Builder, g *graphtext.Graph, nodes []dagNode, e dagEdge) {
	class := "edge"
	marker := "dag-arrow"
	if e.edge.Failure {
		class, marker = "edge failure", "dag-arrow-failure"
	}
	fmt.Fprintf(b, `<g class="%s" data-from="%s" data-to="%s"`, class, esc(e.edge.From), esc(e.edge.To))
	if e.edge.Event != "" {
		fmt.Fprintf(b, ` data-event="%s"`, esc(e.edge.Event))
	}
	b.WriteString(`>`)
	// A virtual point is a stretch as wide as a box, so that the edge
	// passes a layer straight, between its boxes.
	type pt struct {
		x, y float64
		line bool // a straight stretch ends here
	}
	var pts []pt
	for i, k := range e.path {
		n := nodes[k]
		switch {
		case i == 0:
			pts = append(pts, pt{x: n.x + halfWidth(g, n), y: n.y})
		case i == len(e.path)-1:
			pts = append(pts, pt{x: n.x - halfWidth(g, n) - 2, y: n.y}) // room for the arrowhead's tip
		default:
			pts = append(pts, pt{x: n.x - dagNodeW/2, y: n.y}, pt{x: n.x + dagNodeW/2, y: n.y, line: true})
		}
	}
	var d strings.Builder
	fmt.Fprintf(&d, "M%s,%s", num(pts[0].x), num(pts[0].y))
	for i := 1; i < len(pts); i++ {
		a, c := pts[i-1], pts[i]
		if c.line {
			fmt.Fprintf(&d, " L%s,%s", num(c.x), num(c.y))
			continue
		}
		dx := max((c.x-a.x)/2, 10)
		fmt.Fprintf(&d, " C%s,%s %s,%s %s,%s", num(a.x+dx), num(a.y), num(c.x-dx), num(c.y), num(c.x), num(c.y))
	}
	fmt.Fprintf(b, `<path d="%s" marker-end="url(#%s)"/>`, d.String(), marker)
	if ev := e.edge.Event; ev != "" && ev != "ok" {
		// The label sits on the first stretch of the edge, near its source.
		a, c := pts[0], pts[1]
		fmt.Fprintf(b, `<text class="edge-label" x="%s" y="%s" text-anchor="middle">%s</text>`,
			num((a.x+c.x)/2), num((a.y+c.y)/2-5), esc(cut(ev, dagLabelMax)))
	}
	b.WriteString(`</g>`)
}

func halfWidth(g *graphtext.Graph, n dagNode) float64 {
	if n.node < 0 {
		return 0
	}
	if k := g.Nodes[n.node].Kind; k == graphtext.KindStart || k == graphtext.KindDone {
		return dagPointR
	}
	return dagNodeW / 2
}

// dagLayout places the nodes: it returns the layout nodes (the graph's,
// then the virtual points of long edges), the routed edges and the
// number of layers. Edges naming an unknown node are left out.
func dagLayout(g *graphtext.Graph) ([]dagNode, []dagEdge, int) {
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		if _, dup := index[n.ID]; !dup {
			index[n.ID] = i
		}
	}
	var known []graphtext.Edge
	for _, e := range g.Edges {
		_, okf := index[e.From]
		_, okt := index[e.To]
		if okf && okt && e.From != e.To {
			known = append(known, e)
		}
	}
	layer := dagLayers(g, index, known)
	nLayers := 0
	for _, l := range layer {
		nLayers = max(nLayers, l+1)
	}
	nodes := make([]dagNode, len(g.Nodes))
	for i := range g.Nodes {
		nodes[i] = dagNode{node: i, layer: layer[i]}
	}
	// Route every edge from a layer to the next, through virtual points;
	// an edge against the layers (in a cycle) is routed backwards.
	edges := make([]dagEdge, 0, len(known))
	for _, e := range known {
		from, to := index[e.From], index[e.To]
		path := []int{from}
		step := 1
		if layer[to] < layer[from] {
			step = -1
		}
		for l := layer[from] + step; l != layer[to] && layer[to] != layer[from]; l += step {
			nodes = append(nodes, dagNode{node: -1, layer: l})
			path = append(path, len(nodes)-1)
		}
		path = append(path, to)
		edges = append(edges, dagEdge{edge: e, path: path})
	}
	byLayer := make([][]int, nLayers)
	for i, n := range nodes {
		byLayer[n.layer] = append(byLayer[n.layer], i)
	}
	dagOrder(nodes, edges, byLayer)
	dagPlace(g, nodes, byLayer)
	return nodes, edges, nLayers
}

// dagLayers gives each node its layer: the longest path to it from a
// node nothing leads to (the start), by Kahn's order; a node on a cycle
// is taken, when nothing else is left, in declaration order. The done
// node goes to the last layer.
func dagLayers(g *graphtext.Graph, index map[string]int, edges []graphtext.Edge) []int {
	n := len(g.Nodes)
	in := make([]int, n)
	out := make([][]int, n)
	for _, e := range edges {
		f, t := index[e.From], index[e.To]
		out[f] = append(out[f], t)
		in[t]++
	}
	layer := make([]int, n)
	done := make([]bool, n)
	var queue []int
	for i := range n {
		if in[i] == 0 {
			queue = append(queue, i)
		}
	}
	for taken := 0; taken < n; {
		if len(queue) == 0 { // a cycle: break it at its first declared node
			for i := range n {
				if !done[i] {
					queue = append(queue, i)
					break
				}
			}
		}
		v := queue[0]
		queue = queue[1:]
		if done[v] {
			continue
		}
		done[v] = true
		taken++
		for _, w := range out[v] {
			if done[w] {
				continue
			}
			layer[w] = max(layer[w], layer[v]+1)
			if in[w]--; in[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	last := 0
	for i, l := range layer {
		if g.Nodes[i].Kind != graphtext.KindDone {
			last = max(last, l)
		}
	}
	for i := range layer {
		if g.Nodes[i].Kind == graphtext.KindDone {
			layer[i] = last + 1
		}
	}
	return layer
}

// dagOrder orders each layer: first as the nodes were declared, then by
// sweeps down (each node at the mean position of its predecessors) and
// up (of its successors), keeping the order with the fewest crossings.
func dagOrder(nodes []dagNode, edges []dagEdge, byLayer [][]int) {
	preds := make([][]int, len(nodes))
	succs := make([][]int, len(nodes))
	for _, e := range edges {
		for i := 1; i < len(e.path); i++ {
			a, c := e.path[i-1], e.path[i]
			if nodes[a].layer > nodes[c].layer {
				a, c = c, a
			}
			succs[a] = append(succs[a], c)
			preds[c] = append(preds[c], a)
		}
	}
	setPos := func() {
		for _, l := range byLayer {
			for i, k := range l {
				nodes[k].pos = float64(i)
			}
		}
	}
	setPos()
	best := cloneLayers(byLayer)
	bestCross := crossings(nodes, succs, byLayer)
	for sweep := 0; sweep < dagSweeps && bestCross > 0; sweep++ {
		down := sweep%2 == 0
		for li := range byLayer {
			if !down {
				li = len(byLayer) - 1 - li
			}
			nb := preds
			if !down {
				nb = succs
			}
			bary := make(map[int]float64, len(byLayer[li]))
			for _, k := range byLayer[li] {
				bary[k] = nodes[k].pos
				if len(nb[k]) > 0 {
					sum := 0.0
					for _, m := range nb[k] {
						sum += nodes[m].pos
					}
					bary[k] = sum / float64(len(nb[k]))
				}
			}
			slices.SortStableFunc(byLayer[li], func(a, c int) int {
				switch {
				case bary[a] < bary[c]:
					return -1
				case bary[a] > bary[c]:
					return 1
				}
				return 0
			})
			for i, k := range byLayer[li] {
				nodes[k].pos = float64(i)
			}
		}
		if c := crossings(nodes, succs, byLayer); c < bestCross {
			best, bestCross = cloneLayers(byLayer), c
		}
	}
	for i := range byLayer {
		byLayer[i] = best[i]
	}
	setPos()
}

func cloneLayers(ls [][]int) [][]int {
	out := make([][]int, len(ls))
	for i, l := range ls {
		out[i] = slices.Clone(l)
	}
	return out
}

// crossings counts the pairs of edge stretches between adjacent layers
// that cross, at the nodes' current positions.
func crossings(nodes []dagNode, succs [][]int, byLayer [][]int) int {
	total := 0
	for _, l := range byLayer {
		type seg struct{ a, c float64 }
		var segs []seg
		for _, k := range l {
			for _, m := range succs[k] {
				segs = append(segs, seg{nodes[k].pos, nodes[m].pos})
			}
		}
		for i := range segs {
			for j := i + 1; j < len(segs); j++ {
				if (segs[i].a-segs[j].a)*(segs[i].c-segs[j].c) < 0 {
					total++
				}
			}
		}
	}
	return total
}

// dagPlace gives the nodes coordinates: layers left to right, each layer
// centred on the tallest one; virtual points take less room than boxes.
func dagPlace(g *graphtext.Graph, nodes []dagNode, byLayer [][]int) {
	heightOf := func(k int) float64 {
		if nodes[k].node < 0 {
			return 8
		}
		return dagNodeH + 12 // room for a map's stack and a circle's label
	}
	column := func(l []int) float64 {
		h := 0.0
		for i, k := range l {
			if i > 0 {
				h += dagRowGap
			}
			h += heightOf(k)
		}
		return h
	}
	tallest := 0.0
	for _, l := range byLayer {
		tallest = max(tallest, column(l))
	}
	for li, l := range byLayer {
		y := dagMargin + (tallest-column(l))/2
		for _, k := range l {
			h := heightOf(k)
			nodes[k].x = dagMargin + dagNodeW/2 + float64(li)*(dagNodeW+dagLayerGap)
			nodes[k].y = y + h/2
			y += h + dagRowGap
		}
	}
	_ = g
}

// withStates returns a copy of g whose step nodes carry the states of
// a run's steps, in the dashboard's words: a step "scheduled" (queued or
// running) is "running". g is not changed.
func withStates(g *graphtext.Graph, steps []server.StepJSON) *graphtext.Graph {
	if g == nil {
		return nil
	}
	states := make(map[string]string, len(steps))
	for _, s := range steps {
		st := s.Status
		if st == "scheduled" {
			st = "running"
		}
		states[s.Name] = st
	}
	out := g.WithStates(states)
	out.Edges = slices.Clone(g.Edges)
	return out
}

// stateClass is the suffix of a node's state class: "none" without one.
func stateClass(state string) string {
	if state == "" {
		return "none"
	}
	return state
}

// token keeps the letters, digits, '-' and '_' of s, lower-cased, so
// that it is safe and tidy as (part of) a class name.
func token(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cut shortens s to at most n runes, ending it with an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// esc escapes text for an SVG element or a quoted attribute.
func esc(s string) string { return template.HTMLEscapeString(s) }

// num writes a coordinate with at most one decimal.
func num(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}

// emptySVG is a small picture saying there is nothing to draw.
func emptySVG(class, text string) template.HTML {
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" class="%s empty" viewBox="0 0 240 40" width="240" height="40" role="img" aria-label="%s"><text class="empty-label" x="120" y="24" text-anchor="middle">%s</text></svg>`, //nolint:gosec // constant text
		class, esc(text), esc(text)))
}
