package workflow_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// wakeAt sleeps until the time its input names and returns the workflow's
// time when it woke.
var wakeAt = workflow.New("wake_at", func(ctx workflow.Context, due time.Time) (time.Time, error) {
	if err := workflow.SleepUntil(ctx, due); err != nil {
		return time.Time{}, err
	}
	return workflow.Now(ctx), nil
})

// SleepUntil waits on a timer that fires at the time given, on the sim's
// fake clock, the same in a fresh replay of every activation and with a
// sticky instance checked against one.
func TestSleepUntil(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(wakeAt))
		due := e.sim.Now().Add(90 * time.Minute).Truncate(time.Second)
		r := e.start(wakeAt, due)
		e.advance(89 * time.Minute)
		wantStatus(t, r, hephtype.StatusWaiting)
		timers := find(r.History(), hephtype.EventTimerStarted)
		if len(timers) != 1 {
			t.Fatalf("%d timers started, want 1: %v", len(timers), kinds(r.History()))
		}
		e.advance(time.Minute)
		wantStatus(t, r, hephtype.StatusCompleted)
		if got := output[time.Time](t, r); !got.Equal(due) {
			t.Fatalf("woke at %v, want %v", got, due)
		}
		if n := countKind(r.History(), hephtype.EventTimerFired); n != 1 {
			t.Fatalf("%d timers fired, want 1", n)
		}
	})
}

// A time already past returns at once and starts no timer.
func TestSleepUntilPast(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(wakeAt))
		for _, due := range []time.Time{e.sim.Now().Add(-time.Hour), e.sim.Now(), {}} {
			r := e.start(wakeAt, due)
			e.settle()
			wantStatus(t, r, hephtype.StatusCompleted)
			if n := countKind(r.History(), hephtype.EventTimerStarted); n != 0 {
				t.Fatalf("due %v: %d timers started, want none", due, n)
			}
		}
	})
}

// A history recorded while the run slept replays without a difference
// (the wait is computed from the recorded time, not the replay's) in a
// new sim, sticky or fresh, and the timer fires at the due time.
func TestSleepUntilReplay(t *testing.T) {
	rec := newEnv(t, modes[0], wfs(wakeAt))
	due := rec.sim.Now().Add(2 * time.Hour).Truncate(time.Second)
	run := rec.start(wakeAt, due)
	rec.settle()
	rec.advance(30 * time.Minute)
	h := run.History()
	eachMode(t, func(t *testing.T, m mode) {
		e, r, err := resume(t, m, wakeAt, h)
		if err != nil {
			t.Fatalf("replay of the sleeping run: %v", err)
		}
		e.settle()
		wantStatus(t, r, hephtype.StatusWaiting)
		if diff := cmp.Diff(kinds(h), kinds(r.History())); diff != "" {
			t.Fatalf("the replay changed the history (-recorded +replayed):\n%s", diff)
		}
		e.advance(89 * time.Minute)
		wantStatus(t, r, hephtype.StatusWaiting)
		e.advance(time.Hour)
		wantStatus(t, r, hephtype.StatusCompleted)
		if got := output[time.Time](t, r); !got.Equal(due) {
			t.Fatalf("woke at %v, want %v", got, due)
		}
	})
}
