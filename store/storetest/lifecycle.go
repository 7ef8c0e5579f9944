package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func testPrune(t *testing.T, h *harness) {
	ctx := t.Context()
	prune := func(before time.Time, limit int) int {
		t.Helper()
		n, err := h.s.PruneRuns(ctx, &store.PruneParams{FinishedBefore: before, Limit: limit})
		if err != nil {
			t.Fatalf("PruneRuns: %v", err)
		}
		return n
	}
	// Active runs, old.
	for _, st := range []hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusRunning, hephtype.StatusWaiting} {
		r := withTasks(newRun(string(st)), task("prune", "a", at(0)))
		r.Status, r.History = st, []store.NewEvent{{Kind: hephtype.EventRunStarted}}
		h.create(at(-48*time.Hour), r)
	}
	// Finished runs: four before the cutoff, one after.
	finished := []struct {
		id string
		st hephtype.RunStatus
		at time.Time
	}{
		{"c1", hephtype.StatusCompleted, at(time.Minute)},
		{"f1", hephtype.StatusFailed, at(2 * time.Minute)},
		{"x1", hephtype.StatusCancelled, at(3 * time.Minute)},
		{"n1", hephtype.StatusContinued, at(4 * time.Minute)},
		{"c2", hephtype.StatusCompleted, at(10 * time.Hour)},
	}
	for _, f := range finished {
		r := withTasks(newRun(f.id), task("prune", "left-over", at(0)))
		r.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}}
		h.create(at(0), r)
		// A finished run with tasks left is kept (see PruneKeepsWork):
		// these finish with their tasks cancelled.
		h.mustUpdate(f.at, f.id, nil, &store.Update{Status: f.st, History: []store.NewEvent{{Kind: hephtype.EventRunCompleted}},
			Cancel: []store.TaskMatch{{Index: -1}}})
	}
	cutoff := at(time.Hour)
	if n := prune(cutoff, 2); n != 2 {
		t.Fatalf("first prune deleted %d, want 2", n)
	}
	if n := prune(cutoff, 0); n != 2 {
		t.Fatalf("second prune deleted %d, want 2", n)
	}
	if n := prune(cutoff, 0); n != 0 {
		t.Fatalf("third prune deleted %d, want 0", n)
	}
	for _, id := range []string{"c1", "f1", "x1", "n1"} {
		if _, err := h.s.GetRun(ctx, id); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("GetRun(%s) after prune: %v", id, err)
		}
		if _, err := h.s.History(ctx, &store.HistoryParams{RunID: id}); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("History(%s) after prune: %v", id, err)
		}
	}
	for _, id := range []string{"pending", "running", "waiting", "c2"} {
		h.get(id)
		if evs := h.history(id); len(evs) == 0 {
			t.Fatalf("history of %s pruned", id)
		}
	}
	// The active runs' tasks remain.
	var left []string
	for _, tk := range h.claim(at(24*time.Hour), "w", 100, time.Minute, "prune") {
		left = append(left, tk.RunID)
	}
	diff(t, "tasks left", []string{"pending", "running", "waiting"}, sorted(left))
	// Even far in the future, active runs stay.
	if n := prune(at(1000*time.Hour), 0); n != 1 {
		t.Fatalf("prune of everything deleted %d, want 1 (c2)", n)
	}
	if page := h.list(store.ListRunsParams{}); len(page.Runs) != 3 {
		t.Fatalf("runs left: %v", ids(page.Runs))
	}
}

func testClose(t *testing.T, h *harness) {
	ctx := t.Context()
	h.create(at(0), newRun("r"))
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := h.s.GetRun(ctx, "r")
	wantErr(t, "GetRun", err, store.ErrClosed)
	_, err = h.s.Apply(ctx, &store.ApplyParams{Changes: []store.Change{{Create: newRun("s")}}, Now: at(0)})
	wantErr(t, "Apply", err, store.ErrClosed)
	_, err = h.s.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 1, LeaseFor: time.Minute, Now: at(0)})
	wantErr(t, "ClaimTasks", err, store.ErrClosed)
	_, err = h.s.ListRuns(ctx, &store.ListRunsParams{})
	wantErr(t, "ListRuns", err, store.ErrClosed)
}
