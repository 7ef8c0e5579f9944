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

// TestChaosPauseKilledConnection: a pause of a run whose step runs,
// killed (pg_terminate_backend) while its transaction waits for the run's
// lock, and the caller's retries: the run is paused once (one run_paused
// in its history), the step's result is kept, the next step runs once
// only after the unpause.
func TestChaosPauseKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-pause-chaos"
	st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	started, release := make(chan struct{}, 1), make(chan struct{})
	var hold, after atomic.Int32
	fb := flow.New("held")
	flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
		hold.Add(1)
		started <- struct{}{}
		<-release
		return "held", nil
	})
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
	r, err := c.StartRun(ctx, "held", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started

	// An admin session holds the run's row, so that the pause's
	// transaction waits for it: there it is killed.
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", "heph-pause-chaos-admin"))
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
	paused := make(chan error, 1)
	go func() { paused <- c.PauseRun(ctx, r.ID, &heph.PauseOptions{By: "ops"}) }()
	killed := 0
	var first error
	for done := false; !done; {
		select {
		case first = <-paused:
			done = true
			continue
		case <-ctx.Done():
			t.Fatal("the pause never ended")
		case <-time.After(5 * time.Millisecond):
		}
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
		if killed > 0 && n == 0 {
			// Let the pause (or its retries inside the store) go on.
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
		}
	}
	_ = tx.Rollback(ctx)
	if killed == 0 {
		t.Fatal("no pause was killed")
	}
	t.Logf("first pause after %d kill(s): %v", killed, first)
	// The caller tries again until a pause succeeds, then once more.
	for err := first; err != nil; err = c.PauseRun(ctx, r.ID, &heph.PauseOptions{By: "ops"}) {
		if ctx.Err() != nil || errors.Is(err, heph.ErrRunFinished) {
			t.Fatalf("the retried pause: %v", err)
		}
	}
	if err := c.PauseRun(ctx, r.ID, &heph.PauseOptions{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	for {
		h, err := c.History(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := countKind(h, hephtype.EventRunPaused); n != 1 {
			t.Fatalf("%d run_paused entries, want 1", n)
		}
		if countKind(h, hephtype.EventStepCompleted) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the running step never committed")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if after.Load() != 0 {
		t.Fatal("the next step ran while the run was paused")
	}
	if err := c.UnpauseRun(ctx, r.ID, nil); err != nil {
		t.Fatal(err)
	}
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
			t.Fatalf("the run after unpause: %s", got.Status)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if hold.Load() != 1 || after.Load() != 1 {
		t.Fatalf("hold ran %d times, after %d; want once each", hold.Load(), after.Load())
	}
}

func countKind(h []heph.HistoryEvent, k hephtype.EventKind) int {
	n := 0
	for _, ev := range h {
		if ev.Kind == k {
			n++
		}
	}
	return n
}
