package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func newRequest(runID, id string) *store.CreateRequestParams {
	return &store.CreateRequestParams{
		Request: store.NewRequest{RunID: runID, ID: id, Kind: store.RequestUpdate, Name: "add_item", Args: raw(`{"sku":"a"}`)},
		Task:    store.NewTask{Queue: "rq", Kind: store.TaskDecision, Step: "request", Index: -1, Attempt: 1, Payload: raw(`{"id":"` + id + `"}`), Handler: "workflow:cart"},
		Now:     at(time.Second),
	}
}

// testRequests: a request is recorded with its task, once per id; its
// answer is fenced by the task's lease and deletes the task; it goes with
// its run.
func testRequests(t *testing.T, h *harness) {
	want, tk := requestsCreate(t, h)
	requestsAnswer(t, h, want, tk)
	requestsQuery(t, h)
	requestsRecordedByAnswer(t, h)
	requestsDelete(t, h)
}

// requestsCreate records request update:u1 of run r1 (once) and claims
// its task; it returns the stored request and the task.
func requestsCreate(t *testing.T, h *harness) (*store.Request, *store.Task) {
	ctx := t.Context()
	h.create(at(0), newRun("r1"))
	h.mustUpdate(at(0), "r1", nil, &store.Update{History: marker("one")})

	got, err := h.s.CreateRequest(ctx, newRequest("r1", "update:u1"))
	if err != nil {
		t.Fatalf("CreateRequest: %v", err)
	}
	want := &store.Request{RunID: "r1", ID: "update:u1", Kind: store.RequestUpdate, Name: "add_item", Args: raw(`{"sku":"a"}`),
		Seq: 1, Status: store.RequestPending, CreatedAt: at(time.Second).Truncate(time.Microsecond)}
	diff(t, "created request", want, got)
	stored, err := h.s.GetRequest(ctx, "r1", "update:u1")
	if err != nil {
		t.Fatalf("GetRequest: %v", err)
	}
	diff(t, "stored request", want, stored)

	// The same id again records nothing and returns the first.
	again := newRequest("r1", "update:u1")
	again.Request.Args = raw(`{"sku":"b"}`)
	dup, err := h.s.CreateRequest(ctx, again)
	wantErr(t, "second CreateRequest", err, store.ErrDuplicateRequest)
	diff(t, "duplicate's request", want, dup)

	// Its task was enqueued once, for the run, with the run's workflow.
	ts := h.claim(at(2*time.Second), "w", 10, time.Minute, "rq")
	if len(ts) != 1 {
		t.Fatalf("claimed %d tasks, want the one of the request", len(ts))
	}
	tk := ts[0]
	if tk.RunID != "r1" || tk.Workflow != "wf" || tk.Kind != store.TaskDecision || tk.Step != "request" || tk.Handler != "workflow:cart" || !jsonEqual(tk.Payload, raw(`{"id":"update:u1"}`)) {
		t.Fatalf("request task = %+v", tk)
	}

	// Unknown runs and requests.
	_, err = h.s.CreateRequest(ctx, newRequest("nope", "x"))
	wantErr(t, "CreateRequest of a missing run", err, store.ErrRunNotFound)
	_, err = h.s.GetRequest(ctx, "r1", "update:none")
	wantErr(t, "GetRequest of a missing id", err, store.ErrRequestNotFound)
	bad := newRequest("r1", "has space")
	if _, err := h.s.CreateRequest(ctx, bad); err == nil {
		t.Fatal("CreateRequest took an id with a space")
	}
	return want, tk
}

// requestsAnswer answers request update:u1 through its task tk (fenced,
// once), and records the rejected request's id anew.
func requestsAnswer(t *testing.T, h *harness, want *store.Request, tk *store.Task) {
	ctx := t.Context()
	// An answer with a stale token writes nothing.
	stale := tk.Lease()
	stale.Token--
	ans := &store.AnswerRequestParams{RunID: "r1", ID: "update:u1", Fence: stale, Status: store.RequestRejected,
		Code: "invalid", Error: "no such sku", Now: at(3 * time.Second)}
	wantErr(t, "answer with a stale lease", h.s.AnswerRequest(ctx, ans), store.ErrLeaseLost)
	// An answer to a request the run lacks writes nothing either.
	ans.Fence = tk.Lease()
	ans.ID = "update:none"
	wantErr(t, "answer to a missing request", h.s.AnswerRequest(ctx, ans), store.ErrRequestNotFound)
	if r, err := h.s.GetRequest(ctx, "r1", "update:u1"); err != nil || r.Status != store.RequestPending {
		t.Fatalf("refused answers changed the request: %+v, %v", r, err)
	}
	ans.ID = "update:u1"
	if err := h.s.AnswerRequest(ctx, ans); err != nil {
		t.Fatalf("AnswerRequest: %v", err)
	}
	want.Status, want.Code, want.Error, want.AnsweredAt = store.RequestRejected, "invalid", "no such sku", at(3*time.Second).Truncate(time.Microsecond)
	stored, err := h.s.GetRequest(ctx, "r1", "update:u1")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "answered request", want, stored)
	// The task went with the answer: the same lease answers no more.
	wantErr(t, "second answer", h.s.AnswerRequest(ctx, ans), store.ErrLeaseLost)
	if ts := h.claim(at(time.Hour), "w", 10, time.Minute, "rq"); len(ts) != 0 {
		t.Fatalf("the answered request's task is still there: %+v", ts)
	}

	// A rejected request's id may be sent again: it is recorded anew,
	// pending, with a new task.
	again2 := newRequest("r1", "update:u1")
	again2.Request.Args = raw(`{"sku":"d"}`)
	again2.Now = at(4 * time.Second)
	renewed, err := h.s.CreateRequest(ctx, again2)
	if err != nil {
		t.Fatalf("CreateRequest of a rejected request's id: %v", err)
	}
	wantRenewed := &store.Request{RunID: "r1", ID: "update:u1", Kind: store.RequestUpdate, Name: "add_item", Args: raw(`{"sku":"d"}`),
		Seq: 1, Status: store.RequestPending, CreatedAt: at(4 * time.Second).Truncate(time.Microsecond)}
	diff(t, "renewed request", wantRenewed, renewed)
	if got, err := h.s.GetRequest(ctx, "r1", "update:u1"); err != nil {
		t.Fatal(err)
	} else {
		diff(t, "stored renewed request", wantRenewed, got)
	}
	nt := h.claim(at(5*time.Second), "w", 10, time.Minute, "rq")
	if len(nt) != 1 || nt[0].ID == tk.ID {
		t.Fatalf("the renewed request's tasks: %+v; want one new task", nt)
	}
	if err := h.s.AnswerRequest(ctx, &store.AnswerRequestParams{RunID: "r1", ID: "update:u1", Fence: nt[0].Lease(),
		Status: store.RequestRejected, Code: "invalid", Error: "no such sku", Now: at(5 * time.Second)}); err != nil {
		t.Fatal(err)
	}
}

// requestsQuery answers a query with a result.
func requestsQuery(t *testing.T, h *harness) {
	ctx := t.Context()
	// A query's answer carries a result.
	q := newRequest("r1", "query:q1")
	q.Request.Kind, q.Request.Name, q.Request.Args = store.RequestQuery, "total", nil
	if _, err := h.s.CreateRequest(ctx, q); err != nil {
		t.Fatal(err)
	}
	qt := h.claim(at(2*time.Hour), "w", 10, time.Minute, "rq")[0]
	if err := h.s.AnswerRequest(ctx, &store.AnswerRequestParams{RunID: "r1", ID: "query:q1", Fence: qt.Lease(),
		Status: store.RequestCompleted, Result: raw(`{"total":3}`), Now: at(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if r, err := h.s.GetRequest(ctx, "r1", "query:q1"); err != nil || r.Status != store.RequestCompleted || !jsonEqual(r.Result, raw(`{"total":3}`)) || r.Args != nil {
		t.Fatalf("answered query = %+v, %v", r, err)
	}
}

// requestsRecordedByAnswer answers requests of run r2 that travelled in
// their task alone (recorded by the answer) or were recorded already.
func requestsRecordedByAnswer(t *testing.T, h *harness) {
	ctx := t.Context()
	// A request that travelled in its task alone (created with its run)
	// is recorded by its answer.
	h.create(at(2*time.Hour), withTasks(newRun("r2"), store.NewTask{Queue: "rq", Kind: store.TaskDecision, Step: "request", Index: -1, Attempt: 1}))
	rt := h.claim(at(2*time.Hour), "w", 10, time.Minute, "rq")[0]
	nr := &store.NewRequest{RunID: "r2", ID: "update:first", Kind: store.RequestUpdate, Name: "add_item", Args: raw(`{"sku":"c"}`)}
	if err := h.s.AnswerRequest(ctx, &store.AnswerRequestParams{RunID: "r2", ID: "update:first", Fence: rt.Lease(), Status: store.RequestRejected,
		Code: "not_accepted", Error: "not now", Request: nr, Now: at(2 * time.Hour)}); err != nil {
		t.Fatalf("AnswerRequest of a request not recorded yet: %v", err)
	}
	want2 := &store.Request{RunID: "r2", ID: "update:first", Kind: store.RequestUpdate, Name: "add_item", Args: raw(`{"sku":"c"}`),
		Status: store.RequestRejected, Code: "not_accepted", Error: "not now", CreatedAt: at(2 * time.Hour), AnsweredAt: at(2 * time.Hour)}
	if got, err := h.s.GetRequest(ctx, "r2", "update:first"); err != nil {
		t.Fatal(err)
	} else {
		diff(t, "request recorded by its answer", want2, got)
	}
	// Recorded already: the answer's Request changes nothing but the answer.
	if _, err := h.s.CreateRequest(ctx, newRequest("r2", "update:second")); err != nil {
		t.Fatal(err)
	}
	st2 := h.claim(at(3*time.Hour), "w", 10, time.Minute, "rq")[0]
	other := &store.NewRequest{RunID: "r2", ID: "update:second", Kind: store.RequestQuery, Name: "other"}
	if err := h.s.AnswerRequest(ctx, &store.AnswerRequestParams{RunID: "r2", ID: "update:second", Fence: st2.Lease(), Status: store.RequestCompleted,
		Result: raw(`1`), Request: other, Now: at(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, err := h.s.GetRequest(ctx, "r2", "update:second"); err != nil || got.Kind != store.RequestUpdate || got.Name != "add_item" || got.Seq != 0 || got.Status != store.RequestCompleted {
		t.Fatalf("a recorded request answered with Request set: %+v, %v", got, err)
	}
	mismatch := &store.AnswerRequestParams{RunID: "r2", ID: "update:x", Fence: st2.Lease(), Status: store.RequestRejected, Request: other, Now: at(3 * time.Hour)}
	if err := h.s.AnswerRequest(ctx, mismatch); err == nil || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("an answer whose Request names another request: %v; want it refused as invalid", err)
	}
}

// requestsDelete deletes a request, and prunes run r1 with its requests.
func requestsDelete(t *testing.T, h *harness) {
	ctx := t.Context()
	// A request whose answer was read goes; deleting it again, or one
	// never recorded, is no error.
	for range 2 {
		if err := h.s.DeleteRequest(ctx, "r1", "query:q1"); err != nil {
			t.Fatalf("DeleteRequest: %v", err)
		}
	}
	if _, err := h.s.GetRequest(ctx, "r1", "query:q1"); !errors.Is(err, store.ErrRequestNotFound) {
		t.Fatalf("a deleted request is still there: %v", err)
	}
	if r, err := h.s.GetRequest(ctx, "r1", "update:u1"); err != nil || r.Status != store.RequestRejected {
		t.Fatalf("deleting one request touched another: %+v, %v", r, err)
	}

	// The requests go with their run.
	h.mustUpdate(at(3*time.Hour), "r1", nil, &store.Update{Status: hephtype.StatusCompleted, History: marker("done")})
	if n, err := h.s.PruneRuns(ctx, &store.PruneParams{FinishedBefore: at(4 * time.Hour)}); err != nil || n != 1 {
		t.Fatalf("PruneRuns: %d, %v", n, err)
	}
	if _, err := h.s.GetRequest(ctx, "r1", "update:u1"); !errors.Is(err, store.ErrRequestNotFound) {
		t.Fatalf("a pruned run's request is still there: %v", err)
	}
	// A new run with the same id starts with no requests.
	h.create(at(5*time.Hour), newRun("r1"))
	if _, err := h.s.CreateRequest(ctx, newRequest("r1", "update:u1")); err != nil {
		t.Fatalf("CreateRequest on the new run: %v", err)
	}
}
