package storetest

import (
	"errors"
	"strings"
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
		h.putWaitOf(f.id) // a wait of the run goes with it
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
		h.wantWaitsOf(id, 0)
	}
	h.wantWaitsOf("c2", 1)
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

// testPruneSelected: PruneRuns deletes only the runs its filters select
// (workflows, workflows excepted, statuses), and refuses a status that is
// not finished, naming it.
func testPruneSelected(t *testing.T, h *harness) {
	ctx := t.Context()
	runs := []struct {
		id, wf string
		st     hephtype.RunStatus
	}{
		{"a-ok", "a", hephtype.StatusCompleted}, {"a-bad", "a", hephtype.StatusFailed},
		{"b-ok", "b", hephtype.StatusCompleted}, {"b-gone", "b", hephtype.StatusCancelled},
		{"c-ok", "c", hephtype.StatusCompleted}, {"c-bad", "c", hephtype.StatusFailed},
	}
	for _, r := range runs {
		nr := newRun(r.id)
		nr.Workflow, nr.Status, nr.History = r.wf, r.st, []store.NewEvent{{Kind: hephtype.EventRunCompleted}}
		h.create(at(0), nr)
	}
	prune := func(p store.PruneParams) int {
		t.Helper()
		p.FinishedBefore = at(time.Hour)
		n, err := h.s.PruneRuns(ctx, &p)
		if err != nil {
			t.Fatalf("PruneRuns(%+v): %v", p, err)
		}
		return n
	}
	gone := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := h.s.GetRun(ctx, id); !errors.Is(err, store.ErrRunNotFound) {
				t.Fatalf("GetRun(%s) = %v, want it pruned", id, err)
			}
		}
	}
	// Completed runs of a only.
	if n := prune(store.PruneParams{Workflows: []string{"a"}, Statuses: []hephtype.RunStatus{hephtype.StatusCompleted}}); n != 1 {
		t.Fatalf("pruned %d runs of a completed, want 1", n)
	}
	gone("a-ok")
	h.get("a-bad")
	// An empty (not nil) list selects no workflow.
	if n := prune(store.PruneParams{Workflows: []string{}}); n != 0 {
		t.Fatalf("pruned %d runs with an empty workflow list, want 0", n)
	}
	// Everything but a and c: b's two runs.
	if n := prune(store.PruneParams{ExceptWorkflows: []string{"a", "c"}}); n != 2 {
		t.Fatalf("pruned %d runs except a and c, want 2", n)
	}
	gone("b-ok", "b-gone")
	h.get("c-ok")
	// Failed runs of every workflow.
	if n := prune(store.PruneParams{Statuses: []hephtype.RunStatus{hephtype.StatusFailed}}); n != 2 {
		t.Fatalf("pruned %d failed runs, want 2", n)
	}
	gone("a-bad", "c-bad")
	h.get("c-ok")
	_, err := h.s.PruneRuns(ctx, &store.PruneParams{FinishedBefore: at(time.Hour), Statuses: []hephtype.RunStatus{hephtype.StatusWaiting}})
	if err == nil || !strings.Contains(err.Error(), `"waiting"`) {
		t.Fatalf("PruneRuns(Statuses: waiting) = %v, want an error naming the status", err)
	}
	h.get("c-ok")
}
