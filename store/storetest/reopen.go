package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testReopen: Update.Reopen makes a finished run active again, clearing
// its error, output and finish time, and takes its released business id
// again, unless another active run holds it.
func testReopen(t *testing.T, h *harness) {
	mk := func(id string) *store.NewRun {
		r := newRun(id)
		r.BusinessID, r.KeyScope = "order::1", businesskey.ScopeActive
		return r
	}
	h.create(at(0), mk("r1"))
	h.mustUpdate(at(time.Second), "r1", nil, &store.Update{Status: hephtype.StatusFailed, Error: "boom", Output: raw(`{"x":1}`),
		History: []store.NewEvent{{Kind: hephtype.EventRunFailed, Error: "boom"}}})
	failed := h.get("r1")
	if failed.FinishedAt.IsZero() || failed.Error != "boom" {
		t.Fatalf("failed run = %+v", failed)
	}

	// Reopen needs a status, and writes nothing without one.
	res := h.update(at(2*time.Second), "r1", nil, &store.Update{Reopen: true})
	if res.Err == nil {
		t.Fatal("reopen without a status: no error")
	}
	// Reopened into a finished status (a retry that fails again at once):
	// a new error and finish time, and the id stays free.
	got := h.mustUpdate(at(2*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusFailed, Reopen: true}).Run
	if got.Error != "" || got.Output != nil || !got.FinishedAt.Equal(at(2*time.Second)) {
		t.Fatalf("reopened into failed: %+v", got)
	}
	failed = h.get("r1")

	// Another run took the business id meanwhile: refused, nothing written.
	h.create(at(3*time.Second), mk("r2"))
	res = h.update(at(4*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusRunning, Reopen: true,
		History: []store.NewEvent{{Kind: hephtype.EventRunRetried}}})
	var de *store.DuplicateRunError
	if !errors.As(res.Err, &de) || de.ExistingRunID != "r2" || de.BusinessID != "order::1" {
		t.Fatalf("reopen while r2 holds the id: %v, want a *DuplicateRunError naming r2", res.Err)
	}
	diff(t, "run after a refused reopen", failed, h.get("r1"))
	if n := len(h.history("r1")); n != 1 {
		t.Fatalf("history after a refused reopen: %d entries, want 1", n)
	}

	// Once r2 has finished, r1 reopens and holds the id again.
	h.mustUpdate(at(5*time.Second), "r2", nil, &store.Update{Status: hephtype.StatusCompleted})
	got = h.mustUpdate(at(6*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusRunning, Reopen: true,
		History: []store.NewEvent{{Kind: hephtype.EventRunRetried}}}).Run
	want := *failed
	want.Status, want.Error, want.Output, want.FinishedAt = hephtype.StatusRunning, "", nil, time.Time{}
	want.Seq, want.UpdatedAt = 2, at(6*time.Second)
	diff(t, "reopened run (result)", &want, got)
	diff(t, "reopened run (stored)", &want, h.get("r1"))
	res = h.apply(at(7*time.Second), store.Change{Create: mk("r3")})[0]
	if !errors.As(res.Err, &de) || de.ExistingRunID != "r1" {
		t.Fatalf("create while the reopened run holds the id: %v, want a *DuplicateRunError naming r1", res.Err)
	}

	// It finishes again, with a new error and finish time.
	got = h.mustUpdate(at(8*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusFailed, Error: "again"}).Run
	if got.Error != "again" || !got.FinishedAt.Equal(at(8*time.Second)) {
		t.Fatalf("run failed again: %+v", got)
	}
	h.create(at(9*time.Second), mk("r3"))

	// In one batch: a run takes the id, then the reopen is refused;
	// the reopen of a run without a business id always works.
	h.mustUpdate(at(10*time.Second), "r3", nil, &store.Update{Status: hephtype.StatusCompleted})
	plain := newRun("p1")
	h.create(at(10*time.Second), plain)
	h.mustUpdate(at(11*time.Second), "p1", nil, &store.Update{Status: hephtype.StatusCancelled, Error: "stop"})
	reopen := func(id string) store.Change {
		return store.Change{RunID: id, Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{Status: hephtype.StatusRunning, Reopen: true}, nil
		}}
	}
	results := h.apply(at(12*time.Second), store.Change{Create: mk("r4")}, reopen("r1"), reopen("p1"))
	if results[0].Err != nil {
		t.Fatalf("create r4: %v", results[0].Err)
	}
	if !errors.As(results[1].Err, &de) || de.ExistingRunID != "r4" {
		t.Fatalf("reopen after a create of the same batch took the id: %v, want a *DuplicateRunError naming r4", results[1].Err)
	}
	if results[2].Err != nil || results[2].Run.Status != hephtype.StatusRunning || results[2].Run.Error != "" {
		t.Fatalf("reopen of a run without a business id: %+v", results[2])
	}
	if r := h.get("r1"); r.Status != hephtype.StatusFailed {
		t.Fatalf("refused reopen: r1 is %s", r.Status)
	}
}
