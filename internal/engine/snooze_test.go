package engine_test

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// A snooze schedules the same attempt again after its delay: the attempts
// a step may fail are not reduced by it.
func TestSnoozeConsumesNoAttempt(t *testing.T) {
	g := newGraph(t).step("job", attempts(2)).build()
	r, _ := startRun(t, g, `1`)
	for range 3 {
		d := r.apply(engine.StepSnoozed{Step: "job", Index: -1, Attempt: 1, After: time.Minute})
		if len(d.Commands) != 1 {
			t.Fatalf("commands %v", showCommands(d.Commands))
		}
		c, ok := d.Commands[0].(engine.ScheduleStep)
		if !ok || c.Attempt != 1 || c.Delay != time.Minute || c.Retry || string(c.Input) != `{"input":1}` {
			t.Fatalf("snooze scheduled %v", showCommands(d.Commands))
		}
		if len(d.History) != 1 || d.History[0].Kind != hephtype.EventStepSnoozed || d.History[0].Attempt != 1 {
			t.Fatalf("snooze history %v", showHistory(d.History))
		}
		wantStatus(t, r, hephtype.StatusRunning)
	}
	// Attempt 1 fails: one retry is left, as without the snoozes.
	d := r.apply(engine.StepFailed{Step: "job", Attempt: 1, Error: "x", Retryable: true})
	if c, ok := d.Commands[0].(engine.ScheduleStep); !ok || c.Attempt != 2 || !c.Retry || c.Delay != 0 {
		t.Fatalf("retry after snoozes: %v", showCommands(d.Commands))
	}
	r.refuse(engine.StepSnoozed{Step: "job", Index: -1, Attempt: 1, After: time.Minute}, engine.ErrStale)
	r.apply(engine.StepCompleted{Step: "job", Attempt: 2})
	wantStatus(t, r, hephtype.StatusCompleted)
	r.refuse(engine.StepSnoozed{Step: "job", Index: -1, Attempt: 2, After: time.Minute}, engine.ErrStale)
}

func TestSnoozeMapElement(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", "")).build()
	r, _ := startRun(t, g, `[1,2]`)
	d := r.apply(engine.StepSnoozed{Step: "m", Index: 1, Attempt: 1, After: time.Second})
	if c, ok := d.Commands[0].(engine.ScheduleStep); !ok || c.Index != 1 || c.Attempt != 1 || string(c.Item) != `2` || c.Delay != time.Second {
		t.Fatalf("element snooze: %v", showCommands(d.Commands))
	}
	r.refuse(engine.StepSnoozed{Step: "m", Index: 5, Attempt: 1, After: time.Second}, engine.ErrStale)
	if _, err := engine.Apply(g, r.s, engine.StepSnoozed{Step: "m", Index: 0, Attempt: 1, After: -time.Second}); err == nil {
		t.Fatal("a negative snooze was accepted")
	}
}

func TestCancelFromInside(t *testing.T) {
	g := newGraph(t).step("a").step("b").build()
	r, _ := startRun(t, g, `1`)
	d := r.apply(engine.StepCancelled{Step: "a", Index: -1, Attempt: 1, Reason: "no longer needed"})
	wantStatus(t, r, hephtype.StatusCancelled)
	if r.s.Error != "no longer needed" {
		t.Fatalf("error %q", r.s.Error)
	}
	if got := showHistory(d.History); got[len(got)-1] == "" || d.History[len(d.History)-1].Kind != hephtype.EventRunCancelled {
		t.Fatalf("history %v", got)
	}
	var cancelRun bool
	for _, c := range d.Commands {
		if _, ok := c.(engine.CancelRun); ok {
			cancelRun = true
		}
	}
	if !cancelRun {
		t.Fatalf("commands %v", showCommands(d.Commands))
	}
	r.refuse(engine.StepCancelled{Step: "b", Index: -1, Attempt: 1}, engine.ErrStale)
}

func TestCancelFromInsideStale(t *testing.T) {
	g := newGraph(t).step("a", attempts(3)).build()
	r, _ := startRun(t, g, `1`)
	r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "x", Retryable: true})
	r.refuse(engine.StepCancelled{Step: "a", Index: -1, Attempt: 1, Reason: "late"}, engine.ErrStale)
	r.apply(engine.StepCancelled{Step: "a", Index: -1, Attempt: 2})
	if r.s.Error != `cancelled by step "a"` {
		t.Fatalf("error %q", r.s.Error)
	}
}
