package e2e_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
)

// TestChaosTimeoutKilledConnection: two clients' deadline sweeps find a
// run past its execution timeout while its step runs; their timeouts are
// killed (pg_terminate_backend) while they wait for the run's lock, and
// the sweeps try again on their next look: the run times out once (one
// run_timed_out in its history, by whichever sweep came first), and the
// step's late success is refused by its fence (no step_completed).
func TestChaosTimeoutKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-timeout-chaos"
	start := time.Date(2033, 3, 4, 5, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)

	started, release := make(chan struct{}, 1), make(chan struct{})
	var returned atomic.Bool
	fb := flow.New("limited")
	flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		returned.Store(true)
		return "late", nil
	}, flow.Timeout(1000*time.Hour))
	def := fb.MustBuild()
	var clients []*heph.Client
	var schema string
	for range 2 {
		st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		schema = st.Schema()
		c, err := heph.New(&heph.Config{Store: st, Clock: clk, Logger: chaosLogger(), LeaseDuration: 1000 * time.Hour, ShutdownTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(def); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	c := clients[0]
	r, err := c.StartRun(ctx, "limited", nil, &heph.StartOptions{ExecutionTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	releaseStep := func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(releaseStep)
	for _, cl := range clients {
		if err := cl.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { releaseStep(); _ = cl.Stop(context.Background()) })
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step never started")
	}

	// An admin session holds the run's row, so that the sweeps'
	// timeouts wait for it: there they are killed.
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", app+"-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "runs"}.Sanitize()+" WHERE id = $1 FOR UPDATE", r.ID); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour + time.Second)
	killed := 0
	for killed < 2 {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
		select {
		case <-ctx.Done():
			t.Fatalf("%d timeout(s) killed; the sweeps never waited for the run's lock again", killed)
		case <-time.After(5 * time.Millisecond):
		}
		clk.Advance(time.Second) // the sweeps' next look
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var got *heph.Run
	for {
		got, err = c.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the run never timed out after %d kill(s): %s", killed, got.Status)
		case <-time.After(5 * time.Millisecond):
		}
		clk.Advance(time.Second)
	}
	t.Logf("timed out after %d kill(s)", killed)
	if got.Status != heph.StatusFailed || got.Condition.Code != heph.ConditionTimedOut {
		t.Fatalf("the run: %s, condition %+v; want failed, timed_out", got.Status, got.Condition)
	}
	releaseStep()
	for !returned.Load() {
		select {
		case <-ctx.Done():
			t.Fatal("the step never returned")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// A few more looks of both sweeps, and the step's late commit: nothing
	// changes.
	for range 5 {
		clk.Advance(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	h, err := c.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(h, hephtype.EventRunTimedOut); n != 1 {
		t.Fatalf("%d run_timed_out entries, want 1: %+v", n, h)
	}
	if n := countKind(h, hephtype.EventStepCompleted); n != 0 {
		t.Fatalf("the step's late success was recorded: %+v", h)
	}
	if last := h[len(h)-1]; last.Kind != hephtype.EventRunTimedOut {
		t.Fatalf("last entry %s, want run_timed_out", last.Kind)
	}
	if err := c.CancelRun(ctx, r.ID, "late"); !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("cancel after the timeout: %v", err)
	}
}
