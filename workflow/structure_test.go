package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// --- Parallel ---------------------------------------------------------------

var fails = workflow.NewActivity("fails", func(ctx context.Context, _ string) (string, error) {
	return "", flow.NonRetryable(errTest)
})

var fanOut = workflow.New("fan_out", func(ctx workflow.Context, _ struct{}) ([]string, error) {
	results := workflow.Parallel(ctx,
		func(ctx workflow.Context) (string, error) {
			if err := workflow.Sleep(ctx, 2*time.Hour); err != nil {
				return "", err
			}
			return stepA.Execute(ctx, "slow")
		},
		func(ctx workflow.Context) (string, error) { return fails.Execute(ctx, "") },
		func(ctx workflow.Context) (string, error) {
			// Nested fan-out.
			inner := workflow.Parallel(ctx,
				func(ctx workflow.Context) (string, error) { return stepB.Execute(ctx, "x") },
				func(ctx workflow.Context) (string, error) {
					if err := workflow.Sleep(ctx, time.Hour); err != nil {
						return "", err
					}
					return stepC.Execute(ctx, "y")
				},
			)
			return inner[0].Value + "+" + inner[1].Value, nil
		},
		func(ctx workflow.Context) (string, error) { panic("boom") },
	)
	var out []string
	for _, r := range results {
		var ae *workflow.ActivityError
		var pe *workflow.PanicError
		switch {
		case errors.As(r.Err, &ae):
			out = append(out, "activity error: "+ae.Message)
		case errors.As(r.Err, &pe):
			out = append(out, "panic: "+pe.Value.(string))
		case r.Err != nil:
			out = append(out, "error: "+r.Err.Error())
		default:
			out = append(out, r.Value)
		}
	}
	return out, nil
})

func TestParallel(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(fanOut), stepA, stepB, stepC, fails)
		r := e.start(fanOut, struct{}{})
		// The first activation issues every branch's first command, in
		// branch order: timer, activity, then the nested branches'.
		var first []string
		for _, ev := range r.History()[2:] {
			first = append(first, ev.String())
		}
		want := []string{`timer_started #1 (2h0m0s)`, `step_scheduled #2 "fails"`, `step_scheduled #3 "step_b"`, `timer_started #4 (1h0m0s)`}
		if diff := cmp.Diff(want, first); diff != "" {
			t.Fatalf("first decision (-want +got):\n%s", diff)
		}
		e.drive()
		want = []string{"a(slow)", "activity error: test failure", "b(x)+c(y)", "panic: boom"}
		if diff := cmp.Diff(want, output[[]string](t, r)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
	})
}

// --- Children -----------------------------------------------------------------

var (
	child = workflow.New("child", func(ctx workflow.Context, in string) (string, error) {
		if in == "fail" {
			return "", errTest
		}
		if in == "forever" {
			_, err := workflow.WaitSignal[string](ctx, "never")
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		return stepA.Execute(ctx, in)
	})
	parent = workflow.New("parent", func(ctx workflow.Context, _ struct{}) ([]string, error) {
		orphan := child.StartChild(ctx, "forever")
		_ = orphan // never waited for: cancelled when the parent ends
		c1 := child.StartChild(ctx, "one")
		out2, err2 := child.ExecuteChild(ctx, "fail")
		out1, err1 := c1.Get(ctx)
		var ce *workflow.ChildError
		if !errors.As(err2, &ce) || err1 != nil {
			return nil, errors.Join(err1, err2)
		}
		return []string{out1, out2, ce.Message}, nil
	})
)

func TestChildren(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(parent, child), stepA)
		p := e.start(parent, struct{}{})
		e.drive()
		if diff := cmp.Diff([]string{"a(one)", "", errTest.Error()}, output[[]string](t, p)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
		cancels := find(p.History(), replay.EventChildCancelled)
		if len(cancels) != 1 || cancels[0].ID != 1 {
			t.Fatalf("child cancellations %v, want the orphan (#1)", cancels)
		}
		// The orphan run was cancelled with its parent.
		var got []string
		for _, r := range e.sim.Runs()[1:] {
			got = append(got, string(r.Status()))
		}
		if diff := cmp.Diff([]string{"cancelled", "completed", "failed"}, got); diff != "" {
			t.Fatalf("children (-want +got):\n%s", diff)
		}
	})
}

// --- Misuse -----------------------------------------------------------------

var misuse = workflow.New("misuse", func(ctx workflow.Context, _ struct{}) ([]string, error) {
	var out []string
	results := workflow.Parallel(ctx,
		func(bctx workflow.Context) (string, error) {
			return stepA.Execute(ctx, "outer ctx") // the parent's Context
		},
		func(bctx workflow.Context) (string, error) {
			_, err := workflow.Phase(bctx, 0) // no phase in a branch
			return "", err
		},
		func(bctx workflow.Context) (string, error) {
			return workflow.UpdateState(bctx, func(s int) (string, int) { return "", s }), nil
		},
	)
	for _, r := range results {
		out = append(out, r.Err.Error())
	}
	_, err := workflow.Phase(ctx, 0,
		workflow.OnSignal("x", func(ctx workflow.Context, _ struct{}, n int) workflow.Next[int] { return workflow.Stop(n) }),
		workflow.OnSignal("x", func(ctx workflow.Context, _ struct{}, n int) workflow.Next[int] { return workflow.Stop(n) }),
	)
	out = append(out, err.Error())
	return out, nil
})

func TestMisuse(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(misuse), stepA)
		r := e.start(misuse, struct{}{})
		got := output[[]string](t, r)
		for i, want := range []string{"another unit", "Phase can only", "async phase handler", "same signal"} {
			if !strings.Contains(got[i], want) {
				t.Errorf("error %d = %q, want it to mention %q", i, got[i], want)
			}
		}
	})
}

// --- Activities ------------------------------------------------------------

var flaky = workflow.NewActivity("flaky", func(ctx context.Context, n int) (int, error) {
	info, _ := workflow.GetActivityInfo(ctx)
	workflow.RecordHeartbeat(ctx, info.Attempt)
	if info.Attempt < n {
		return 0, errTest
	}
	return info.Attempt, nil
}).WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 3}})

var retrying = workflow.New("retrying", func(ctx workflow.Context, n int) (int, error) {
	return flaky.Execute(ctx, n)
})

func TestActivityRetriesAndHeartbeats(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(retrying), flaky)
		r := e.start(retrying, 3)
		e.settle()
		if got := output[int](t, r); got != 3 {
			t.Fatalf("output %d", got)
		}
		if diff := cmp.Diff([]any{1, 2, 3}, r.Heartbeats()); diff != "" {
			t.Fatalf("heartbeats (-want +got):\n%s", diff)
		}
		if n := countKind(r.History(), hephtype.EventStepRetrying); n != 2 {
			t.Fatalf("%d step_retrying events", n)
		}
		f := e.start(retrying, 4)
		e.settle()
		wantStatus(t, f, hephtype.StatusFailed)
		if !strings.Contains(f.Err(), `activity "flaky" failed after 3 attempt(s): test failure`) {
			t.Fatalf("error %q", f.Err())
		}
	})
}
