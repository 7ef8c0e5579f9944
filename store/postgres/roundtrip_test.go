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

// An Apply takes two round trips whatever the number of changes: lock and
// read, then write, claim, notify and commit; an Apply of creates, whose
// conflicts must be looked up before the commit, also two: write and
// claim, then notify and commit.
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
		if creates != 2 || completes != 2 {
			t.Errorf("%d changes: %d round trips to create, %d to complete; want 2 and 2", n, creates, completes)
		}
	}
}
