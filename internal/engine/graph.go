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
//   - A step's input document holds the run input and the output of every
//     ancestor that completed (every step from which a path of edges leads
//     to it), by key: the context of the steps before it. A step that
//     declares what it reads (Step.Reads) gets only those outputs.
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
	"slices"
	"strings"
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
	// Reads, when ReadsDeclared, lists the steps whose outputs the step's
	// input document holds (each an ancestor of the step). Otherwise the
	// document holds the output of every ancestor that completed.
	Reads         []int
	ReadsDeclared bool

	// ctx lists the steps whose outputs may enter the step's input
	// document, ordered by key with duplicate keys dropped; anc is the set
	// of the step's ancestors.
	ctx []int
	anc bitset
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

// Finish indexes the graph by name, fills the InPos back-references and
// computes each step's ancestors. The flow package calls it once after
// building Steps, Out and Roots.
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
	g.ancestors()
	for i := range g.Steps {
		s := &g.Steps[i]
		var ctx []int
		if s.ReadsDeclared {
			ctx = slices.Clone(s.Reads)
		} else {
			for j := range g.Steps {
				if s.anc.has(j) {
					ctx = append(ctx, j)
				}
			}
		}
		slices.SortStableFunc(ctx, func(a, b int) int { return strings.Compare(g.Steps[a].Key, g.Steps[b].Key) })
		ctx = slices.CompactFunc(ctx, func(a, b int) bool { return g.Steps[a].Key == g.Steps[b].Key })
		s.ctx = ctx
	}
}

// ancestors fills each step's set of ancestors from the incoming edges.
// The graph is trusted to be acyclic; a cycle would only make the sets
// incomplete.
func (g *Graph) ancestors() {
	const (
		todo = iota
		busy
		done
	)
	state := make([]uint8, len(g.Steps))
	var visit func(i int)
	visit = func(i int) {
		state[i] = busy
		a := newBitset(len(g.Steps))
		for _, e := range g.Steps[i].In {
			if state[e.From] == todo {
				visit(e.From)
			}
			a.set(e.From)
			a.or(g.Steps[e.From].anc)
		}
		g.Steps[i].anc = a
		state[i] = done
	}
	for i := range g.Steps {
		if state[i] == todo {
			visit(i)
		}
	}
}

// IsAncestor reports whether a path of edges leads from step a to step i.
func (g *Graph) IsAncestor(a, i int) bool {
	return i >= 0 && i < len(g.Steps) && g.Steps[i].anc.has(a)
}

// Context returns the steps whose outputs step i's input document holds
// when they completed, ordered by key: its ancestors, or the steps it
// declares it reads.
func (g *Graph) Context(i int) []int { return slices.Clone(g.Steps[i].ctx) }

type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int) { b[i/64] |= 1 << (i % 64) }

func (b bitset) has(i int) bool { return i >= 0 && i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }

func (b bitset) or(c bitset) {
	for k := range min(len(b), len(c)) {
		b[k] |= c[k]
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
