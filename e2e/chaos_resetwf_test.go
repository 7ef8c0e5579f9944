package e2e_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// TestChaosResetWorkflowKilledConnection: the retry (a reset to the last
// good point) of a failed workflow run, killed (pg_terminate_backend)
// while its transaction waits for the old run's lock, then tried again by
// the caller and by two callers at once: one new run is created (its id
// derives from the old run and the point), the old run's history records
// one workflow_reset, and the failed activity runs once more, once.
func TestChaosResetWorkflowKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-resetwf-chaos"
	st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	var broken atomic.Bool
	var calls atomic.Int32
	broken.Store(true)
	charge := workflow.NewActivity("chaos_charge", func(_ context.Context, n int) (int, error) {
		calls.Add(1)
		if broken.Load() {
			return 0, flow.NonRetryable(errors.New("card declined"))
		}
		return n * 10, nil
	})
	wf := workflow.New("chaos_reset_wf", func(ctx workflow.Context, n int) (int, error) {
		return charge.Execute(ctx, n)
	})
	c, err := heph.New(&heph.Config{Store: st, Logger: chaosLogger(), PollInterval: 200 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(c.RegisterWorkflows(wf), c.RegisterActivities(charge)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	r, err := heph.StartWorkflow(ctx, c, wf, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx); err == nil {
		t.Fatal("the broken run completed")
	}
	broken.Store(false)

	// An admin session holds the old run's row, so that the reset's
	// transaction waits for it: there it is killed.
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", app+"-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{st.Schema(), "runs"}.Sanitize()+" WHERE id = $1 FOR UPDATE", r.ID); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		run *heph.Run
		err error
	}
	retried := make(chan outcome, 1)
	go func() {
		nr, err := c.RetryRun(ctx, r.ID)
		retried <- outcome{nr, err}
	}()
	first := killWhileWaiting(ctx, t, admin, tx, app, retried)
	t.Logf("first retry: %v", first.err)
	var newID string
	for o := first; ; {
		if o.err == nil {
			newID = o.run.ID
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the retried reset: %v", o.err)
		}
		nr, err := c.RetryRun(ctx, r.ID)
		o = outcome{nr, err}
	}
	// Two callers at once, after it applied: the same run.
	both := make(chan outcome, 2)
	for range 2 {
		go func() {
			nr, err := c.ResetWorkflow(ctx, r.ID, &heph.ResetWorkflowOptions{Point: heph.ResetPointLastGood, ReapplySignals: true})
			both <- outcome{nr, err}
		}()
	}
	for range 2 {
		if o := <-both; o.err != nil || o.run.ID != newID {
			t.Fatalf("a reset again: %v, %v; want run %s", o.run, o.err, newID)
		}
	}
	out, err := heph.GetWorkflow(c, wf, newID).Get(ctx)
	if err != nil || out != 40 {
		t.Fatalf("the new run: %d, %v", out, err)
	}
	h, err := c.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(h, hephtype.EventWorkflowReset); n != 1 {
		t.Fatalf("%d workflow_reset entries on the old run, want 1", n)
	}
	runs, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "chaos_reset_wf"})
	if err != nil || len(runs.Runs) != 2 {
		t.Fatalf("runs of the workflow: %v, %v; want the old and the new", runs, err)
	}
	if calls.Load() != 2 {
		t.Fatalf("the activity ran %d times, want 2 (the failure, then once after the reset)", calls.Load())
	}
}

// killWhileWaiting kills the connections of app that wait for a lock
// until the call reporting on done ends, releasing tx after the first
// kill; it fails the test if none was killed.
func killWhileWaiting[T any](ctx context.Context, t *testing.T, admin *pgx.Conn, tx pgx.Tx, app string, done <-chan T) T {
	t.Helper()
	killed := 0
	for {
		select {
		case v := <-done:
			_ = tx.Rollback(ctx)
			if killed == 0 {
				t.Fatal("nothing was killed")
			}
			return v
		case <-ctx.Done():
			t.Fatal("the call never ended")
		case <-time.After(5 * time.Millisecond):
		}
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
		if killed > 0 && n == 0 {
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
		}
	}
}
