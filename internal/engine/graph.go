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

	"github.com/hephaestus-go/hephaestus/internal/suggest"
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

	// reads is Reads ordered by key with duplicate keys dropped, when
	// ReadsDeclared; pos is the step's topological position. A step's
	// ancestors are found on demand (see Context), never kept: sets of
	// ancestors grow with the square of the steps.
	reads []int
	pos   int
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
// orders the steps topologically. The flow package calls it once after
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
	g.order()
	for i := range g.Steps {
		s := &g.Steps[i]
		s.reads = nil
		if s.ReadsDeclared {
			s.reads = g.byKey(slices.Clone(s.Reads))
		}
	}
}

// byKey orders steps by key (stably) and drops the later ones of a key.
func (g *Graph) byKey(steps []int) []int {
	slices.SortStableFunc(steps, func(a, b int) int { return strings.Compare(g.Steps[a].Key, g.Steps[b].Key) })
	return slices.CompactFunc(steps, func(a, b int) bool { return g.Steps[a].Key == g.Steps[b].Key })
}

// order gives each step its topological position (Kahn's algorithm): an
// edge leads to a later position. The graph is trusted to be acyclic; the
// steps of a cycle would all get the last position, which keeps the
// searches correct, only unpruned.
func (g *Graph) order() {
	n := len(g.Steps)
	indeg := make([]int, n)
	for i := range g.Steps {
		indeg[i] = len(g.Steps[i].In)
		g.Steps[i].pos = n
	}
	var queue []int
	for i, d := range indeg {
		if d == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		i := queue[k]
		g.Steps[i].pos = k
		for _, es := range g.Steps[i].Out {
			for _, to := range es.To {
				if to == Done {
					continue
				}
				if indeg[to]--; indeg[to] == 0 {
					queue = append(queue, to)
				}
			}
		}
	}
}

// ancestors calls fn with each step from which a path of edges leads to
// step i, once, searching back from i; it skips the steps before position
// min, which cannot lead to a step at or after it, and stops when fn
// returns false.
func (g *Graph) ancestors(i, min int, fn func(a int) bool) {
	seen := make([]bool, len(g.Steps))
	stack := []int{i}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range g.Steps[x].In {
			a := e.From
			if seen[a] || g.Steps[a].pos < min {
				continue
			}
			seen[a] = true
			if !fn(a) {
				return
			}
			stack = append(stack, a)
		}
	}
}

// IsAncestor reports whether a path of edges leads from step a to step i.
func (g *Graph) IsAncestor(a, i int) bool {
	if i < 0 || i >= len(g.Steps) || a < 0 || a >= len(g.Steps) {
		return false
	}
	found := false
	g.ancestors(i, g.Steps[a].pos, func(x int) bool {
		found = x == a
		return !found
	})
	return found
}

// Context returns the steps whose outputs step i's input document holds
// when they completed, ordered by key: its ancestors, or the steps it
// declares it reads. Ancestors are searched for at each call, in time
// linear in them and their edges.
func (g *Graph) Context(i int) []int {
	s := &g.Steps[i]
	if s.ReadsDeclared {
		return slices.Clone(s.reads)
	}
	var ctx []int
	g.ancestors(i, 0, func(a int) bool {
		ctx = append(ctx, a)
		return true
	})
	slices.Sort(ctx) // by index among steps of one key, as the key order is stable
	return g.byKey(ctx)
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
		names := make([]string, len(g.Steps))
		for j := range g.Steps {
			names[j] = g.Steps[j].Name
		}
		return 0, fmt.Errorf("%w: %q%s", ErrUnknownStep, name, suggest.DidYouMean(name, names, true))
	}
	return i, nil
}
