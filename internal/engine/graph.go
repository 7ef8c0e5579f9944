// Package engine is the pure decision core of DAG flows.
//
// Given a flow's compiled Graph, a run's State and one Event, Apply returns
// the next State, the Commands the runtime must carry out (schedule a step,
// start a timer, complete the run …) and the History entries that record the
// change. It performs no I/O and reads no clock: the same inputs always give
// the same outputs, so it is tested without a database and replayed at will.
//
// Semantics (design section 3):
//
//   - A step becomes ready when every incoming edge is resolved and at least
//     one of them fired. An edge whose event was not emitted is dead. A step
//     whose incoming edges are all dead is skipped, and its outgoing edges die
//     with it (dead-path elimination), so branches and joins compose.
//   - A map step runs once per element of a JSON array and collects the
//     results in input order; an empty array completes at once.
//   - A step may wait; it is resumed from outside with an event, or its
//     timer delivers the "timeout" event.
//   - A failed attempt is retried while the step's policy allows; after that
//     the step takes its "failed" edge if the flow declares one, otherwise
//     the run fails.
//   - The run completes when no step is active and none can become ready.
package engine

import (
	"fmt"
	"time"
)

// Done is the target index of the terminal pseudo-step: an edge to Done ends
// that path of the flow.
const Done = -1

// InputSource is the MapSource value of a map step that iterates over the
// run input rather than a dependency's output.
const InputSource = -1

// Reserved event names.
const (
	EventOK      = "ok"      // the default event of a step
	EventTimeout = "timeout" // delivered by a waiting step's timer
	EventFailed  = "failed"  // taken by a step that failed for good, when routed
)

// Graph is a compiled flow: steps by index, with their edges resolved to
// indices. It is produced by the flow package after validation and never
// changes afterwards; the engine trusts it to be acyclic and consistent.
type Graph struct {
	Steps []Step
	// Roots are the steps scheduled when a run starts.
	Roots []int

	index map[string]int
}

// Step is one node of a Graph.
type Step struct {
	Name string
	// Key is the name under which the step's output appears in the context
	// and in its successors' input.
	Key string
	// Events the step may emit (including "timeout" for a waiting step with
	// a timeout and "failed" when the flow routes its failure).
	Events []string
	// Out holds the outgoing edges, one entry per event that has any.
	Out []EdgeSet
	// In lists the incoming edges; a target's resolution state is kept per
	// entry, in this order.
	In []InEdge
	// MaxAttempts bounds the attempts of the step (of each element, for a
	// map step). Values below 1 mean 1.
	MaxAttempts int
	// WaitTimeout, when positive, starts a timer when the step waits.
	WaitTimeout time.Duration
	// Map marks a map step. MapSource is the step whose output it iterates
	// (InputSource for the run input) and MapField, when set, selects a field
	// of that JSON object.
	Map       bool
	MapSource int
	MapField  string
}

// EdgeSet is every edge leaving a step on one event.
type EdgeSet struct {
	Event string
	// To holds target step indices, or Done.
	To []int
	// InPos[i] is the position of this edge in Steps[To[i]].In (unused for
	// Done).
	InPos []int
}

// InEdge is an incoming edge: step From emitting Event.
type InEdge struct {
	From  int
	Event string
}

// Finish indexes the graph by name and fills the InPos back-references.
// The flow package calls it once after building Steps, Out and Roots.
func (g *Graph) Finish() {
	g.index = make(map[string]int, len(g.Steps))
	for i := range g.Steps {
		g.index[g.Steps[i].Name] = i
		g.Steps[i].In = g.Steps[i].In[:0]
	}
	for from := range g.Steps {
		for e := range g.Steps[from].Out {
			es := &g.Steps[from].Out[e]
			es.InPos = make([]int, len(es.To))
			for k, to := range es.To {
				if to == Done {
					es.InPos[k] = -1
					continue
				}
				es.InPos[k] = len(g.Steps[to].In)
				g.Steps[to].In = append(g.Steps[to].In, InEdge{From: from, Event: es.Event})
			}
		}
	}
}

// Lookup returns the index of the named step.
func (g *Graph) Lookup(name string) (int, bool) {
	i, ok := g.index[name]
	return i, ok
}

// Declares reports whether step i may emit event.
func (s *Step) Declares(event string) bool {
	for _, e := range s.Events {
		if e == event {
			return true
		}
	}
	return false
}

func (g *Graph) step(name string) (int, error) {
	i, ok := g.index[name]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrUnknownStep, name)
	}
	return i, nil
}
