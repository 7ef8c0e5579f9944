package storetest

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testEarliestReady: EarliestReady gives the earliest ready time of each
// named run's tasks (queued or leased), leaving out runs without tasks and
// unknown ids; ListRunsParams.DueAfter keeps the pending and running runs
// whose every task is due later.
func testEarliestReady(t *testing.T, h *harness) {
	ctx := t.Context()
	later := withTasks(newRun("later"), task("q", "a", at(2*time.Hour)), task("q", "b", at(time.Hour)))
	now := withTasks(newRun("now"), task("q", "a", at(0)), task("q", "b", at(3*time.Hour)))
	leased := withTasks(newRun("leased"), task("lq", "a", at(0)))
	none := newRun("none")
	pending := withTasks(newRun("pending-later"), task("q", "a", at(24*time.Hour)))
	pending.Status = hephtype.StatusPending
	waiting := withTasks(newRun("waiting"), store.NewTask{Queue: "q", Kind: store.TaskTimer, Step: "w", Index: -1, ReadyAt: at(time.Hour)})
	waiting.Status = hephtype.StatusWaiting
	done := newRun("done")
	done.Status = hephtype.StatusCompleted
	h.create(at(0), later, now, leased, none, pending, waiting, done)
	if got := h.claim(at(time.Minute), "w1", 10, time.Hour, "lq"); len(got) != 1 {
		t.Fatalf("claimed %d tasks of lq, want 1", len(got))
	}

	got, err := h.s.EarliestReady(ctx, &store.EarliestReadyParams{
		RunIDs: []string{"later", "now", "leased", "none", "pending-later", "waiting", "done", "unknown"},
	})
	if err != nil {
		t.Fatalf("EarliestReady: %v", err)
	}
	diff(t, "EarliestReady", map[string]time.Time{
		"later": at(time.Hour), "now": at(0), "leased": at(0), "pending-later": at(24 * time.Hour), "waiting": at(time.Hour),
	}, got)

	// Only the runs named.
	got, err = h.s.EarliestReady(ctx, &store.EarliestReadyParams{RunIDs: []string{"later"}})
	if err != nil {
		t.Fatalf("EarliestReady(later): %v", err)
	}
	diff(t, "EarliestReady(later)", map[string]time.Time{"later": at(time.Hour)}, got)
	got, err = h.s.EarliestReady(ctx, &store.EarliestReadyParams{})
	if err != nil || len(got) != 0 {
		t.Fatalf("EarliestReady(no ids) = %v, %v; want an empty map", got, err)
	}
	_, err = h.s.EarliestReady(ctx, &store.EarliestReadyParams{RunIDs: make([]string, store.MaxListIDs+1)})
	wantErr(t, "EarliestReady with too many ids", err, hephtype.ErrInvalidInput)

	// A task completed: the next one counts.
	h.mustUpdate(at(2*time.Minute), "now", nil, &store.Update{Cancel: []store.TaskMatch{{Step: "a", Index: -1}}})
	got, err = h.s.EarliestReady(ctx, &store.EarliestReadyParams{RunIDs: []string{"now"}})
	if err != nil {
		t.Fatalf("EarliestReady(now): %v", err)
	}
	diff(t, "EarliestReady after the first task went", map[string]time.Time{"now": at(3 * time.Hour)}, got)

	for _, tc := range []struct {
		name string
		p    store.ListRunsParams
		want []string
	}{
		{"due after 30m", store.ListRunsParams{DueAfter: at(30 * time.Minute)}, []string{"pending-later", "now", "later"}},
		{"due after the first task's time", store.ListRunsParams{DueAfter: at(time.Hour)}, []string{"pending-later", "now"}},
		{"due after 4h", store.ListRunsParams{DueAfter: at(4 * time.Hour)}, []string{"pending-later"}},
		{"due and a status", store.ListRunsParams{DueAfter: at(30 * time.Minute), Statuses: []hephtype.RunStatus{hephtype.StatusRunning}}, []string{"now", "later"}},
		{"due and paged", store.ListRunsParams{DueAfter: at(30 * time.Minute), Limit: 1}, []string{"pending-later"}},
		{"due of a workflow", store.ListRunsParams{DueAfter: at(30 * time.Minute), Workflow: "wf"}, []string{"pending-later", "now", "later"}},
		{"due of another workflow", store.ListRunsParams{DueAfter: at(30 * time.Minute), Workflow: "other"}, nil},
		{"due, a workflow and a status", store.ListRunsParams{DueAfter: at(30 * time.Minute), Workflow: "wf", Statuses: []hephtype.RunStatus{hephtype.StatusPending}}, []string{"pending-later"}},
	} {
		diff(t, tc.name, tc.want, ids(h.list(tc.p).Runs))
	}
	// The second page of the filter.
	first := h.list(store.ListRunsParams{DueAfter: at(30 * time.Minute), Limit: 2})
	diff(t, "due, second page", []string{"later"}, ids(h.list(store.ListRunsParams{DueAfter: at(30 * time.Minute), Limit: 2, Cursor: first.Next}).Runs))
}
