// Package graphtext draws the graph of a flow: as JSON for a dashboard to
// lay out, as Mermaid and Graphviz DOT text, and as a plain-text picture
// for a terminal, with each step's state in a run when one is given.
//
// Of walks a built flow once into a Graph; every renderer reads that
// Graph, so the four pictures always agree. The package does no I/O: the
// HTTP server and the CLI (offline `heph graph`, `heph show`) share it.
package graphtext

import (
	"slices"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
)

// Node kinds.
const (
	KindStart = "start" // the pseudo-node leading to the steps a run begins with
	KindStep  = "step"  // a plain step
	KindMap   = "map"   // a map step: runs once per element of an array
	KindWait  = "wait"  // a waiting step (approval gates among them)
	KindDone  = "done"  // the pseudo-node that an edge to flow.Done ends in
)

// The ids of the pseudo-nodes; step nodes have their step's name as id.
const (
	StartID = "_start"
	DoneID  = "_done"
)

// Graph is a flow's graph: its nodes in the flow's declaration order (the
// start node first, the done node last when an edge leads to it) and its
// edges in declaration order after the start node's.
type Graph struct {
	Flow    string `json:"flow"`
	Version int    `json:"version"`
	Nodes   []Node `json:"nodes"`
	Edges   []Edge `json:"edges"`
}

// Node is a step of the flow, or the start or done pseudo-node.
type Node struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Kind  string `json:"kind"`
	// Detail says what sets the step apart: "map over <source>" or
	// "wait, timeout 1h0m0s"; empty for a plain step.
	Detail string `json:"detail,omitempty"`
	// State is the step's status in a run (WithStates); empty otherwise.
	State string `json:"state,omitempty"`
}

// Edge leads From a node To another on Event; the start node's edges
// have no event. Failure marks an edge on the "failed" event.
type Edge struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Event   string `json:"event,omitempty"`
	Failure bool   `json:"failure,omitempty"`
}

// Of returns the graph of a built flow.
func Of(f *flow.Flow) *Graph {
	g := &Graph{Flow: f.Name(), Version: f.Version()}
	g.Nodes = append(g.Nodes, Node{ID: StartID, Label: "start", Kind: KindStart})
	for _, s := range f.Steps() {
		n := Node{ID: s.Name, Label: s.Name, Kind: KindStep, Detail: detail(s)}
		switch {
		case s.Kind == flow.KindMap:
			n.Kind = KindMap
		case s.Waits:
			n.Kind = KindWait
		}
		g.Nodes = append(g.Nodes, n)
	}
	eg := flowgraph.Of(f)
	for _, r := range eg.Roots {
		g.Edges = append(g.Edges, Edge{From: StartID, To: eg.Steps[r].Name})
	}
	done := false
	for _, e := range f.Edges() {
		to := e.To
		if to == flow.Done {
			to, done = DoneID, true
		}
		g.Edges = append(g.Edges, Edge{From: e.From, To: to, Event: e.Event, Failure: e.Event == flow.EventFailed})
	}
	if done {
		g.Nodes = append(g.Nodes, Node{ID: DoneID, Label: "done", Kind: KindDone})
	}
	return g
}

// WithStates returns a copy of g whose step nodes carry their state from
// states (by step name); steps states does not name keep none.
func (g *Graph) WithStates(states map[string]string) *Graph {
	out := *g
	out.Nodes = slices.Clone(g.Nodes)
	for i := range out.Nodes {
		if st, ok := states[out.Nodes[i].ID]; ok && isStep(out.Nodes[i]) {
			out.Nodes[i].State = st
		}
	}
	return &out
}

func isStep(n Node) bool { return n.Kind != KindStart && n.Kind != KindDone }

// detail describes a map or waiting step, as Node.Detail says.
func detail(s flow.StepSpec) string {
	switch {
	case s.Kind == flow.KindMap:
		src := "input"
		if s.MapSource != "" {
			src = s.MapSource
		}
		if s.MapField != "" {
			src += "." + s.MapField
		}
		return "map over " + src
	case s.Waits && s.WaitTimeout > 0:
		return "wait, timeout " + s.WaitTimeout.String()
	case s.Waits:
		return "wait"
	}
	return ""
}
