package commit

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hephaestus-go/hephaestus/store"
)

// A commit claims for its hand-offs first, one claim a queue with the
// standing claim of that queue riding in it, then for the other standing
// claims; the claimed tasks go back to whoever asked, in that order.
func TestClaimPlan(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := &Committer{cfg: Config{WorkerID: "w1", LeaseDuration: time.Minute, Handlers: func() []string { return []string{"h"} }}}
	a1, b1, a2, plain := &Request{Handoff: "a"}, &Request{Handoff: "b"}, &Request{Handoff: "a"}, &Request{}
	standA, standC := &Claim{Queue: "a", N: 3}, &Claim{Queue: "c", N: 2}
	p := m.planClaims([]*Request{a1, b1, plain, a2}, []*Claim{standC, standA}, now)

	claim := func(q string, limit int) store.ClaimParams {
		return store.ClaimParams{Queues: []string{q}, Handlers: []string{"h"}, Owner: "w1", Limit: limit, LeaseFor: time.Minute, Now: now}
	}
	want := []store.ClaimParams{claim("a", 2+3), claim("b", 1), claim("c", 2)}
	if diff := cmp.Diff(want, p.params); diff != "" {
		t.Fatalf("planned claims (-want +got):\n%s", diff)
	}

	task := func(id int64) *store.Task { return &store.Task{ID: id} }
	p.distribute([][]*store.Task{{task(1), task(2), task(3)}, {}, {task(4)}})
	ids := func(ts []*store.Task) []int64 {
		var out []int64
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	got := map[string][]int64{
		"a1": ids(a1.Claimed), "a2": ids(a2.Claimed), "b1": ids(b1.Claimed), "plain": ids(plain.Claimed),
		"standA": ids(standA.Tasks), "standC": ids(standC.Tasks),
	}
	wantIDs := map[string][]int64{"a1": {1}, "a2": {2}, "b1": nil, "plain": nil, "standA": {3}, "standC": {4}}
	if diff := cmp.Diff(wantIDs, got); diff != "" {
		t.Fatalf("claimed tasks (-want +got):\n%s", diff)
	}
}
