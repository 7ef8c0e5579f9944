package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
)

// roundTrips counts the batches and queries sent (prepared statements
// aside: they are cached per connection, and the test warms them up).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An Apply takes one round trip whatever the number of changes when the
// store knows the rows it changes (it wrote the runs and claimed the
// tasks): guard, write, claim, notify and commit; and so does an Apply of
// creates. One that must read them first takes two: lock and read, then
// the rest.
func TestApplyRoundTrips(t *testing.T) {
	t.Parallel()
	rt := &roundTrips{}
	s, err := open(t.Context(), &Config{DSN: pgtest.DSN(t), MaxConns: 1}, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rt })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	round := 0
	cycle := func(n int) (creates, completes int64) {
		round++
		changes := make([]store.Change, n)
		for i := range changes {
			changes[i] = store.Change{Create: &store.NewRun{
				ID: fmt.Sprintf("r%d-%d", round, i), Workflow: "wf", Version: 1, Kind: hephtype.KindFlow,
				History: []store.NewEvent{{Kind: hephtype.EventRunStarted}},
				Tasks:   []store.NewTask{{Queue: fmt.Sprint("q", round), Kind: store.TaskStep, Step: "a", Index: -1}},
			}}
		}
		before := rt.n.Load()
		res, err := s.Apply(t.Context(), &store.ApplyParams{Changes: changes, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		creates = rt.n.Load() - before
		for _, r := range res.Changes {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		ts, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{fmt.Sprint("q", round)}, Owner: "w", Limit: n, LeaseFor: time.Minute, Now: now})
		if err != nil || len(ts) != n {
			t.Fatal(err, len(ts))
		}
		for i, tk := range ts {
			l := tk.Lease()
			changes[i] = store.Change{RunID: tk.RunID, Fence: &l, Decide: func(*store.Run) (*store.Update, error) {
				return &store.Update{
					History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "a"}},
					Tasks:   []store.NewTask{{Queue: fmt.Sprint("q", round), Kind: store.TaskStep, Step: "b", Index: -1}},
					Cancel:  []store.TaskMatch{{Step: "x", Index: -1}},
				}, nil
			}}
		}
		before = rt.n.Load()
		res, err = s.Apply(t.Context(), &store.ApplyParams{Changes: changes, Now: now,
			Claims: []store.ClaimParams{{Queues: []string{fmt.Sprint("q", round)}, Owner: "w", Limit: n, LeaseFor: time.Minute}}})
		if err != nil {
			t.Fatal(err)
		}
		completes = rt.n.Load() - before
		for _, r := range res.Changes {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		if len(res.Claimed[0]) != n {
			t.Fatalf("claimed %d successors, want %d", len(res.Claimed[0]), n)
		}
		return creates, completes
	}
	cycle(3) // prepares the statements on the one connection
	for _, n := range []int{1, 10, 200} {
		creates, completes := cycle(n)
		if creates != 1 || completes != 1 {
			t.Errorf("%d changes: %d round trips to create, %d to complete; want 1 and 1", n, creates, completes)
		}
	}
}

// A guess found wrong costs its round trip and a rollback, then the two of
// an Apply that reads; what that Apply read is known for the next one.
func TestWrongGuessRoundTrips(t *testing.T) {
	t.Parallel()
	rt := &roundTrips{}
	dsn := pgtest.DSN(t)
	s, err := open(t.Context(), &Config{DSN: dsn, MaxConns: 1}, func(c *pgxpool.Config) { c.ConnConfig.Tracer = rt })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(t.Context(), &Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	// A change that enqueues a task ready now, as one of a run in progress
	// does; or, with wait, none, as one that leaves the run waiting.
	mark := func(s *Store, key string, wait ...bool) int64 {
		t.Helper()
		before := rt.n.Load()
		res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{RunID: "r", Key: key,
			Decide: func(*store.Run) (*store.Update, error) {
				u := &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: key}}}
				if len(wait) == 0 {
					u.Tasks = []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: key, Index: -1}}
				}
				return u, nil
			}}}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatal(err, res.Changes[0].Err)
		}
		return rt.n.Load() - before
	}
	res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{
		ID: "r", Workflow: "wf", Version: 1, Kind: hephtype.KindFlow}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatal(err, res.Changes[0].Err)
	}
	mark(s, "warm-1") // prepares the statements
	if n := mark(s, "k1"); n != 1 {
		t.Errorf("a change to a run this store wrote: %d round trips, want 1", n)
	}
	mark(other, "k2")
	if n := mark(s, "k3"); n != 4 {
		t.Errorf("a change to a run another store changed since: %d round trips, want 4 (guess, rollback, read, write)", n)
	}
	if n := mark(s, "k4"); n != 1 {
		t.Errorf("the next change: %d round trips, want 1", n)
	}
	// A run left waiting (no task ready) is not kept: the change after
	// reads it.
	mark(s, "k5", true)
	if n := mark(s, "k6"); n != 2 {
		t.Errorf("a change to a run left waiting: %d round trips, want 2", n)
	}
	evs, err := s.History(t.Context(), &store.HistoryParams{RunID: "r"})
	if err != nil || len(evs) != 7 {
		t.Fatalf("history: %d entries, %v; want 7", len(evs), err)
	}
}
