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
)

// TestChaosResetKilledConnection: a reset (with a key) of a run whose
// second step runs, killed (pg_terminate_backend) while its transaction
// waits for the run's lock, and the caller's retries with the same key
// until one succeeds, then once more: the run is reset once (one
// run_reset), the running attempt of the step is stopped and its result
// refused, the first step keeps its output and runs once, the step runs
// again once and the last step once.
func TestChaosResetKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-reset-chaos"
	st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	started := make(chan struct{}, 1)
	var first, hold, after atomic.Int32
	fb := flow.New("reset-held")
	flow.Step(fb, "first", func(ctx context.Context, in any) (int32, error) { return first.Add(1), nil })
	flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
		if hold.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done() // the reset stops it
			return "late", nil
		}
		return "held", nil
	}, flow.DependsOn("first"))
	flow.Step(fb, "after", func(ctx context.Context, in any) (string, error) {
		after.Add(1)
		return "after", nil
	}, flow.DependsOn("hold"))
	c, err := heph.New(&heph.Config{Store: st, Logger: chaosLogger(), PollInterval: 200 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(fb.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	r, err := c.StartRun(ctx, "reset-held", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started

	reset := func() error {
		_, err := c.ResetRun(ctx, r.ID, "hold", &heph.ResetOptions{By: "ops", Key: "incident-7"})
		return err
	}
	killed, firstErr := killWhileLocked(ctx, t, dsn, app, st.Schema(), r.ID, reset)
	t.Logf("first reset after %d kill(s): %v", killed, firstErr)
	for err := firstErr; err != nil; err = reset() {
		if ctx.Err() != nil || errors.Is(err, heph.ErrNotResettable) {
			t.Fatalf("the retried reset: %v", err)
		}
	}
	if err := reset(); err != nil {
		t.Fatal(err)
	}
	var h []heph.HistoryEvent
	for {
		got, err := c.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == heph.StatusCompleted {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the reset run: %s", got.Status)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if h, err = c.History(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if n := countKind(h, hephtype.EventRunReset); n != 1 {
		t.Fatalf("%d run_reset entries, want 1", n)
	}
	if first.Load() != 1 || hold.Load() != 2 || after.Load() != 1 {
		t.Fatalf("first ran %d times, hold %d, after %d; want 1, 2 (one stopped), 1", first.Load(), hold.Load(), after.Load())
	}
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepCompleted && ev.Step == "hold" && ev.Attempt != 2 {
			t.Fatalf("hold's stopped attempt %d committed", ev.Attempt)
		}
	}
	t.Logf("chaos: backend=postgres fault=killed-connection runs=1 kills=%d resets=1 duplicates=0", killed)
}

// killWhileLocked calls op while an admin session holds the run's row, so
// that op's transaction waits for the lock: there it is killed
// (pg_terminate_backend of the sessions of application app that wait for
// a lock), until one was, then the lock is let go. It returns the number
// of sessions killed and op's error.
func killWhileLocked(ctx context.Context, t *testing.T, dsn, app, schema, runID string, op func() error) (int, error) {
	t.Helper()
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", app+"-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "runs"}.Sanitize()+" WHERE id = $1 FOR UPDATE", runID); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- op() }()
	killed := 0
	for {
		select {
		case err := <-res:
			if killed == 0 {
				t.Fatal("the operation was never killed")
			}
			return killed, err
		case <-ctx.Done():
			t.Fatal("the operation never ended")
		case <-time.After(5 * time.Millisecond):
		}
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
		if killed > 0 && n == 0 {
			// Let the operation (or its retries inside the store) go on.
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
		}
	}
}
