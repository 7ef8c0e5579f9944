package e2e_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
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

// resetFaultyStore loses the commits of resets: the first fails after
// the COMMIT (the reset applied, its outcome lost), the second before
// anything is applied; those after go through.
type resetFaultyStore struct {
	store.Store
	n atomic.Int32
}

func (s *resetFaultyStore) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	reset := false
	for _, c := range p.Changes {
		reset = reset || strings.HasPrefix(c.Key, "reset:")
	}
	if !reset {
		return s.Store.Apply(ctx, p)
	}
	switch s.n.Add(1) {
	case 1:
		if _, err := s.Store.Apply(ctx, p); err != nil {
			return nil, err
		}
		return nil, errChaosAfter
	case 2:
		return nil, errChaosBefore
	}
	return s.Store.Apply(ctx, p)
}

// TestChaosResetLostCommits: a reset whose commit loses its outcome
// after the COMMIT, then fails before it, tried again by the runtime and
// by the caller with its key: the run is reset once (one run_reset), the
// running attempt is stopped and cannot commit, and the run completes
// with each step run as once reset (both backends). The step's new
// attempt, inserted by the commit whose outcome was lost, runs once its
// lease to the committing process ends.
func TestChaosResetLostCommits(t *testing.T) {
	for _, b := range chaosBackends() {
		t.Run(b.name, func(t *testing.T) {
			chaosInProcess.Lock()
			defer chaosInProcess.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
			defer cancel()
			fs := &resetFaultyStore{Store: b.db(t).open(t, "heph-reset-lost")}
			// hold's calls wait until the reset is done (or their context
			// ends): a call of the attempt the reset stops (even claimed
			// again after a lost lease) cannot complete before it.
			started, resetDone := make(chan struct{}, 1), make(chan struct{})
			var first, hold atomic.Int32
			fb := flow.New("reset-lost")
			flow.Step(fb, "first", func(ctx context.Context, in any) (int32, error) { return first.Add(1), nil })
			flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
				if hold.Add(1) == 1 {
					started <- struct{}{}
				}
				select {
				case <-ctx.Done():
					return "late", nil
				case <-resetDone:
					return "held", nil
				}
			}, flow.DependsOn("first"))
			// The tasks a commit inserts are leased to its process; those of
			// a commit whose outcome was lost wait for their lease to end.
			c := startChaosClient(t, fs, func(c *heph.Config) {
				c.LeaseDuration, c.HeartbeatInterval = time.Second, 250*time.Millisecond
			})
			if err := c.Register(fb.MustBuild()); err != nil {
				t.Fatal(err)
			}
			r, err := c.StartRun(ctx, "reset-lost", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			<-started
			tries := 1
			for _, err := c.ResetRun(ctx, r.ID, "hold", &heph.ResetOptions{Key: "k"}); err != nil; _, err = c.ResetRun(ctx, r.ID, "hold", &heph.ResetOptions{Key: "k"}) {
				if ctx.Err() != nil || !errors.Is(err, errChaosAfter) && !errors.Is(err, errChaosBefore) {
					t.Fatalf("reset: %v", err)
				}
				tries++
			}
			close(resetDone)
			done, err := c.WaitRun(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if done.Status != heph.StatusCompleted || !strings.Contains(strings.ReplaceAll(string(done.Output), " ", ""), `{"hold":"held"}`) {
				t.Fatalf("the reset run: %s %s", done.Status, done.Output)
			}
			h, err := c.History(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if n := countKind(h, hephtype.EventRunReset); n != 1 || fs.n.Load() < 3 {
				t.Fatalf("%d run_reset entries after %d commits of resets, want 1 after at least 3", n, fs.n.Load())
			}
			if first.Load() != 1 || countStep(h, hephtype.EventStepCompleted, "hold") != 1 {
				t.Fatalf("first ran %d times, hold completed %d times; want once each", first.Load(), countStep(h, hephtype.EventStepCompleted, "hold"))
			}
			for _, ev := range h {
				if ev.Kind == hephtype.EventStepCompleted && ev.Step == "hold" && ev.Attempt < 2 {
					t.Fatalf("hold's stopped attempt %d committed", ev.Attempt)
				}
			}
			t.Logf("chaos: backend=%s fault=lost-commit runs=1 reset_commits=%d caller_tries=%d resets=1 duplicates=0", b.name, fs.n.Load(), tries)
		})
	}
}

func countStep(h []heph.HistoryEvent, k hephtype.EventKind, step string) int {
	n := 0
	for _, ev := range h {
		if ev.Kind == k && ev.Step == step {
			n++
		}
	}
	return n
}
