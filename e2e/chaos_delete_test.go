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
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
)

// TestChaosDeleteKilledConnection: a forced delete of a run whose step
// runs, killed (pg_terminate_backend) while its transaction waits for the
// run's lock, deletes nothing; the caller's retry deletes the run once,
// and a third try says it is not found. The worker that held the step's
// task cannot commit: the run never comes back and its next step never
// runs.
func TestChaosDeleteKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-delete-chaos"
	st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	started, stopped := make(chan struct{}, 1), make(chan error, 1)
	var after atomic.Int32
	fb := flow.New("held")
	flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
		started <- struct{}{}
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return "late", nil // the commit of this outcome must be refused
	})
	flow.Step(fb, "after", func(ctx context.Context, in any) (string, error) {
		after.Add(1)
		return "", nil
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

	// An admin session holds the run's row, so that the delete's
	// transaction waits for it: there it is killed.
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", "heph-delete-chaos-admin"))
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
	deleted := make(chan error, 1)
	go func() {
		_, err := c.DeleteRun(ctx, r.ID, &heph.DeleteOptions{Force: true})
		deleted <- err
	}()
	var first error
	killed := 0
	for first == nil {
		select {
		case first = <-deleted:
			if first == nil {
				t.Fatal("the delete went through while the run was locked")
			}
			continue
		case <-ctx.Done():
			t.Fatal("the delete never ended")
		case <-time.After(5 * time.Millisecond):
		}
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	if killed == 0 || errors.Is(first, heph.ErrRunNotFound) {
		t.Fatalf("the killed delete: %v after %d kills", first, killed)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing was deleted: the run and its step are as they were.
	if got, err := c.GetRun(ctx, r.ID); err != nil || got.Status != heph.StatusRunning {
		t.Fatalf("after the killed delete: %+v, %v", got, err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the step was stopped by a delete that did not happen: %v", err)
	default:
	}

	// The caller tries again (the store's pool reconnects).
	var d *heph.DeletedRun
	for d == nil {
		d, err = c.DeleteRun(ctx, r.ID, &heph.DeleteOptions{Force: true})
		if err != nil && (ctx.Err() != nil || errors.Is(err, heph.ErrRunNotFound)) {
			t.Fatalf("the retried delete: %v", err)
		}
	}
	if d.Status != heph.StatusRunning || d.Tasks != 1 {
		t.Fatalf("the retried delete deleted %+v", d)
	}
	if _, err := c.DeleteRun(ctx, r.ID, &heph.DeleteOptions{Force: true}); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("a third delete: %v, want ErrRunNotFound", err)
	}
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("the step's context ended without a cause")
		}
	case <-ctx.Done():
		t.Fatal("the running step never learnt of the delete")
	}
	// Its worker's commit is refused: nothing of the run comes back. The
	// client stops only once that commit was tried.
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetRun(ctx, r.ID); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("the run after its worker's late commit: %v", err)
	}
	if n := after.Load(); n != 0 {
		t.Fatalf("the next step ran %d times", n)
	}
	t.Logf("chaos: backend=postgres fault=pg_terminate_backend(delete) killed=%d first=%q", killed, first)
}
