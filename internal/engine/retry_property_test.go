package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// TestPropertyRetry: on random DAGs whose step code is deterministic (each
// step or element always emits the same event and output), some steps and
// elements fail (every attempt, retryable or not) until the run has been
// retried a number of times. The run fails, is retried, and so on, until
// it completes. Then:
//
//   - it completes with the same output, and every step ends with the same
//     status, event and output, as a run of the same flow that never
//     failed;
//   - no step or element that completed ran again: each completes once,
//     and none is scheduled after it completed;
//   - a report from before a retry is stale after it, and a retry of a run
//     that is not failed is refused.
func TestPropertyRetry(t *testing.T) {
	var cases, retries int
	rapid.Check(t, func(t *rapid.T) {
		g, codeEvents, _ := genGraph(t)
		t.Logf("graph: %v", lazy(func() string { return describe(g) }))
		items := rapid.SliceOfN(rapid.IntRange(0, 99), 0, 4).Draw(t, "input")
		input, _ := json.Marshal(items)

		ref := newRetryDriver(t, g, codeEvents, nil)
		ref.start(input)
		ref.drive()

		// Poisoned steps and elements fail until the run was retried
		// round times. A step whose failure the flow routes takes its
		// "failed" edge instead of failing the run, so it is left alone.
		poison := map[taskKey]int{}
		for i, s := range g.Steps {
			if slices.ContainsFunc(s.Out, func(es engine.EdgeSet) bool { return es.Event == engine.EventFailed }) {
				continue
			}
			if rapid.IntRange(0, 3).Draw(t, "poisoned") != 0 {
				continue
			}
			round := rapid.IntRange(1, 2).Draw(t, "round")
			if !s.Map {
				poison[taskKey{s.Name, -1}] = round
				continue
			}
			for k := range 4 {
				if rapid.Bool().Draw(t, "poisonedElement") {
					poison[taskKey{g.Steps[i].Name, k}] = round
				}
			}
		}
		r := newRetryDriver(t, g, codeEvents, poison)
		// Once the poison is gone, a step or element fails a few times more
		// (retryably, within its attempts): a retry gives each a fresh
		// budget of attempts.
		r.flaky = map[taskKey]int{}
		for k := range poison {
			i, _ := g.Lookup(k.step)
			r.flaky[k] = rapid.IntRange(0, max(g.Steps[i].MaxAttempts, 1)-1).Draw(t, "flaky")
		}
		r.start(input)
		r.drive()
		// Two retries clear every poison; a third meets only what fails
		// without it (a map step over a step that was skipped).
		for r.s.Status == hephtype.StatusFailed && r.retries < 3 {
			r.retry()
			r.drive()
		}
		for k, n := range r.completed {
			if n != 1 {
				t.Fatalf("%v completed %d times", k, n)
			}
		}
		if ref.s.Status != hephtype.StatusCompleted {
			// A flow that fails whatever its steps do fails the same way:
			// with the same error, or, when it has several map steps over
			// a skipped step, with the same kind of error from whichever
			// of them the retried run reached first.
			const overSkipped = "is missing (the step was skipped)"
			sameKind := strings.Contains(ref.s.Error, overSkipped) && strings.Contains(r.s.Error, overSkipped)
			if r.s.Status != ref.s.Status || (r.s.Error != ref.s.Error && !sameKind) {
				t.Fatalf("the retried run ended %s (%s), the run that never failed %s (%s)", r.s.Status, r.s.Error, ref.s.Status, ref.s.Error)
			}
			cases++
			retries += r.retries
			return
		}
		if r.s.Status != hephtype.StatusCompleted {
			t.Fatalf("the retried run ended %s: %s", r.s.Status, r.s.Error)
		}
		if _, err := engine.Apply(g, r.s, engine.RunRetried{}); !errors.Is(err, engine.ErrNotRetryable) {
			t.Fatalf("retry of a completed run: %v, want ErrNotRetryable", err)
		}
		if !jsonEqual(r.s.Output, ref.s.Output) {
			t.Fatalf("output %s, want %s (the run that never failed)", r.s.Output, ref.s.Output)
		}
		for i, st := range r.s.Steps {
			want := ref.s.Steps[i]
			if st.Status != want.Status || st.Event != want.Event || !jsonEqual(st.Output, want.Output) {
				t.Fatalf("step %s ended %s %q %s, want %s %q %s", g.Steps[i].Name, st.Status, st.Event, st.Output, want.Status, want.Event, want.Output)
			}
		}
		cases++
		retries += r.retries
	})
	t.Logf("%d cases, %d retries", cases, retries)
	if !t.Failed() && cases >= 100 && retries == 0 {
		t.Error("no case retried a run")
	}
}

// retryDriver runs a flow whose step code is deterministic.
type retryDriver struct {
	t          *rapid.T
	g          *engine.Graph
	codeEvents [][]string
	poison     map[taskKey]int
	s          *engine.State

	flaky       map[taskKey]int // retryable failures once poison is gone
	failures    map[taskKey]int // failures since the last retry
	outstanding []engine.ScheduleStep
	completed   map[taskKey]int
	retries     int
	last        engine.Event // the last event applied
}

func newRetryDriver(t *rapid.T, g *engine.Graph, codeEvents [][]string, poison map[taskKey]int) *retryDriver {
	return &retryDriver{t: t, g: g, codeEvents: codeEvents, poison: poison, completed: map[taskKey]int{}, failures: map[taskKey]int{}}
}

func (r *retryDriver) start(input json.RawMessage) {
	r.process(engine.Start(r.g, input))
}

// behaviour is what the code of step i (element k) returns, every time.
func (r *retryDriver) behaviour(i, k int) (string, json.RawMessage) {
	evs := r.codeEvents[i]
	ev := evs[(i*7+k+len(r.g.Steps))%len(evs)]
	if k >= 0 {
		return engine.EventOK, json.RawMessage(fmt.Sprintf(`{"s":%d,"e":%d}`, i, k))
	}
	return ev, json.RawMessage(fmt.Sprintf(`{"s":%d,"items":[%d,%d]}`, i, i, i+1))
}

func (r *retryDriver) drive() {
	for it := 0; !r.s.Status.Terminal(); it++ {
		if it > maxIterations {
			r.t.Fatalf("the run did not end after %d events", maxIterations)
		}
		if len(r.outstanding) == 0 {
			r.t.Fatalf("run is %s with nothing scheduled", r.s.Status)
		}
		n := rapid.IntRange(0, len(r.outstanding)-1).Draw(r.t, "task")
		c := r.outstanding[n]
		r.outstanding = slices.Delete(r.outstanding, n, n+1)
		i := r.lookup(c.Step)
		k := taskKey{c.Step, c.Index}
		var ev engine.Event
		round, poisoned := r.poison[k]
		if poisoned && (r.retries < round || r.failures[k] < r.flaky[k]) {
			retryable := r.retries >= round || rapid.Bool().Draw(r.t, "retryable")
			r.failures[k]++
			if c.Index >= 0 {
				ev = engine.ItemFailed{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Error: "poisoned", Retryable: retryable}
			} else {
				ev = engine.StepFailed{Step: c.Step, Attempt: c.Attempt, Error: "poisoned", Retryable: retryable}
			}
		} else {
			event, out := r.behaviour(i, c.Index)
			if c.Index >= 0 {
				ev = engine.ItemCompleted{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Output: out}
			} else {
				ev = engine.StepCompleted{Step: c.Step, Attempt: c.Attempt, Event: event, Output: out}
			}
			r.completed[k]++
		}
		d, err := engine.Apply(r.g, r.state(), ev)
		if err != nil {
			r.t.Fatalf("Apply(%s): %v", showEvent(ev), err)
		}
		r.last = ev
		r.process(d)
	}
}

// retry retries the failed run, and checks that the report delivered last
// before it is stale after it.
func (r *retryDriver) retry() {
	d, err := engine.Apply(r.g, r.state(), engine.RunRetried{})
	if err != nil {
		r.t.Fatalf("retry: %v", err)
	}
	if len(d.History) == 0 || d.History[0].Kind != hephtype.EventRunRetried {
		r.t.Fatalf("retry history %v does not start with run_retried", showHistory(d.History))
	}
	r.retries++
	clear(r.failures)
	r.process(d)
	if r.last != nil {
		if _, err := engine.Apply(r.g, r.s, r.last); !errors.Is(err, engine.ErrStale) {
			r.t.Fatalf("%s delivered again after the retry: %v, want ErrStale", showEvent(r.last), err)
		}
	}
	if r.s.Status == hephtype.StatusRunning {
		if _, err := engine.Apply(r.g, r.s, engine.RunRetried{}); !errors.Is(err, engine.ErrNotRetryable) {
			r.t.Fatalf("second retry: %v, want ErrNotRetryable", err)
		}
	}
}

// state is the current state, from a JSON round trip of it one time in
// four.
func (r *retryDriver) state() *engine.State {
	if rapid.IntRange(0, 3).Draw(r.t, "roundTrip") != 0 {
		return r.s
	}
	enc, err := json.Marshal(r.s)
	if err != nil {
		r.t.Fatalf("state does not encode: %v", err)
	}
	var dec engine.State
	if err := json.Unmarshal(enc, &dec); err != nil {
		r.t.Fatalf("state does not decode: %v", err)
	}
	return &dec
}

func (r *retryDriver) process(d *engine.Decision) {
	r.s = d.State
	for _, c := range d.Commands {
		switch c := c.(type) {
		case engine.ScheduleStep:
			k := taskKey{c.Step, c.Index}
			if r.completed[k] > 0 {
				r.t.Fatalf("%v scheduled again (attempt %d) after it completed", k, c.Attempt)
			}
			r.outstanding = append(r.outstanding, c)
		case engine.CancelStep:
			r.outstanding = slices.DeleteFunc(r.outstanding, func(o engine.ScheduleStep) bool {
				return o.Step == c.Step && (c.Index < 0 || o.Index == c.Index)
			})
		}
	}
	if r.s.Status.Terminal() {
		r.outstanding = nil // the runtime deletes every task of a run that ends
	}
}

func (r *retryDriver) lookup(name string) int {
	i, ok := r.g.Lookup(name)
	if !ok {
		r.t.Fatalf("no step %q", name)
	}
	return i
}
