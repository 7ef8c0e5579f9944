package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// The records of claims handed to remote workers: written while the claim
// holds the task, replaced by a later hand-out, deleted by their claim
// only, pruned once their task is gone.
func testRemoteClaims(t *testing.T, h *harness) {
	ctx := t.Context()
	res := h.create(at(0), withTasks(newRun("rc"), task("rq", "a", at(0)), task("rq", "b", at(0))))
	ids := []int64{res[0].Tasks[0].ID, res[0].Tasks[1].ID}
	if _, err := h.s.GetRemoteClaim(ctx, ids[0]); !errors.Is(err, store.ErrRemoteClaimNotFound) {
		t.Fatalf("GetRemoteClaim before a hand-out: %v, want ErrRemoteClaimNotFound", err)
	}
	ts := h.claim(at(0), "w1", 2, time.Minute, "rq")
	if len(ts) != 2 {
		t.Fatalf("claimed %d tasks, want 2", len(ts))
	}
	hash := sha256.Sum256([]byte("secret one"))
	rec := func(tk *store.Task, principal string, h []byte, claimed time.Time) *store.RemoteClaim {
		return &store.RemoteClaim{TaskID: tk.ID, Token: tk.Token, RunID: "rc", SecretHash: h, Principal: principal, WorkerID: tk.Owner,
			ClaimedAt: claimed, Deadline: claimed.Add(90 * time.Second), Lease: 30*time.Second + 7*time.Microsecond}
	}
	first := rec(ts[0], "worker-a", hash[:], at(0))
	if err := h.s.PutRemoteClaim(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, err := h.s.GetRemoteClaim(ctx, ts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "record read back", first, got)

	// A claim the task no longer holds is not recorded.
	stale := rec(ts[1], "", hash[:], at(0))
	stale.Token--
	if err := h.s.PutRemoteClaim(ctx, stale); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("PutRemoteClaim of a stale claim: %v, want ErrLeaseLost", err)
	}
	if _, err := h.s.GetRemoteClaim(ctx, ts[1].ID); !errors.Is(err, store.ErrRemoteClaimNotFound) {
		t.Fatalf("a stale claim was recorded: %v", err)
	}

	// The task is claimed again once its lease is over: the new hand-out
	// replaces the record, and the old claim cannot delete it.
	again := h.claim(at(2*time.Minute), "w2", 2, time.Minute, "rq")
	var a *store.Task
	for _, tk := range again {
		if tk.ID == ts[0].ID {
			a = tk
		}
	}
	if a == nil {
		t.Fatalf("task %d was not claimed again", ts[0].ID)
	}
	hash2 := sha256.Sum256([]byte("secret two"))
	second := rec(a, "", hash2[:], at(2*time.Minute))
	if err := h.s.PutRemoteClaim(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := h.s.DeleteRemoteClaim(ctx, &store.DeleteRemoteClaimParams{TaskID: first.TaskID, Token: first.Token}); err != nil {
		t.Fatal(err)
	}
	got, err = h.s.GetRemoteClaim(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Token != a.Token || !bytes.Equal(got.SecretHash, hash2[:]) || got.Principal != "" || got.WorkerID != "w2" {
		t.Fatalf("record after a second hand-out: %+v, want the second claim's", got)
	}
	if err := h.s.DeleteRemoteClaim(ctx, &store.DeleteRemoteClaimParams{TaskID: a.ID, Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.GetRemoteClaim(ctx, a.ID); !errors.Is(err, store.ErrRemoteClaimNotFound) {
		t.Fatalf("GetRemoteClaim after its delete: %v, want ErrRemoteClaimNotFound", err)
	}
	if err := h.s.DeleteRemoteClaim(ctx, &store.DeleteRemoteClaimParams{TaskID: a.ID, Token: a.Token}); err != nil {
		t.Fatalf("deleting a missing record: %v", err)
	}

	// A record whose task is gone is pruned by the next write.
	if err := h.s.PutRemoteClaim(ctx, rec(a, "p", hash[:], at(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	l := a.Lease()
	h.mustUpdate(at(3*time.Minute), "rc", &l, &store.Update{})
	var b *store.Task
	for _, tk := range again {
		if tk.ID != a.ID {
			b = tk
		}
	}
	if err := h.s.PutRemoteClaim(ctx, rec(b, "p", hash[:], at(3*time.Minute))); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.GetRemoteClaim(ctx, a.ID); !errors.Is(err, store.ErrRemoteClaimNotFound) {
		t.Fatalf("the record of a completed task was not pruned: %v", err)
	}
	if _, err := h.s.GetRemoteClaim(ctx, b.ID); err != nil {
		t.Fatalf("the record of a live task: %v", err)
	}

	// Bad records are refused before anything is written.
	for name, c := range map[string]*store.RemoteClaim{
		"no task":     {RunID: "rc", SecretHash: hash[:], WorkerID: "w", ClaimedAt: at(0), Deadline: at(0), Lease: time.Second},
		"short hash":  {TaskID: b.ID, RunID: "rc", SecretHash: hash[:8], WorkerID: "w", ClaimedAt: at(0), Deadline: at(0), Lease: time.Second},
		"long name":   {TaskID: b.ID, RunID: "rc", SecretHash: hash[:], Principal: strings.Repeat("x", store.MaxPrincipal+1), WorkerID: "w", ClaimedAt: at(0), Deadline: at(0), Lease: time.Second},
		"no lease":    {TaskID: b.ID, RunID: "rc", SecretHash: hash[:], WorkerID: "w", ClaimedAt: at(0), Deadline: at(0)},
		"no worker":   {TaskID: b.ID, RunID: "rc", SecretHash: hash[:], ClaimedAt: at(0), Deadline: at(0), Lease: time.Second},
		"early limit": {TaskID: b.ID, RunID: "rc", SecretHash: hash[:], WorkerID: "w", ClaimedAt: at(time.Second), Deadline: at(0), Lease: time.Second},
	} {
		if err := h.s.PutRemoteClaim(ctx, c); err == nil || errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("PutRemoteClaim of a record with %s: %v, want a validation error", name, err)
		}
	}
	if err := h.s.DeleteRemoteClaim(ctx, &store.DeleteRemoteClaimParams{}); err == nil {
		t.Error("DeleteRemoteClaim without a task id: no error")
	}
}
