package storetest

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/store"
)

// testClaimInApply: claims in ApplyParams run after the changes, in the
// same transaction, so they lease tasks the changes just created; each
// claim gets its own result list, and an Apply with claims only works.
func testClaimInApply(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("old"), task("q", "old", at(0))))
	res, err := h.s.Apply(t.Context(), &store.ApplyParams{
		Changes: []store.Change{{Create: withTasks(newRun("new"), task("q", "a", at(0)), task("q", "b", at(0)), task("other", "c", at(0)), task("q", "later", at(time.Hour)))}},
		Claims: []store.ClaimParams{
			{Queues: []string{"q"}, Owner: "w1", Limit: 10, LeaseFor: 24 * time.Hour},
			{Queues: []string{"other"}, Owner: "w2", Limit: 10, LeaseFor: 24 * time.Hour},
			{Queues: []string{"empty"}, Owner: "w3", Limit: 10, LeaseFor: time.Minute},
		},
		Now: at(time.Second),
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Err != nil {
		t.Fatalf("changes: %+v", res.Changes)
	}
	if len(res.Claimed) != 3 {
		t.Fatalf("%d claim results, want 3", len(res.Claimed))
	}
	var steps []string
	for _, tk := range res.Claimed[0] {
		steps = append(steps, tk.Step)
		if tk.Owner != "w1" || !tk.LeaseUntil.Equal(at(time.Second+24*time.Hour)) || tk.Claims != 1 {
			t.Errorf("claimed task %s: owner %q lease %v claims %d", tk.Step, tk.Owner, tk.LeaseUntil, tk.Claims)
		}
	}
	diff(t, "claimed on q", []string{"a", "b", "old"}, sorted(steps))
	if len(res.Claimed[1]) != 1 || res.Claimed[1][0].Step != "c" || res.Claimed[1][0].Owner != "w2" {
		t.Errorf("claimed on other: %+v", res.Claimed[1])
	}
	if len(res.Claimed[2]) != 0 {
		t.Errorf("claimed on an empty queue: %+v", res.Claimed[2])
	}
	// The leases are real: nothing is left to claim now, and the leased
	// token fences a completion.
	if got := h.claim(at(2*time.Second), "w9", 10, time.Minute, "q", "other"); len(got) != 0 {
		t.Errorf("claimed again: %+v", got)
	}
	a := res.Claimed[0][0]
	lease := a.Lease()
	h.mustUpdate(at(3*time.Second), a.RunID, &lease, &store.Update{})

	// Claims alone, with no change.
	res, err = h.s.Apply(t.Context(), &store.ApplyParams{
		Claims: []store.ClaimParams{{Queues: []string{"q"}, Owner: "w1", Limit: 10, LeaseFor: time.Minute}},
		Now:    at(2 * time.Hour),
	})
	if err != nil {
		t.Fatalf("Apply with claims only: %v", err)
	}
	if len(res.Changes) != 0 || len(res.Claimed) != 1 || len(res.Claimed[0]) != 1 || res.Claimed[0][0].Step != "later" {
		t.Fatalf("claims only: %+v", res)
	}
}

// testKeyPerWorkflow: business ids are unique per workflow, and FindRun
// can be restricted to one.
func testKeyPerWorkflow(t *testing.T, h *harness) {
	a := newRun("a")
	a.BusinessID, a.KeyScope = "order::1", businesskey.ScopeActive
	b := newRun("b")
	b.Workflow, b.BusinessID, b.KeyScope = "other", "order::1", businesskey.ScopeForever
	h.create(at(0), a)
	h.create(at(time.Second), b)
	dup := newRun("c")
	dup.Workflow, dup.BusinessID, dup.KeyScope = "other", "order::1", businesskey.ScopeActive
	res := h.apply(at(2*time.Second), store.Change{Create: dup})
	wantErr(t, "same workflow, same id", res[0].Err, store.ErrDuplicateRun)
	for _, tc := range []struct{ workflow, want string }{{"wf", "a"}, {"other", "b"}, {"", "b"}} {
		r, err := h.s.FindRun(t.Context(), &store.FindRunParams{Workflow: tc.workflow, BusinessID: "order::1"})
		if err != nil || r.ID != tc.want {
			t.Errorf("FindRun(%q) = %v, %v; want %s", tc.workflow, r, err, tc.want)
		}
	}
	_, err := h.s.FindRun(t.Context(), &store.FindRunParams{Workflow: "third", BusinessID: "order::1"})
	wantErr(t, "FindRun in another workflow", err, store.ErrRunNotFound)
}

// testRunExists: a create naming a stored run id is refused with
// store.ErrRunExists and changes nothing.
func testRunExists(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("a"), task("q", "s", at(0))))
	again := withTasks(newRun("a"), task("q", "other", at(0)))
	again.Input = raw(`{"changed":true}`)
	res := h.apply(at(time.Second), store.Change{Create: again})
	wantErr(t, "create with a stored id", res[0].Err, store.ErrRunExists)
	got := h.get("a")
	if !jsonEqual(got.Input, raw(`{"id":"a"}`)) {
		t.Errorf("the refused create changed the run's input to %s", got.Input)
	}
	if tasks := h.claim(at(2*time.Second), "w", 10, time.Minute, "q"); len(tasks) != 1 || tasks[0].Step != "s" {
		t.Errorf("tasks after the refused create: %+v", tasks)
	}
}
