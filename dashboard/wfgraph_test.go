package dashboard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

func edgeList(g *graphtext.Graph) []string {
	var out []string
	for _, e := range g.Edges {
		s := e.From + " -> " + e.To
		if e.Event != "" {
			s += " on " + e.Event
		}
		out = append(out, s)
	}
	return out
}

func stateList(g *graphtext.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, fmt.Sprintf("%s %s %s", n.ID, n.Kind, n.State))
	}
	return out
}

// TestWorkflowGraph derives the recorded checkout: two signals end the
// phase, then reserve, then charge and notify in parallel, the timer once
// both are done, the child, and the end.
func TestWorkflowGraph(t *testing.T) {
	f := loadFixture(t, "checkout")
	g := workflowGraph(f.Events)
	if g.Flow != "checkout" {
		t.Errorf("flow %q", g.Flow)
	}
	wantNodes := []string{"_start start ", "signal:add_item@3 signal completed", "signal:checkout@5 signal completed",
		"reserve#1 activity completed", "charge#2 activity completed", "notify#3 activity completed",
		"timer#4 timer completed", "ship#5 child completed", "_done done completed"}
	if got := stateList(g); !slices.Equal(got, wantNodes) {
		t.Errorf("nodes\n%q\nwant\n%q", got, wantNodes)
	}
	wantEdges := []string{"_start -> signal:add_item@3", "_start -> signal:checkout@5",
		"signal:add_item@3 -> reserve#1", "signal:checkout@5 -> reserve#1",
		"reserve#1 -> charge#2", "reserve#1 -> notify#3", "notify#3 -> timer#4", "charge#2 -> timer#4",
		"timer#4 -> ship#5", "ship#5 -> _done"}
	if got := edgeList(g); !slices.Equal(got, wantEdges) {
		t.Errorf("edges\n%q\nwant\n%q", got, wantEdges)
	}
	boxes := checkDAG(t, g, true)
	if boxes["charge#2"].x != boxes["notify#3"].x {
		t.Errorf("the parallel pair is not in one layer: %+v %+v", boxes["charge#2"], boxes["notify#3"])
	}
	golden(t, "checkout.dag.svg", string(dagSVG(g))+"\n")
	child := workflowGraph(loadFixture(t, "checkout_child").Events)
	if got := edgeList(child); !slices.Equal(got, []string{"_start -> label#1", "label#1 -> _done"}) {
		t.Errorf("child edges %q", got)
	}
}

// TestWorkflowGraphStates: a run under way, a failure the workflow
// handles, an update, a cancelled timer, then a cancellation.
func TestWorkflowGraphStates(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var seq int64
	ev := func(kind string, index int, name, errText string) server.Event {
		seq++
		return server.Event{Seq: seq, Kind: kind, Index: index, Name: name, Error: errText, At: at.Add(time.Duration(seq) * time.Second)}
	}
	evs := []server.Event{
		ev("run_started", 0, "w", ""), ev("decision", 0, "", ""),
		ev("step_scheduled", 1, "pay", ""), ev("timer_started", 2, "", ""),
		ev("step_failed", 1, "pay", "declined"), ev("decision", 0, "", ""),
		ev("timer_cancelled", 2, "", ""), ev("step_scheduled", 3, "refund", ""),
		ev("decision", 0, "", ""), ev("update_accepted", 4, "note", ""), ev("update_completed", 4, "note", ""),
	}
	g := workflowGraph(evs)
	want := []string{"_start start ", "pay#1 activity failed", "timer#2 timer cancelled", "refund#3 activity running", "update:note@10 update completed"}
	if got := stateList(g); !slices.Equal(got, want) {
		t.Fatalf("nodes\n%q\nwant\n%q", got, want)
	}
	edges := []string{"_start -> pay#1", "_start -> timer#2", "pay#1 -> refund#3 on failed", "pay#1 -> update:note@10 on failed"}
	if got := edgeList(g); !slices.Equal(got, edges) {
		t.Errorf("edges\n%q\nwant\n%q", got, edges)
	}
	if !g.Edges[2].Failure {
		t.Errorf("the edge from the failed activity is not a failure edge: %+v", g.Edges[2])
	}
	checkDAG(t, g, true)

	g = workflowGraph(append(evs, ev("run_cancelled", 0, "", "by ann")))
	if got := stateList(g); got[3] != "refund#3 activity cancelled" || got[len(got)-1] != "_done done cancelled" {
		t.Errorf("after the cancellation: %q", got)
	}
}

func TestWorkflowGraphEscapes(t *testing.T) {
	evil := `<a&"b>`
	g := workflowGraph([]server.Event{{Seq: 1, Kind: "run_started", Name: evil}, {Seq: 2, Kind: "decision"},
		{Seq: 3, Kind: "step_scheduled", Index: 1, Name: evil}, {Seq: 4, Kind: "signal_received", Name: evil}})
	s := string(dagSVG(g))
	if strings.Contains(s, "<a&") {
		t.Fatalf("unescaped:\n%s", s)
	}
	checkDAG(t, g, true)
	if empty := workflowGraph(nil); len(empty.Nodes) != 1 {
		t.Errorf("an empty history gives %+v", empty)
	}
}
