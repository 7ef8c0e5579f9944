package remote

import (
	"context"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// registrations counts the registry rows written; the rest of store.Store
// is not used by register.
type registrations struct {
	store.Store
	rows []store.Worker
}

func (r *registrations) RegisterWorker(_ context.Context, w *store.Worker) error {
	r.rows = append(r.rows, *w)
	return nil
}

// TestRegisterWritesWhenNeeded: a worker polling in a loop writes its
// registry row at its first claim, then only when the row would stay live
// less than half a lease past what the claim needs, or when its queues or
// handlers change; the row written always covers the claim's wait and
// leases.
func TestRegisterWritesWhenNeeded(t *testing.T) {
	st := &registrations{}
	r := &Runtime{cfg: Config{Store: st}}
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	lease, wait := 30*time.Second, 10*time.Second
	cp := &claim{Claim: &Claim{WorkerID: "py-1", Wait: wait}, queues: []string{"default"}, handlers: []string{"a"}, lease: lease}
	claimAt := func(d time.Duration, c *claim) {
		t.Helper()
		now := t0.Add(d)
		if err := r.register(t.Context(), c, now); err != nil {
			t.Fatal(err)
		}
		last := st.rows[len(st.rows)-1]
		if need := now.Add(wait + lease); last.ExpiresAt.Before(need) {
			t.Fatalf("at +%s the registry row expires at +%s, before the claim's wait and lease end (+%s)", d, last.ExpiresAt.Sub(t0), need.Sub(t0))
		}
	}
	claimAt(0, cp)
	for d := time.Second; d <= lease/2; d += time.Second {
		claimAt(d, cp)
	}
	if len(st.rows) != 1 {
		t.Fatalf("%d rows written over half a lease of polls, want 1", len(st.rows))
	}
	claimAt(lease/2+time.Second, cp)
	if len(st.rows) != 2 || !st.rows[1].SeenAt.Equal(t0.Add(lease/2+time.Second)) || !st.rows[1].StartedAt.Equal(t0) {
		t.Fatalf("past half a lease: rows %+v, want a second one seen now, started at the first claim", st.rows)
	}
	other := &claim{Claim: cp.Claim, queues: cp.queues, handlers: []string{"a", "b"}, lease: lease}
	claimAt(lease/2+2*time.Second, other)
	if len(st.rows) != 3 || len(st.rows[2].Handlers) != 2 {
		t.Fatalf("new handlers: rows %+v, want a third with both", st.rows)
	}
	// A longer wait needs a row that lives longer.
	long := &claim{Claim: &Claim{WorkerID: "py-1", Wait: 5 * time.Minute}, queues: cp.queues, handlers: other.handlers, lease: lease}
	claimAt(lease/2+3*time.Second, long)
	if len(st.rows) != 4 {
		t.Fatalf("a longer wait: %d rows, want 4", len(st.rows))
	}
}
