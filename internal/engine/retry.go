package engine

import (
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// retry applies RunRetried: a failed run runs again from where it failed.
//
// When a step fails for good the run fails at once: the step (and its
// failed map elements) is marked failed, every other step that was
// scheduled or waiting is cancelled, and every step after them stays
// pending, its incoming edges unresolved. The failure skips nothing (a
// skip needs every incoming edge dead, and the failed step resolved none).
// So a retry undoes exactly that: the failed and cancelled steps run again
// with a fresh attempt budget (their attempt numbers go on counting, so a
// report of an attempt from before the retry is stale), completed steps
// and elements keep their outputs, and the pending steps become ready, or
// are skipped, as their incoming edges resolve, as if the failure had not
// happened.
func retry(g *Graph, s *State) (*Decision, error) {
	if s.Status != hephtype.StatusFailed {
		return nil, fmt.Errorf("%w: the run is %s; only a failed run can be retried", ErrNotRetryable, s.Status)
	}
	d := &decider{g: g, s: s.Clone()}
	d.s.Status = hephtype.StatusRunning
	d.s.Error = ""
	d.s.Output = nil
	d.history(History{Kind: hephtype.EventRunRetried})
	// First what may fail again at once: a map step whose source was not
	// an array (kept outputs do not change, so it fails again), and a step
	// whose incoming edges all resolved in the decision that failed the
	// run, which left it pending (check stops once the run is failed). If
	// the run fails again, the retry ends there, having scheduled nothing
	// else.
	for i := range d.s.Steps {
		st := &d.s.Steps[i]
		if g.Steps[i].Map && st.Items == nil && (st.Status == hephtype.StepFailed || st.Status == hephtype.StepCancelled) {
			st.Status = hephtype.StepPending
			d.ready(i)
		}
		if d.s.Status.Terminal() {
			return d.decision(), nil
		}
	}
	for i := range d.s.Steps {
		d.check(i)
		if d.s.Status.Terminal() {
			return d.decision(), nil
		}
	}
	for i := range d.s.Steps {
		switch d.s.Steps[i].Status {
		case hephtype.StepFailed, hephtype.StepCancelled:
			d.rerun(i)
		}
	}
	d.settle()
	return d.decision(), nil
}

// rerun schedules a failed or cancelled step again with a fresh attempt
// budget: a map step, its elements that did not complete.
func (d *decider) rerun(i int) {
	step := &d.g.Steps[i]
	st := &d.s.Steps[i]
	st.Status = hephtype.StepScheduled
	input := d.input(i)
	if !step.Map {
		st.Attempt++
		st.Base = st.Attempt - 1
		d.history(History{Kind: hephtype.EventStepScheduled, Step: step.Name, Attempt: st.Attempt})
		d.command(ScheduleStep{Step: step.Name, Index: -1, Attempt: st.Attempt, Input: input})
		return
	}
	for k := range st.Items {
		it := &st.Items[k]
		if it.Status == hephtype.StepCompleted {
			continue
		}
		it.Status = hephtype.StepScheduled
		it.Attempt++
		it.Base = it.Attempt - 1
		d.history(History{Kind: hephtype.EventStepScheduled, Step: step.Name, Index: k, Attempt: it.Attempt})
		d.command(ScheduleStep{Step: step.Name, Index: k, Attempt: it.Attempt, Input: input, Item: it.Input})
	}
}
