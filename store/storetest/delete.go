package storetest

import (
	"crypto/sha256"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testDeleteRun: DeleteRun deletes a finished run with its history,
// requests and step logs, and nothing of another run; a second delete
// finds nothing; its children stay.
func testDeleteRun(t *testing.T, h *harness) {
	ctx := t.Context()
	h.create(at(0), newRun("d"), newRun("keep"))
	child := newRun("child")
	child.ParentID = "d"
	h.create(at(0), child)
	for _, id := range []string{"d", "keep"} {
		h.mustUpdate(at(time.Second), id, nil, &store.Update{History: marker("one")})
		if _, err := h.s.CreateRequest(ctx, newRequest(id, "update:u1")); err != nil {
			t.Fatalf("CreateRequest(%s): %v", id, err)
		}
		h.appendLogs(rec(id, "a", 1, time.Second, slog.LevelInfo, "log of "+id))
		h.putWaitOf(id)
	}
	// The requests' tasks are done: the runs finish without work left.
	for _, tk := range h.claim(at(2*time.Second), "w", 10, time.Minute, "rq") {
		lease := tk.Lease()
		if err := h.s.AnswerRequest(ctx, &store.AnswerRequestParams{Fence: lease, RunID: tk.RunID, ID: "update:u1",
			Status: store.RequestCompleted, Now: at(3 * time.Second)}); err != nil {
			t.Fatalf("AnswerRequest(%s): %v", tk.RunID, err)
		}
	}
	for _, id := range []string{"d", "keep"} {
		h.mustUpdate(at(4*time.Second), id, nil, &store.Update{Status: hephtype.StatusCompleted,
			History: []store.NewEvent{{Kind: hephtype.EventRunCompleted}}})
	}

	got, err := h.s.DeleteRun(ctx, &store.DeleteRunParams{ID: "d"})
	if err != nil {
		t.Fatalf("DeleteRun(d): %v", err)
	}
	diff(t, "deleted", &store.DeletedRun{ID: "d", Workflow: "wf", Kind: hephtype.KindFlow, Status: hephtype.StatusCompleted}, got)
	if _, err := h.s.GetRun(ctx, "d"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun after DeleteRun: %v, want ErrRunNotFound", err)
	}
	if _, err := h.s.History(ctx, &store.HistoryParams{RunID: "d"}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("History after DeleteRun: %v, want ErrRunNotFound", err)
	}
	if _, err := h.s.GetRequest(ctx, "d", "update:u1"); !errors.Is(err, store.ErrRequestNotFound) {
		t.Fatalf("GetRequest after DeleteRun: %v, want ErrRequestNotFound", err)
	}
	if _, err := h.s.Logs(ctx, &store.LogsParams{RunID: "d"}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("Logs after DeleteRun: %v, want ErrRunNotFound", err)
	}
	h.wantWaitsOf("d", 0)
	h.wantWaitsOf("keep", 1)
	// A second delete (a retry whose first answer was lost) finds nothing.
	_, err = h.s.DeleteRun(ctx, &store.DeleteRunParams{ID: "d"})
	wantErr(t, "second DeleteRun", err, store.ErrRunNotFound)
	_, err = h.s.DeleteRun(ctx, &store.DeleteRunParams{ID: ""})
	wantErr(t, "DeleteRun without an id", err, hephtype.ErrInvalidInput)

	// The other run is whole, and the child keeps its parent id.
	if evs := h.history("keep"); len(evs) != 2 {
		t.Fatalf("history of keep: %d entries, want 2", len(evs))
	}
	if _, err := h.s.GetRequest(ctx, "keep", "update:u1"); err != nil {
		t.Fatalf("GetRequest(keep): %v", err)
	}
	diff(t, "logs of keep", []string{"log of keep"}, messages(h.logs(store.LogsParams{RunID: "keep"})))
	diff(t, "child's parent", "d", h.get("child").ParentID)

	// The id may be used again: a new run starts with nothing of the old.
	h.create(at(time.Minute), newRun("d"))
	if evs := h.history("d"); len(evs) != 0 {
		t.Fatalf("a new run of a deleted run's id has history %v", evs)
	}
	diff(t, "logs of the new run", []string{}, messages(h.logs(store.LogsParams{RunID: "d"})))
}

// testDeleteRunActive: without Force, DeleteRun refuses an active run and
// a finished run with tasks left, writing nothing.
func testDeleteRunActive(t *testing.T, h *harness) {
	ctx := t.Context()
	for _, st := range []hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusRunning, hephtype.StatusWaiting} {
		r := newRun(string(st))
		r.Status = st
		h.create(at(0), r)
	}
	h.create(at(0), withTasks(newRun("left"), task("q", "report", at(0))))
	h.mustUpdate(at(time.Second), "left", nil, &store.Update{Status: hephtype.StatusFailed})
	for _, id := range []string{"pending", "running", "waiting", "left"} {
		_, err := h.s.DeleteRun(ctx, &store.DeleteRunParams{ID: id})
		wantErr(t, "DeleteRun("+id+")", err, store.ErrRunActive)
		h.get(id)
	}
	if ts := h.claim(at(time.Minute), "w", 10, time.Minute, "q"); len(ts) != 1 || ts[0].RunID != "left" {
		t.Fatalf("the task of the refused delete: claimed %v", ts)
	}
}

// testDeleteRunForced: a forced delete of an active run takes its tasks:
// none is claimed again, the holder of one can neither commit nor
// heartbeat, nothing more is written under the id, and its business id
// is free.
func testDeleteRunForced(t *testing.T, h *harness) {
	ctx := t.Context()
	r := withTasks(newRun("act"), task("q", "a", at(0)), task("q", "b", at(0)), task("q", "later", at(time.Hour)))
	r.BusinessID, r.KeyScope = "order::1", businesskey.ScopeActive
	h.create(at(0), r, withTasks(newRun("other"), task("q", "x", at(time.Hour))))
	held := h.claim(at(0), "w", 2, time.Minute, "q")
	if len(held) != 2 {
		t.Fatalf("claimed %d tasks, want 2", len(held))
	}
	hash := sha256.Sum256([]byte("secret"))
	if err := h.s.PutRemoteClaim(ctx, &store.RemoteClaim{TaskID: held[0].ID, Token: held[0].Token, RunID: "act", SecretHash: hash[:],
		Principal: "p", WorkerID: "w", ClaimedAt: at(0), Deadline: at(time.Minute), Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}

	got, err := h.s.DeleteRun(ctx, &store.DeleteRunParams{ID: "act", Force: true})
	if err != nil {
		t.Fatalf("forced DeleteRun: %v", err)
	}
	diff(t, "deleted", &store.DeletedRun{ID: "act", Workflow: "wf", Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, Tasks: 3}, got)

	// The holder's commit is fenced, with or without its lease.
	lease := held[1].Lease()
	res := h.update(at(time.Second), "act", &lease, &store.Update{Status: hephtype.StatusCompleted,
		History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "b"}}, Tasks: []store.NewTask{task("q", "c", at(0))}})
	if !errors.Is(res.Err, store.ErrLeaseLost) && !errors.Is(res.Err, store.ErrRunNotFound) {
		t.Fatalf("commit of a deleted run's task: %v, want ErrLeaseLost or ErrRunNotFound", res.Err)
	}
	res = h.update(at(time.Second), "act", nil, &store.Update{History: marker("late")})
	wantErr(t, "unfenced update of a deleted run", res.Err, store.ErrRunNotFound)
	if lost := h.heartbeat(at(2*time.Second), held[0].Lease(), held[1].Lease()); len(lost) != 2 {
		t.Fatalf("heartbeat of a deleted run's tasks lost %v, want both", lost)
	}
	if _, err := h.s.GetRemoteClaim(ctx, held[0].ID); !errors.Is(err, store.ErrRemoteClaimNotFound) {
		t.Fatalf("remote claim of a deleted task: %v, want ErrRemoteClaimNotFound", err)
	}
	_, err = h.s.CreateRequest(ctx, newRequest("act", "signal:s"))
	wantErr(t, "CreateRequest to a deleted run", err, store.ErrRunNotFound)
	// A log of a run that is gone is dropped.
	h.appendLogs(rec("act", "a", 1, time.Second, slog.LevelInfo, "late"))
	if _, err := h.s.Logs(ctx, &store.LogsParams{RunID: "act"}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("Logs of a deleted run: %v, want ErrRunNotFound", err)
	}
	// Nothing of the run is claimable, ever; the other run's task is.
	ts := h.claim(at(24*time.Hour), "w2", 10, time.Minute, "q")
	if len(ts) != 1 || ts[0].RunID != "other" {
		t.Fatalf("claimed after the delete: %v, want only other's task", ts)
	}
	if _, err := h.s.GetRun(ctx, "act"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun after the delete: %v", err)
	}
	// The business id is free.
	again := newRun("act2")
	again.BusinessID, again.KeyScope = "order::1", businesskey.ScopeActive
	if res := h.apply(at(time.Minute), store.Change{Create: again}); res[0].Err != nil {
		t.Fatalf("a new run with the deleted run's business id: %v", res[0].Err)
	}
}

// putWaitOf stores an event wait of the run id (its input carries the
// id).
func (h *harness) putWaitOf(id string) {
	h.t.Helper()
	w := eventWaitFixture("wait-of-" + id)
	w.RunID, w.Input = id, []byte(`{"of":"`+id+`"}`)
	if _, err := h.s.PutEventWait(h.t.Context(), w); err != nil {
		h.t.Fatalf("PutEventWait(%s): %v", id, err)
	}
}

// wantWaitsOf checks that run id has n event waits stored.
func (h *harness) wantWaitsOf(id string, n int) {
	h.t.Helper()
	ws, err := h.s.EventWaitsOf(h.t.Context(), id)
	if err != nil || len(ws) != n {
		h.t.Fatalf("event waits of %s: %d, %v; want %d", id, len(ws), err, n)
	}
}
