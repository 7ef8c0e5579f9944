package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// resetData is the Data of run_reset: the steps that run again from their
// start, in the flow's order.
type resetData struct {
	Steps []string `json:"steps"`
}

// reset applies RunReset: the run runs again from step ev.Step.
//
// The step and every step after it (its descendants) go back to pending,
// as if they had never run, except that their attempt numbers go on
// counting: those scheduled or waiting are cancelled (a report of their
// attempt is stale), their outputs, events and map elements are cleared,
// and their incoming edges from other reset steps are open again. Their
// edges from the other steps keep their resolution: those steps keep
// their outcome and outputs. Then the run goes on as a retry does: the
// other steps that failed or were cancelled run again (without them the
// steps after them could never run), the step is scheduled (or skipped)
// as its incoming edges say, and the steps after it follow.
func reset(g *Graph, s *State, ev RunReset) (*Decision, error) {
	if ev.Step == "" && len(g.Steps) == 1 {
		ev.Step = g.Steps[0].Name // a run of one step (a job): run it again
	}
	if ev.Step == "" {
		return nil, fmt.Errorf("reset: %w: the step to reset to is empty; the run has %d steps: name one", ErrUnknownStep, len(g.Steps))
	}
	x, err := g.step(ev.Step)
	if err != nil {
		names := make([]string, len(g.Steps))
		for i := range g.Steps {
			names[i] = g.Steps[i].Name
		}
		return nil, fmt.Errorf("reset to step %q: %w (the steps: %s)", ev.Step, err, strings.Join(names, ", "))
	}
	if s.Status == hephtype.StatusCancelled {
		return nil, fmt.Errorf("%w: the run is cancelled; a cancelled run is not reset: start a new run", ErrNotResettable)
	}
	if s.Steps[x].Status == hephtype.StepPending {
		return nil, fmt.Errorf("%w: step %q has not run yet, so there is nothing to run again from it", ErrNotResettable, ev.Step)
	}
	d := &decider{g: g, s: s.Clone()}
	d.s.Status = hephtype.StatusRunning
	d.s.Error = ""
	d.s.Output = nil
	down := g.descendants(x)
	var names []string
	for i := range g.Steps {
		if down[i] {
			names = append(names, g.Steps[i].Name)
		}
	}
	data, _ := json.Marshal(resetData{Steps: names})
	d.history(History{Kind: hephtype.EventRunReset, Step: ev.Step, Event: ev.By, Data: data})
	for i := range g.Steps {
		if down[i] {
			d.clear(i, down)
		}
	}
	d.restart(down)
	d.settle()
	return d.decision(), nil
}

// clear sends reset step i back to pending: what runs or waits of it is
// cancelled, its outcome is forgotten, and its incoming edges from other
// reset steps open again. Its attempt number is kept (for a map step, the
// highest of its elements'), so that its next attempt counts on.
func (d *decider) clear(i int, down []bool) {
	step := &d.g.Steps[i]
	st := &d.s.Steps[i]
	switch st.Status {
	case hephtype.StepScheduled:
		if step.Map {
			d.cancelItems(i)
		} else {
			d.command(CancelStep{Step: step.Name, Index: -1})
		}
		d.history(History{Kind: hephtype.EventStepCancelled, Step: step.Name})
	case hephtype.StepWaiting:
		d.disarm(i)
		d.history(History{Kind: hephtype.EventStepCancelled, Step: step.Name})
	}
	for _, it := range st.Items {
		st.Attempt = max(st.Attempt, it.Attempt)
	}
	st.Status = hephtype.StepPending
	st.Event, st.Output, st.Items, st.Timer = "", nil, nil, false
	for k, e := range step.In {
		if down[e.From] {
			st.In[k] = EdgeOpen
		}
	}
}

// restart sets the run going after a reset: the steps outside the reset
// that failed or were cancelled run again as by a retry, and the steps
// whose incoming edges are all resolved (the reset step among them, or a
// root) are scheduled or skipped. It stops once the run fails again (a
// map step over something that is not an array).
func (d *decider) restart(down []bool) {
	for i := range d.s.Steps {
		st := &d.s.Steps[i]
		if down[i] || (st.Status != hephtype.StepFailed && st.Status != hephtype.StepCancelled) {
			continue
		}
		if d.g.Steps[i].Map && st.Items == nil {
			st.Status = hephtype.StepPending // it failed as it expanded: expand again
			continue
		}
		d.rerun(i)
	}
	for i := range d.s.Steps {
		if d.s.Steps[i].Status == hephtype.StepPending && len(d.g.Steps[i].In) == 0 {
			d.ready(i) // a root: no edge makes it ready
		} else {
			d.check(i)
		}
		if d.s.Status.Terminal() {
			return
		}
	}
}

// descendants returns, by step index, step x and every step a path of
// edges leads to from it.
func (g *Graph) descendants(x int) []bool {
	down := make([]bool, len(g.Steps))
	down[x] = true
	stack := []int{x}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, es := range g.Steps[i].Out {
			for _, to := range es.To {
				if to != Done && !down[to] {
					down[to] = true
					stack = append(stack, to)
				}
			}
		}
	}
	return down
}
