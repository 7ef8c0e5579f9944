package storetest

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// testRunTasks: RunTasks lists one run's tasks, queued and leased, oldest
// ready first, with their queue, step, handler and ready time; none for a
// run without tasks or an unknown id.
func testRunTasks(t *testing.T, h *harness) {
	ctx := t.Context()
	b := task("q2", "b", at(2*time.Hour))
	b.Handler = "activity:charge"
	r := withTasks(newRun("r"), b, task("q1", "a", at(0)))
	other := withTasks(newRun("other"), task("q1", "x", at(0)))
	h.create(at(0), r, other, newRun("none"))
	if got := h.claim(at(time.Minute), "w1", 10, time.Hour, "q1"); len(got) != 2 {
		t.Fatalf("claimed %d tasks of q1, want 2", len(got))
	}
	got, err := h.s.RunTasks(ctx, "r")
	if err != nil {
		t.Fatalf("RunTasks: %v", err)
	}
	type row struct {
		Queue, Step, Handler, Owner string
		ReadyAt                     time.Time
	}
	var rows []row
	for _, tk := range got {
		if tk.RunID != "r" {
			t.Errorf("RunTasks(r) returned a task of run %q", tk.RunID)
		}
		rows = append(rows, row{tk.Queue, tk.Step, tk.Handler, tk.Owner, tk.ReadyAt})
	}
	diff(t, "RunTasks(r)", []row{{"q1", "a", "", "w1", at(0)}, {"q2", "b", "activity:charge", "", at(2 * time.Hour)}}, rows)
	for _, id := range []string{"none", "unknown"} {
		got, err := h.s.RunTasks(ctx, id)
		if err != nil || len(got) != 0 {
			t.Errorf("RunTasks(%s) = %d tasks, %v; want none", id, len(got), err)
		}
	}
	// A task completed is no longer listed.
	h.mustUpdate(at(2*time.Minute), "r", nil, &store.Update{Cancel: []store.TaskMatch{{Step: "a", Index: -1}}})
	got, err = h.s.RunTasks(ctx, "r")
	if err != nil || len(got) != 1 || got[0].Step != "b" {
		t.Fatalf("RunTasks(r) after a completion = %v, %v; want only task b", got, err)
	}
}
