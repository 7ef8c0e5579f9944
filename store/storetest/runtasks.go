package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// testTasksOfRun: TasksOfRun lists a run's open tasks oldest first, with
// the lease and the heartbeat details as stored, and nothing of other
// runs; a completed task leaves the list; an unknown run has none.
func testTasksOfRun(t *testing.T, h *harness) {
	ctx := t.Context()
	h.create(at(0),
		withTasks(newRun("mine"), task("q", "a", at(0)), task("later", "b", at(time.Hour))),
		withTasks(newRun("other"), task("q2", "c", at(0))))
	claimed := h.claim(at(time.Minute), "w1", 10, time.Hour, "q")
	if len(claimed) != 1 {
		t.Fatalf("claimed %d tasks, want 1", len(claimed))
	}
	if _, err := h.s.Heartbeat(ctx, &store.HeartbeatParams{Leases: []store.Lease{claimed[0].Lease()}, Until: at(2 * time.Hour),
		Details: map[int64]json.RawMessage{claimed[0].ID: raw(`{"done":3}`)}}); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}

	got, err := h.s.TasksOfRun(ctx, "mine")
	if err != nil {
		t.Fatalf("TasksOfRun: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("TasksOfRun(mine) = %d tasks, want 2", len(got))
	}
	a, b := got[0], got[1]
	diff(t, "steps in id order", []string{"a", "b"}, []string{a.Step, b.Step})
	if a.ID != claimed[0].ID || a.Owner != "w1" || a.Claims != 1 || !a.LeaseUntil.Equal(at(2*time.Hour)) || !jsonEqual(a.Details, raw(`{"done":3}`)) {
		t.Errorf("leased task = id %d owner %q claims %d lease %v details %s; want id %d, w1, 1 claim, lease %v, details {\"done\":3}",
			a.ID, a.Owner, a.Claims, a.LeaseUntil, a.Details, claimed[0].ID, at(2*time.Hour))
	}
	if b.Owner != "" || !b.ReadyAt.Equal(at(time.Hour)) || b.RunID != "mine" || b.Queue != "later" {
		t.Errorf("queued task = owner %q ready %v run %s queue %s; want unleased, ready %v, run mine, queue later", b.Owner, b.ReadyAt, b.RunID, b.Queue, at(time.Hour))
	}

	// The leased task completes: it leaves the list.
	h.mustUpdate(at(3*time.Minute), "mine", &store.Lease{TaskID: a.ID, Token: a.Token}, &store.Update{})
	got, err = h.s.TasksOfRun(ctx, "mine")
	if err != nil {
		t.Fatalf("TasksOfRun after the completion: %v", err)
	}
	diff(t, "tasks after the completion", []string{"b"}, stepsOf(got))

	got, err = h.s.TasksOfRun(ctx, "unknown")
	if err != nil || len(got) != 0 {
		t.Fatalf("TasksOfRun(unknown) = %d tasks, %v; want none", len(got), err)
	}
}

func stepsOf(ts []*store.Task) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.Step)
	}
	return out
}
