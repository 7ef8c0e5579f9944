package hephaestus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var timeoutWorkflow = workflow.New("timeouts.waits", func(ctx workflow.Context, in string) (string, error) {
	return workflow.WaitSignal[string](ctx, "go")
})

// Execution timeouts on each backend, with the fake clock: a flow run
// times out while its step runs (the step sees its context cancelled and
// its late commit is refused), a workflow times out while it waits for a
// signal, a job times out between its retries and runs no further
// attempt, and a run that finished before its deadline is left alone.
func TestExecutionTimeout(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC)
			clk := clock.NewFake(start)

			started := make(chan struct{}, 1)
			release := make(chan struct{})
			var sawCancel, returned atomic.Bool
			b := flow.New("timeouts.slow")
			flow.Step(b, "slow", func(ctx context.Context, in int) (int, error) {
				select {
				case started <- struct{}{}:
				default:
				}
				<-ctx.Done()
				sawCancel.Store(true)
				<-release // then it reports success, too late
				returned.Store(true)
				return in, nil
			}, flow.Timeout(1000*time.Hour))
			q := flow.New("timeouts.quick").ExecutionTimeout(time.Hour)
			flow.Step(q, "quick", func(ctx context.Context, in int) (int, error) { return in, nil })
			var attempts atomic.Int32
			failing := job.MustNew("timeouts.flaky", func(ctx context.Context, j *job.Job[string]) error {
				attempts.Add(1)
				return errors.New("flaky")
			}, &job.Options[string]{Retry: flow.RetryPolicy{MaxAttempts: 100, InitialBackoff: time.Hour, MaxBackoff: time.Hour}})

			c := startClient(t, ctx, &heph.Config{Store: open(t), Clock: clk, Logger: quietLogger(), LeaseDuration: 1000 * time.Hour},
				func(c *heph.Client) error {
					return errors.Join(c.Register(b.MustBuild(), q.MustBuild()), c.RegisterJobs(failing), c.RegisterWorkflows(timeoutWorkflow))
				})
			var once atomic.Bool
			releaseStep := func() {
				if once.CompareAndSwap(false, true) {
					close(release)
				}
			}
			t.Cleanup(releaseStep) // before the client stops, should the test fail
			if _, err := c.StartRun(ctx, "timeouts.slow", 1, &heph.StartOptions{ExecutionTimeout: -time.Second}); !errors.Is(err, heph.ErrInvalidInput) {
				t.Fatalf("a negative timeout: %v, want ErrInvalidInput", err)
			}

			slow, err := c.StartRun(ctx, "timeouts.slow", 1, &heph.StartOptions{ExecutionTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if !slow.Deadline.Equal(start.Add(time.Hour)) {
				t.Fatalf("Deadline %v, want %v", slow.Deadline, start.Add(time.Hour))
			}
			quick, err := c.Run(ctx, "timeouts.quick", 2, nil) // the flow's default
			if err != nil || quick.Status != heph.StatusCompleted || !quick.Deadline.Equal(start.Add(time.Hour)) {
				t.Fatalf("quick run: %+v, %v", quick, err)
			}
			wf, err := c.StartWorkflow(ctx, "timeouts.waits", "x", &heph.WorkflowOptions{ExecutionTimeout: 2 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			jb, err := heph.InsertJob(ctx, c, failing, "a", &heph.JobOptions{ExecutionTimeout: 25 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the slow step never started")
			}
			waitFor(t, ctx, func() bool { return attempts.Load() == 1 })
			waitFor(t, ctx, func() bool {
				r, err := c.GetRun(ctx, wf.ID)
				return err == nil && r.Status == heph.StatusWaiting
			})

			// ended waits for a run to end as timed out; the fake clock
			// moves on a little while it waits, so the sweep's next look
			// comes whenever it started waiting.
			ended := func(id string) *heph.Run {
				t.Helper()
				var r *heph.Run
				waitFor(t, ctx, func() bool {
					var err error
					r, err = c.GetRun(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if !r.Status.Terminal() {
						clk.Advance(time.Second)
					}
					return r.Status.Terminal()
				})
				if r.Status != heph.StatusFailed || r.Condition.Code != heph.ConditionTimedOut || r.Error != r.Condition.Message || r.Error == "" {
					t.Fatalf("run %s: status %s, error %q, condition %+v; want failed, timed out", id, r.Status, r.Error, r.Condition)
				}
				h, err := c.History(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if last := h[len(h)-1]; last.Kind != hephtype.EventRunTimedOut || last.Error != r.Error {
					t.Fatalf("run %s: last history entry %+v, want run_timed_out", id, last)
				}
				return r
			}

			// The job: attempt 1 failed, its retry is due in an hour; at
			// +25m the job times out while it waits for it.
			clk.Advance(25 * time.Minute)
			ended(jb.ID)
			n := attempts.Load()
			if n != 1 {
				t.Fatalf("the job ran %d attempts before it timed out, want 1", n)
			}

			// The flow run, past its hour: the step sees the cancel; its
			// late success is refused.
			clk.Advance(30 * time.Minute)
			r := ended(slow.ID)
			waitFor(t, ctx, func() bool { return sawCancel.Load() })
			releaseStep()
			waitFor(t, ctx, func() bool { return returned.Load() })
			h, err := c.History(ctx, slow.ID)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []hephtype.EventKind
			for _, e := range h {
				kinds = append(kinds, e.Kind)
			}
			want := []hephtype.EventKind{hephtype.EventRunStarted, hephtype.EventStepScheduled, hephtype.EventStepCancelled, hephtype.EventRunTimedOut}
			if len(kinds) != len(want) {
				t.Fatalf("history of the timed-out flow run: %v, want %v", kinds, want)
			}
			for i := range want {
				if kinds[i] != want[i] {
					t.Fatalf("history of the timed-out flow run: %v, want %v", kinds, want)
				}
			}
			if err := c.CancelRun(ctx, r.ID, "late"); !errors.Is(err, heph.ErrRunFinished) {
				t.Fatalf("cancel after the timeout: %v, want ErrRunFinished", err)
			}

			// The workflow, waiting for its signal.
			clk.Advance(time.Hour)
			ended(wf.ID)
			if err := c.SignalWorkflow(ctx, wf.ID, "go", "late"); !errors.Is(err, heph.ErrRunFinished) {
				t.Fatalf("signal after the timeout: %v, want ErrRunFinished", err)
			}

			// The job ran no attempt after it timed out, however long
			// its retries would have gone on; the quick run is untouched.
			clk.Advance(2 * time.Hour)
			if got := attempts.Load(); got != n {
				t.Fatalf("the job ran %d attempts after it timed out (%d before)", got, n)
			}
			q2, err := c.GetRun(ctx, quick.ID)
			if err != nil || q2.Status != heph.StatusCompleted || !q2.Condition.IsZero() {
				t.Fatalf("the quick run after its deadline: %+v, %v", q2, err)
			}
			hq, err := c.History(ctx, quick.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range hq {
				if e.Kind == hephtype.EventRunTimedOut {
					t.Fatalf("the quick run has a run_timed_out entry: %+v", hq)
				}
			}
		})
	}
}

var (
	stcAttempts atomic.Int32
	stcActivity = workflow.NewActivity("timeouts.flaky", func(ctx context.Context, s string) (string, error) {
		stcAttempts.Add(1)
		return "", errors.New("flaky")
	}).WithOptions(workflow.ActivityOptions{
		ScheduleToCloseTimeout: 25 * time.Minute,
		RetryPolicy:            flow.RetryPolicy{MaxAttempts: 100, InitialBackoff: 10 * time.Minute, MaxBackoff: 10 * time.Minute},
	})
	stcWorkflow = workflow.New("timeouts.stc", func(ctx workflow.Context, in string) (bool, error) {
		_, err := stcActivity.Execute(ctx, in)
		return errors.Is(err, workflow.ErrTimeout), nil
	})
)

// An activity's ScheduleToCloseTimeout stops its retries: attempt 1
// fails at once, attempt 2 about 10 minutes later, attempt 3 about 20;
// a fourth could start only after the 25 minutes, so none is scheduled
// and the activity fails with an error that is ErrTimeout.
func TestActivityScheduleToClose(t *testing.T) {
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stcAttempts.Store(0)
			clk := clock.NewFake(time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC))
			c := startClient(t, ctx, &heph.Config{Store: open(t), Clock: clk, Logger: quietLogger(), LeaseDuration: 1000 * time.Hour},
				func(c *heph.Client) error {
					return errors.Join(c.RegisterWorkflows(stcWorkflow), c.RegisterActivities(stcActivity))
				})
			r, err := c.StartWorkflow(ctx, "timeouts.stc", "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			var done *heph.Run
			waitFor(t, ctx, func() bool {
				done, err = c.GetRun(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !done.Status.Terminal() {
					clk.Advance(time.Minute)
				}
				return done.Status.Terminal()
			})
			if done.Status != heph.StatusCompleted || string(done.Output) != "true" {
				t.Fatalf("run %+v: want completed with true (the activity's error is ErrTimeout)", done)
			}
			// The test moves the clock a minute per look, not per attempt:
			// on a loaded machine a retry can start late, past the limit,
			// so fewer attempts may run; never more than 3.
			n := stcAttempts.Load()
			if n < 1 || n > 3 {
				t.Fatalf("%d attempts, want 1 to 3", n)
			}
			clk.Advance(time.Hour)
			if m := stcAttempts.Load(); m != n {
				t.Fatalf("%d attempts after the timeout, want %d", m, n)
			}
		})
	}
}
