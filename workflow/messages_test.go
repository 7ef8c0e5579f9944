package workflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The signal test's activity sends a signal while it runs, through this
// hook.
type hookKey struct{}

var slowStep = workflow.NewActivity("slow_step", func(ctx context.Context, _ struct{}) (string, error) {
	if f, ok := ctx.Value(hookKey{}).(func()); ok {
		f()
	}
	return "done", nil
})

var collectSignals = workflow.New("collect_signals", func(ctx workflow.Context, _ struct{}) ([]int, error) {
	if _, err := slowStep.Execute(ctx, struct{}{}); err != nil {
		return nil, err
	}
	var got []int
	for range 3 {
		v, err := workflow.WaitSignal[int](ctx, "x")
		if err != nil {
			return nil, err
		}
		got = append(got, v)
	}
	y, err := workflow.WaitSignal[int](ctx, "y")
	if err != nil {
		return nil, err
	}
	return append(got, y), nil
})

func TestSignalsAreBufferedInOrder(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(collectSignals), slowStep)
		r := e.start(collectSignals, struct{}{})
		// Before the wait, while the activity is scheduled.
		e.signal(r, "y", 9)
		e.signal(r, "x", 1)
		// While the activity runs.
		e.ctx = context.WithValue(e.ctx, hookKey{}, func() { e.signal(r, "x", 2) })
		e.settle()
		wantStatus(t, r, hephtype.StatusWaiting)
		// After the wait began.
		e.signal(r, "x", 3)
		if diff := cmp.Diff([]int{1, 2, 3, 9}, output[[]int](t, r)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
	})
}

// Several events delivered to one activation are applied in history order.
func TestSignalsInOneActivation(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(collectSignals), slowStep)
		r := e.start(collectSignals, struct{}{})
		r.Hold()
		for _, v := range []int{4, 5} {
			e.signal(r, "x", v)
		}
		e.signal(r, "y", 0)
		e.signal(r, "x", 6)
		e.settle()
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{4, 5, 6, 0}, output[[]int](t, r)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
		if n := countKind(r.History(), replay.EventDecision); n != 2 {
			t.Fatalf("%d decisions, want 2 (start, then everything at once)", n)
		}
	})
}

// Signals sent before a phase begins reach its handlers; those it does not
// handle stay buffered.
var lateCounter = workflow.New("late_counter", func(ctx workflow.Context, _ struct{}) ([]int, error) {
	if err := workflow.Sleep(ctx, time.Hour); err != nil {
		return nil, err
	}
	n, err := workflow.Phase(ctx, 0,
		workflow.OnSignal("inc", func(ctx workflow.Context, by int, n int) workflow.Next[int] { return workflow.Continue(n + by) }),
		workflow.OnSignal("stop", func(ctx workflow.Context, _ struct{}, n int) workflow.Next[int] { return workflow.Stop(n) }),
	)
	if err != nil {
		return nil, err
	}
	// inc signals queued behind stop went back to the buffer.
	left, err := workflow.WaitSignal[int](ctx, "inc")
	if err != nil {
		return nil, err
	}
	other, err := workflow.WaitSignal[int](ctx, "other")
	return []int{n, left, other}, err
})

func TestSignalsBeforePhase(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(lateCounter))
		r := e.start(lateCounter, struct{}{})
		e.signal(r, "inc", 1)
		e.signal(r, "other", 7)
		e.signal(r, "inc", 10)
		e.signal(r, "stop", nil)
		e.signal(r, "inc", 100)
		e.drive()
		if diff := cmp.Diff([]int{11, 100, 7}, output[[]int](t, r)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
	})
}

var sleeper = workflow.New("sleeper", func(ctx workflow.Context, _ struct{}) (string, error) {
	if err := workflow.Sleep(ctx, time.Hour); err != nil {
		return "", err
	}
	n, err := workflow.Phase(ctx, 0,
		workflow.OnUpdate("add", func(ctx workflow.Context, by int, n int) (workflow.Reply[int, int], error) {
			if by == 13 {
				return workflow.Reply[int, int]{}, errTest
			}
			if err := workflow.Sleep(ctx, time.Minute); err != nil { // a sync handler may block
				return workflow.Reply[int, int]{}, err
			}
			return workflow.Respond(n+by, n+by), nil
		}).Validate(func(by int, n int) error {
			if by < 0 {
				return errTest
			}
			return nil
		}),
		workflow.OnUpdate("stop", func(ctx workflow.Context, _ struct{}, n int) (workflow.Reply[int, int], error) {
			return workflow.RespondAndStop(n, n), nil
		}),
	)
	return strings.Repeat("+", n), err
})

func TestUpdates(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(sleeper))
		r := e.start(sleeper, struct{}{})
		before := len(r.History())
		// Outside a phase: rejected, nothing written.
		wantRejected(t, e.update(r, "a", "add", 1), "not accepting")
		if len(r.History()) != before {
			t.Fatal("a rejected update wrote history")
		}
		e.advance(time.Hour)
		// Unknown update, bad arguments, validator: rejected, nothing written.
		before = len(r.History())
		wantRejected(t, e.update(r, "b", "nope", 1), "not accepting")
		wantRejected(t, e.update(r, "c", "add", "one"), "do not decode")
		wantRejected(t, e.update(r, "d", "add", -1), errTest.Error())
		if len(r.History()) != before {
			t.Fatal("a rejected update wrote history")
		}
		// Accepted while the previous sync handler still sleeps: queued.
		wantAccepted(t, e.update(r, "e", "add", 2))
		wantAccepted(t, e.update(r, "f", "add", 3))
		if o := e.update(r, "e", "add", 2); !o.Accepted || !o.Duplicate {
			t.Fatalf("a duplicate update: %+v", o)
		}
		wantAccepted(t, e.update(r, "g", "add", 13))
		wantAccepted(t, e.update(r, "h", "stop", nil))
		e.advance(time.Minute)
		if _, _, done := r.UpdateResult("f"); done {
			t.Fatal("f is done before e's handler finished")
		}
		e.drive()
		if got := updateResult[int](t, r, "e"); got != 2 {
			t.Fatalf("e replied %d", got)
		}
		if got := updateResult[int](t, r, "f"); got != 5 {
			t.Fatalf("f replied %d", got)
		}
		if _, msg, _ := r.UpdateResult("g"); msg != errTest.Error() {
			t.Fatalf("g failed with %q, want %q", msg, errTest)
		}
		if got := output[string](t, r); got != "+++++" {
			t.Fatalf("output %q", got)
		}
	})
}

// An update accepted but not dispatched when the phase stops fails.
func TestUpdateQueuedBehindStop(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(sleeper))
		r := e.start(sleeper, struct{}{})
		e.advance(time.Hour)
		wantAccepted(t, e.update(r, "s", "stop", nil))
		wantStatus(t, r, hephtype.StatusCompleted)
		e2 := newEnv(t, m, wfs(sleeper))
		r2 := e2.start(sleeper, struct{}{})
		e2.advance(time.Hour)
		wantAccepted(t, e2.update(r2, "a", "add", 1)) // sleeps a minute
		wantAccepted(t, e2.update(r2, "s", "stop", nil))
		wantAccepted(t, e2.update(r2, "b", "add", 1))
		e2.drive()
		if _, msg, done := r2.UpdateResult("b"); !done || !strings.Contains(msg, "phase ended") {
			t.Fatalf("b: done %t, error %q", done, msg)
		}
		if got := output[string](t, r2); got != "+" {
			t.Fatalf("output %q", got)
		}
	})
}

var timeboxed = workflow.New("timeboxed", func(ctx workflow.Context, _ struct{}) (map[string]any, error) {
	n, timedOut, err := workflow.PhaseWithTimeout(ctx, 0, time.Hour,
		workflow.OnSignal("inc", func(ctx workflow.Context, _ struct{}, n int) workflow.Next[int] { return workflow.Continue(n + 1) }),
		workflow.OnSignal("stop", func(ctx workflow.Context, _ struct{}, n int) workflow.Next[int] { return workflow.Stop(n) }),
	)
	return map[string]any{"n": n, "timed_out": timedOut}, err
})

func TestPhaseTimeout(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(timeboxed))
		r := e.start(timeboxed, struct{}{})
		e.signal(r, "inc", nil)
		e.advance(59 * time.Minute)
		wantStatus(t, r, hephtype.StatusWaiting)
		e.advance(time.Minute)
		if diff := cmp.Diff(map[string]any{"n": 1.0, "timed_out": true}, output[map[string]any](t, r)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}

		s := e.start(timeboxed, struct{}{})
		e.signal(s, "inc", nil)
		e.signal(s, "stop", nil)
		if diff := cmp.Diff(map[string]any{"n": 1.0, "timed_out": false}, output[map[string]any](t, s)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
		if n := countKind(s.History(), hephtype.EventTimerCancelled); n != 1 {
			t.Fatalf("%d timer_cancelled, want 1", n)
		}
	})
}
