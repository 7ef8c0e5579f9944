package engine_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// a -> b -> c: b fails for good, the run fails with c pending; a retry
// runs b again (a fresh budget: two more attempts), and then c; a keeps
// its output and never runs again.
func TestRetryChain(t *testing.T) {
	g := newGraph(t).step("a").step("b", attempts(2)).step("c").
		edge("a", "ok", "b").edge("b", "ok", "c").edge("c", "ok", "done").build()
	r, _ := startRun(t, g, `"x"`)
	r.refuse(engine.RunRetried{}, engine.ErrNotRetryable)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)})
	r.apply(engine.StepFailed{Step: "b", Attempt: 1, Error: "flaky", Retryable: true})
	d := r.apply(engine.StepFailed{Step: "b", Attempt: 2, Error: "boom", Retryable: true})
	expect(t, d, []string{`fail-run step "b" failed: boom`},
		[]string{`step_failed b a=2 err=boom`, `run_failed b err=step "b" failed: boom`})
	wantSteps(t, r, map[string]hephtype.StepStatus{"a": hephtype.StepCompleted, "b": hephtype.StepFailed, "c": hephtype.StepPending})

	d = r.apply(engine.RunRetried{})
	expect(t, d, []string{`schedule b #3 in={"input":"x","a":1}`},
		[]string{`run_retried`, `step_scheduled b a=3`})
	wantStatus(t, r, hephtype.StatusRunning)
	if r.s.Error != "" {
		t.Errorf("error after the retry = %q, want none", r.s.Error)
	}
	// Applied once: the run is running now.
	r.refuse(engine.RunRetried{}, engine.ErrNotRetryable)
	// A report of an attempt from before the retry is stale.
	r.refuse(engine.StepFailed{Step: "b", Attempt: 2, Error: "late"}, engine.ErrStale)

	// The fresh budget: attempt 3 fails and is retried as attempt 4.
	d = r.apply(engine.StepFailed{Step: "b", Attempt: 3, Error: "again", Retryable: true})
	expect(t, d, []string{`schedule b #4 retry in={"input":"x","a":1}`},
		[]string{`step_failed b a=3 err=again`, `step_retrying b a=4`})
	d = r.apply(engine.StepCompleted{Step: "b", Attempt: 4, Output: raw(`2`)})
	expect(t, d, []string{`schedule c #1 in={"input":"x","a":1,"b":2}`},
		[]string{`step_completed b a=4 ev=ok data=2`, `step_scheduled c a=1`})
	d = r.apply(engine.StepCompleted{Step: "c", Attempt: 1, Output: raw(`3`)})
	expect(t, d, []string{`complete-run {"c":3}`},
		[]string{`step_completed c a=1 ev=ok data=3`, `run_completed data={"c":3}`})
	r.refuse(engine.RunRetried{}, engine.ErrNotRetryable)
}

// A step cancelled by the failure of a parallel branch runs again; so does
// a waiting one (its code runs again and waits anew).
func TestRetryCancelledBranches(t *testing.T) {
	g := newGraph(t).step("a").step("b").step("w", events("ok"), waitTimeout(60e9)).step("j").
		edge("a", "ok", "j").edge("b", "ok", "j").edge("w", "ok", "j").edge("w", "timeout", "j").edge("j", "ok", "done").build()
	r, _ := startRun(t, g, `null`)
	r.apply(engine.StepWaiting{Step: "w", Attempt: 1})
	d := r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "boom"})
	expect(t, d, []string{`cancel b`, `cancel-timer w`, `fail-run step "a" failed: boom`},
		[]string{`step_failed a a=1 err=boom`, `step_cancelled b`, `timer_cancelled w`, `step_cancelled w`, `run_failed a err=step "a" failed: boom`})

	d = r.apply(engine.RunRetried{})
	expect(t, d, []string{`schedule a #2 in={"input":null}`, `schedule b #2 in={"input":null}`, `schedule w #2 in={"input":null}`},
		[]string{`run_retried`, `step_scheduled a a=2`, `step_scheduled b a=2`, `step_scheduled w a=2`})
	r.apply(engine.StepCompleted{Step: "a", Attempt: 2})
	r.apply(engine.StepCompleted{Step: "b", Attempt: 2})
	r.apply(engine.StepCompleted{Step: "w", Attempt: 2})
	r.apply(engine.StepCompleted{Step: "j", Attempt: 1, Output: raw(`"j"`)})
	wantStatus(t, r, hephtype.StatusCompleted)
}

// A map step whose element failed: the completed elements keep their
// outputs, the failed and the cancelled ones run again.
func TestRetryMapElements(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", "")).edge("m", "ok", "done").build()
	r, _ := startRun(t, g, `[10,20,30]`)
	r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`1`)})
	d := r.apply(engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "boom"})
	expect(t, d, []string{`cancel m[2]`, `fail-run step "m" failed: element 1: boom`},
		[]string{`map_item_failed m i=1 a=1 err=boom`, `run_failed m err=step "m" failed: element 1: boom`})

	d = r.apply(engine.RunRetried{})
	expect(t, d,
		[]string{`schedule m[1] #2 in={"input":[10,20,30]} item=20`, `schedule m[2] #2 in={"input":[10,20,30]} item=30`},
		[]string{`run_retried`, `step_scheduled m i=1 a=2`, `step_scheduled m i=2 a=2`})
	r.refuse(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`9`)}, engine.ErrStale)
	r.apply(engine.ItemCompleted{Step: "m", Index: 2, Attempt: 2, Output: raw(`3`)})
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 2, Output: raw(`2`)})
	expect(t, d, []string{`complete-run {"m":[1,2,3]}`},
		[]string{`map_item_completed m i=1 a=2 data=2`, `step_completed m a=1 ev=ok data=[1,2,3]`, `run_completed data={"m":[1,2,3]}`})
}

// A map step whose source was not an array fails again at once when the
// source is still not one: the retry schedules nothing else.
func TestRetryMapExpansionFailsAgain(t *testing.T) {
	g := newGraph(t).step("a").step("m", mapOver("", "")).
		edge("a", "ok", "done").edge("m", "ok", "done").build()
	r, d := startRun(t, g, `{"not":"an array"}`)
	wantStatus(t, r, hephtype.StatusFailed)
	_ = d
	d = r.apply(engine.RunRetried{})
	wantStatus(t, r, hephtype.StatusFailed)
	for _, c := range d.Commands {
		if _, ok := c.(engine.ScheduleStep); ok {
			t.Errorf("a retry that failed at once scheduled %s", showCommand(c))
		}
	}
	if d.History[0].Kind != hephtype.EventRunRetried || d.History[len(d.History)-1].Kind != hephtype.EventRunFailed {
		t.Errorf("history = %v", showHistory(d.History))
	}
}
