package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// chain10 is s1 -> s2 -> ... -> s10, three attempts each.
func chain10(t *testing.T) *engine.Graph {
	b := newGraph(t)
	for i := 1; i <= 10; i++ {
		b.step(fmt.Sprintf("s%d", i), attempts(3))
	}
	for i := 1; i < 10; i++ {
		b.edge(fmt.Sprintf("s%d", i), "ok", fmt.Sprintf("s%d", i+1))
	}
	return b.edge("s10", "ok", "done").build()
}

// A 10-step chain reset to step 4 while step 8 runs: step 8's attempt is
// cancelled (its late report is stale), steps 1-3 keep their outputs and
// never run again, step 4 runs again with attempt 2 and an input of the
// kept outputs, and steps 5-10 follow with their attempts counting on.
func TestResetChainWhileStepRuns(t *testing.T) {
	g := chain10(t)
	r, _ := startRun(t, g, `"in"`)
	for i := 1; i <= 7; i++ {
		r.apply(engine.StepCompleted{Step: fmt.Sprintf("s%d", i), Attempt: 1, Output: raw(fmt.Sprint(i))})
	}
	r.refuse(engine.RunReset{Step: "s9"}, engine.ErrNotResettable)
	r.refuse(engine.RunReset{Step: "nope"}, engine.ErrUnknownStep)
	d := r.apply(engine.RunReset{Step: "s4", By: "alice"})
	expect(t, d, []string{`cancel s8`, `schedule s4 #2 in={"input":"in","s1":1,"s2":2,"s3":3}`},
		[]string{`run_reset s4 ev=alice data={"steps":["s4","s5","s6","s7","s8","s9","s10"]}`, `step_cancelled s8`, `step_scheduled s4 a=2`})
	wantStatus(t, r, hephtype.StatusRunning)
	for _, n := range []string{"s4", "s5", "s6", "s7", "s8"} {
		if st := r.step(n); n != "s4" && (st.Status != hephtype.StepPending || st.Output != nil || st.Event != "") {
			t.Errorf("step %s after the reset: %+v, want pending with no output", n, st)
		}
	}
	r.refuse(engine.StepCompleted{Step: "s8", Attempt: 1, Output: raw(`"late"`)}, engine.ErrStale)
	r.refuse(engine.StepCompleted{Step: "s4", Attempt: 1, Output: raw(`"late"`)}, engine.ErrStale)
	// The fresh budget: attempt 2 and 3 of step 4 may fail, attempt 4 is
	// its third since the reset.
	r.apply(engine.StepFailed{Step: "s4", Attempt: 2, Error: "flaky", Retryable: true})
	r.apply(engine.StepFailed{Step: "s4", Attempt: 3, Error: "flaky", Retryable: true})
	d = r.apply(engine.StepCompleted{Step: "s4", Attempt: 4, Output: raw(`40`)})
	expect(t, d, []string{`schedule s5 #2 in={"input":"in","s1":1,"s2":2,"s3":3,"s4":40}`},
		[]string{`step_completed s4 a=4 ev=ok data=40`, `step_scheduled s5 a=2`})
	r.apply(engine.StepCompleted{Step: "s5", Attempt: 2, Output: raw(`50`)})
	r.apply(engine.StepCompleted{Step: "s6", Attempt: 2, Output: raw(`60`)})
	r.apply(engine.StepCompleted{Step: "s7", Attempt: 2, Output: raw(`70`)})
	d = r.apply(engine.StepCompleted{Step: "s8", Attempt: 2, Output: raw(`80`)})
	expect(t, d, []string{`schedule s9 #1 in={"input":"in","s1":1,"s2":2,"s3":3,"s4":40,"s5":50,"s6":60,"s7":70,"s8":80}`},
		[]string{`step_completed s8 a=2 ev=ok data=80`, `step_scheduled s9 a=1`})
	r.apply(engine.StepCompleted{Step: "s9", Attempt: 1, Output: raw(`90`)})
	d = r.apply(engine.StepCompleted{Step: "s10", Attempt: 1, Output: raw(`100`)})
	expect(t, d, []string{`complete-run {"s10":100}`},
		[]string{`step_completed s10 a=1 ev=ok data=100`, `run_completed data={"s10":100}`})
}

// A completed run reset to its first step runs every step again; a failed
// run reset to a step before the failure runs from there, its error
// cleared; a cancelled run is refused.
func TestResetCompletedFailedCancelled(t *testing.T) {
	g := newGraph(t).step("a").step("b").step("c").
		edge("a", "ok", "b").edge("b", "ok", "c").edge("c", "ok", "done").build()
	r, _ := startRun(t, g, `null`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)})
	r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Output: raw(`2`)})
	r.apply(engine.StepCompleted{Step: "c", Attempt: 1, Output: raw(`3`)})
	wantStatus(t, r, hephtype.StatusCompleted)
	d := r.apply(engine.RunReset{Step: "a"})
	expect(t, d, []string{`schedule a #2 in={"input":null}`},
		[]string{`run_reset a data={"steps":["a","b","c"]}`, `step_scheduled a a=2`})
	if r.s.Output != nil {
		t.Errorf("output after the reset: %s", r.s.Output)
	}
	r.apply(engine.StepCompleted{Step: "a", Attempt: 2, Output: raw(`10`)})
	r.apply(engine.StepFailed{Step: "b", Attempt: 2, Error: "boom"})
	wantStatus(t, r, hephtype.StatusFailed)
	d = r.apply(engine.RunReset{Step: "b"})
	expect(t, d, []string{`schedule b #3 in={"input":null,"a":10}`},
		[]string{`run_reset b data={"steps":["b","c"]}`, `step_scheduled b a=3`})
	if r.s.Error != "" {
		t.Errorf("error after the reset: %q", r.s.Error)
	}
	r.apply(engine.Cancel{Reason: "stop"})
	r.refuse(engine.RunReset{Step: "a"}, engine.ErrNotResettable)
}

// Reset to a branch: the other branch keeps running (its attempt is not
// cancelled); a waiting step after the reset step has its timer cancelled;
// a failed step outside the reset runs again, as a retry would.
func TestResetBranches(t *testing.T) {
	g := newGraph(t).step("a").step("b").step("w", events("ok"), waitTimeout(60e9)).step("c").step("j").
		edge("a", "ok", "b", "c").edge("b", "ok", "w").edge("w", "ok", "j").edge("w", "timeout", "j").edge("c", "ok", "j").edge("j", "ok", "done").build()
	r, _ := startRun(t, g, `null`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)})
	r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Output: raw(`2`)})
	r.apply(engine.StepWaiting{Step: "w", Attempt: 1})
	d := r.apply(engine.RunReset{Step: "b"})
	expect(t, d, []string{`cancel-timer w`, `schedule b #2 in={"input":null,"a":1}`},
		[]string{`run_reset b data={"steps":["b","w","j"]}`, `timer_cancelled w`, `step_cancelled w`, `step_scheduled b a=2`})
	if st := r.step("c"); st.Status != hephtype.StepScheduled || st.Attempt != 1 {
		t.Errorf("step c: %+v, want still scheduled (attempt 1)", st)
	}
	r.refuse(engine.Resume{Step: "w", Event: "ok"}, engine.ErrNotWaiting)
	r.apply(engine.StepFailed{Step: "c", Attempt: 1, Error: "boom"})
	wantStatus(t, r, hephtype.StatusFailed)
	// b was cancelled by the failure; reset to w (not run since) is
	// refused; reset to b runs b again, and c (failed, outside) too.
	r.refuse(engine.RunReset{Step: "w"}, engine.ErrNotResettable)
	d = r.apply(engine.RunReset{Step: "b"})
	expect(t, d, []string{`schedule c #2 in={"input":null,"a":1}`, `schedule b #3 in={"input":null,"a":1}`},
		[]string{`run_reset b data={"steps":["b","w","j"]}`, `step_scheduled c a=2`, `step_scheduled b a=3`})
}

// A map step reset while its elements run: the running elements are
// cancelled, the elements are made anew from the (kept) source, every
// element's attempt is above any before it, so reports of old elements are
// stale.
func TestResetMap(t *testing.T) {
	g := newGraph(t).step("a").step("m", mapOver("a", ""), attempts(2)).
		edge("a", "ok", "m").edge("m", "ok", "done").build()
	r, _ := startRun(t, g, `null`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`[1,2]`)})
	r.apply(engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "flaky", Retryable: true})
	r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`"x"`)})
	d := r.apply(engine.RunReset{Step: "m"})
	expect(t, d, []string{`cancel m[1]`, `schedule m[0] #3 in={"input":null,"a":[1,2]} item=1`, `schedule m[1] #3 in={"input":null,"a":[1,2]} item=2`},
		[]string{`run_reset m data={"steps":["m"]}`, `step_cancelled m`, `map_expanded m i=2`})
	r.refuse(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 2, Output: raw(`"late"`)}, engine.ErrStale)
	r.refuse(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`"late"`)}, engine.ErrStale)
	// Each element has a fresh budget of two attempts.
	r.apply(engine.ItemFailed{Step: "m", Index: 0, Attempt: 3, Error: "flaky", Retryable: true})
	r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 4, Output: raw(`"a"`)})
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 3, Output: raw(`"b"`)})
	expect(t, d, []string{`complete-run {"m":["a","b"]}`},
		[]string{`map_item_completed m i=1 a=3 data="b"`, `step_completed m a=3 ev=ok data=["a","b"]`, `run_completed data={"m":["a","b"]}`})
}

// A run of one step (a job) is reset to it without naming it; a run of
// several steps needs the step.
func TestResetOneStep(t *testing.T) {
	g := newGraph(t).step("only").edge("only", "ok", "done").build()
	r, _ := startRun(t, g, `1`)
	r.apply(engine.StepCompleted{Step: "only", Attempt: 1, Output: raw(`2`)})
	d := r.apply(engine.RunReset{})
	expect(t, d, []string{`schedule only #2 in={"input":1}`},
		[]string{`run_reset only data={"steps":["only"]}`, `step_scheduled only a=2`})
	g = chain10(t)
	r, _ = startRun(t, g, `1`)
	if err := r.refuseErr(engine.RunReset{}, engine.ErrUnknownStep); err == nil || !strings.Contains(err.Error(), "the step to reset to is empty") {
		t.Errorf("reset with no step: %v", err)
	}
}
