package engine_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// TestPropertyReset: on random DAGs whose step code is deterministic, a
// run is reset to a random step that ran, at random points, up to three
// times, and driven to its end. Then:
//
//   - it ends as a run of the same flow that was never reset: the same
//     status, output, and status, event and output of every step; a
//     failed run fails by a step's failure too, though possibly another
//     step's: parallel steps that each fail end the run in the order
//     they are driven, which a reset changes (sameFailure);
//   - a step that is not after the reset step and completed before the
//     reset is never scheduled again (its output is kept);
//   - every attempt scheduled for a step or element is above every
//     attempt scheduled for it before, so a report from before a reset
//     of a step it reset is stale after it.
func TestPropertyReset(t *testing.T) {
	var resets int
	rapid.Check(t, func(t *rapid.T) {
		g, codeEvents, _ := genGraph(t)
		t.Logf("graph: %v", lazy(func() string { return describe(g) }))
		items := rapid.SliceOfN(rapid.IntRange(0, 99), 0, 4).Draw(t, "input")
		input, _ := json.Marshal(items)
		ref := newRetryDriver(t, g, codeEvents, nil)
		ref.start(input)
		ref.drive()

		r := &resetDriver{retryDriver: newRetryDriver(t, g, codeEvents, nil), attempts: map[taskKey]int{}}
		r.startReset(input)
		for range rapid.IntRange(0, 3).Draw(t, "resets") {
			r.driveSome(rapid.IntRange(0, 2*len(g.Steps)).Draw(t, "events"))
			r.reset()
		}
		r.driveAll()
		resets += r.retries
		if r.s.Status != ref.s.Status || !sameFailure(r.s.Error, ref.s.Error) || !jsonEqual(r.s.Output, ref.s.Output) {
			t.Fatalf("the reset run ended %s (%s) %s, the run never reset %s (%s) %s", r.s.Status, r.s.Error, r.s.Output, ref.s.Status, ref.s.Error, ref.s.Output)
		}
		if r.s.Status != hephtype.StatusCompleted {
			return
		}
		for i, st := range r.s.Steps {
			want := ref.s.Steps[i]
			if st.Status != want.Status || st.Event != want.Event || !jsonEqual(st.Output, want.Output) {
				t.Fatalf("step %s ended %s %q %s, want %s %q %s", g.Steps[i].Name, st.Status, st.Event, st.Output, want.Status, want.Event, want.Output)
			}
		}
	})
	if !t.Failed() && resets == 0 {
		t.Error("no case reset a run")
	}
}

// resetDriver drives a run that is reset (retries counts the resets).
type resetDriver struct {
	*retryDriver
	attempts map[taskKey]int // the highest attempt scheduled
}

func (r *resetDriver) startReset(input json.RawMessage) { r.processReset(engine.Start(r.g, input)) }

// processReset checks the attempts the decision schedules and processes it.
func (r *resetDriver) processReset(d *engine.Decision) {
	for _, c := range d.Commands {
		if c, ok := c.(engine.ScheduleStep); ok {
			k := taskKey{c.Step, c.Index}
			if c.Attempt <= r.attempts[k] {
				r.t.Fatalf("%v scheduled with attempt %d after attempt %d", k, c.Attempt, r.attempts[k])
			}
			r.attempts[k] = c.Attempt
		}
	}
	r.process(d)
}

// driveSome delivers up to n reports of the outstanding tasks.
func (r *resetDriver) driveSome(n int) {
	for ; n > 0 && !r.s.Status.Terminal() && len(r.outstanding) > 0; n-- {
		r.deliver()
	}
}

func (r *resetDriver) driveAll() {
	for it := 0; !r.s.Status.Terminal(); it++ {
		if it > maxIterations || len(r.outstanding) == 0 {
			r.t.Fatalf("the run is %s with %d tasks after %d events", r.s.Status, len(r.outstanding), it)
		}
		r.deliver()
	}
}

// deliver completes one outstanding task as its code always does.
func (r *resetDriver) deliver() {
	n := rapid.IntRange(0, len(r.outstanding)-1).Draw(r.t, "task")
	c := r.outstanding[n]
	r.outstanding = slices.Delete(r.outstanding, n, n+1)
	event, out := r.behaviour(r.lookup(c.Step), c.Index)
	var ev engine.Event = engine.StepCompleted{Step: c.Step, Attempt: c.Attempt, Event: event, Output: out}
	if c.Index >= 0 {
		ev = engine.ItemCompleted{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Output: out}
	}
	r.completed[taskKey{c.Step, c.Index}]++
	d, err := engine.Apply(r.g, r.state(), ev)
	if err != nil {
		r.t.Fatalf("Apply(%s): %v", showEvent(ev), err)
	}
	r.last = ev
	r.processReset(d)
}

// reset resets the run to a random step that ran, if any and if the run
// is not cancelled; the steps it resets may run again.
func (r *resetDriver) reset() {
	var ran []int
	for i, st := range r.s.Steps {
		if st.Status != hephtype.StepPending {
			ran = append(ran, i)
		}
	}
	if len(ran) == 0 || r.s.Status == hephtype.StatusCancelled {
		return
	}
	x := ran[rapid.IntRange(0, len(ran)-1).Draw(r.t, "resetTo")]
	down := map[string]bool{}
	for i := range r.g.Steps {
		if i == x || r.g.IsAncestor(x, i) {
			down[r.g.Steps[i].Name] = true
		}
	}
	for k := range r.completed {
		if down[k.step] {
			delete(r.completed, k)
		}
	}
	if r.s.Status.Terminal() {
		r.outstanding = nil
	}
	d, err := engine.Apply(r.g, r.state(), engine.RunReset{Step: r.g.Steps[x].Name, By: "op"})
	if err != nil {
		r.t.Fatalf("reset to %s: %v", r.g.Steps[x].Name, err)
	}
	if d.History[0].Kind != hephtype.EventRunReset {
		r.t.Fatalf("reset history %v does not start with run_reset", showHistory(d.History))
	}
	r.retries++
	r.processReset(d)
	if ev, ok := r.last.(engine.StepCompleted); ok && down[ev.Step] {
		if _, err := engine.Apply(r.g, r.s, ev); !errors.Is(err, engine.ErrStale) {
			r.t.Fatalf("%s delivered again after the reset: %v, want ErrStale", showEvent(ev), err)
		}
	}
}

// sameFailure reports whether two run errors are the same failure: equal,
// or both the failure of a step (`step "s5" failed: …`), whichever step
// and cause: when parallel branches each hold a step that fails, the run
// ends with the first failure applied, and a reset changes that order.
func sameFailure(a, b string) bool {
	const prefix = `step "`
	return a == b || strings.HasPrefix(a, prefix) && strings.HasPrefix(b, prefix)
}
