package storetest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// A run's trace context (Run.TraceContext), tags and metadata are stored
// when the run is created and never change; every task of the run carries
// them (Task.TraceContext, Task.Tags, Task.Metadata), whatever its kind,
// whichever path inserted it and whichever claim leased it, so that a
// worker parents its spans and labels what it reports without reading the
// run. A run without tags or metadata gives its tasks nil ones.

// traceparent is a W3C traceparent, as the runtime stores it.
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// traceOf is the trace context the suite gives run id: traceparent for
// the traced runs ("t..."), none for the others.
func traceOf(id string) string {
	if strings.HasPrefix(id, "t") {
		return traceparent
	}
	return ""
}

// runTags and runMeta are the tags and metadata of the traced runs: tags
// with the characters an array or JSON encoding must escape, metadata of
// every JSON type.
var (
	runTags = []string{"blue", `a "quoted", {braced} tag`, `back\slash`, "NULL", "", "ünï"}
	runMeta = map[string]json.RawMessage{"tenant": raw(`"acme"`), "n": raw(`42`), "ok": raw(`true`), "nil": raw(`null`),
		"cfg": raw(`{"a":[1,2],"b":{"c":"d"}}`), "odd key.$[0]": raw(`"ü"`)}
)

// tagged sets the traced runs' tags and metadata on r (a "t..." run).
func tagged(r *store.NewRun) *store.NewRun {
	r.Tags, r.Metadata = runTags, runMeta
	return r
}

// wantCopies fails unless each task carries its run's trace context, tags
// and metadata (nil ones for a run without), and the tasks are n.
func wantCopies(t *testing.T, what string, n int, ts []*store.Task) {
	t.Helper()
	if len(ts) != n {
		t.Fatalf("%s: %d tasks, want %d: %+v", what, len(ts), n, ts)
	}
	for _, tk := range ts {
		if tk.TraceContext != traceOf(tk.RunID) {
			t.Errorf("%s: task %d (%s %s of run %s) has trace context %q, want %q", what, tk.ID, tk.Kind, tk.Step,
				tk.RunID, tk.TraceContext, traceOf(tk.RunID))
		}
		if traceOf(tk.RunID) == "" {
			if tk.Tags != nil || tk.Metadata != nil {
				t.Errorf("%s: task %d (%s %s of run %s) of a run without tags and metadata has %q and %s, want nil",
					what, tk.ID, tk.Kind, tk.Step, tk.RunID, tk.Tags, tk.Metadata)
			}
			continue
		}
		if !slices.Equal(tk.Tags, runTags) || !sameMetadata(tk.Metadata, runMeta) {
			t.Errorf("%s: task %d (%s %s of run %s) has tags %q and metadata %s, want %q and %s", what, tk.ID, tk.Kind,
				tk.Step, tk.RunID, tk.Tags, tk.Metadata, runTags, runMeta)
		}
	}
}

// sameMetadata compares metadata by JSON value (a backend may normalize
// it).
func sameMetadata(a, b map[string]json.RawMessage) bool {
	return len(a) == len(b) && maps.EqualFunc(a, b, jsonEqual)
}

// kindTask is a task of kind k, ready at ready.
func kindTask(q, step string, k store.TaskKind, ready time.Time) store.NewTask {
	n := task(q, step, ready)
	n.Kind = k
	return n
}

// mixedTasks are tasks of every kind on queue q, ready at ready, with
// handler h.
func mixedTasks(q, prefix, h string, ready time.Time) []store.NewTask {
	out := []store.NewTask{
		kindTask(q, prefix+"step", store.TaskStep, ready),
		kindTask(q, prefix+"timer", store.TaskTimer, ready),
		kindTask(q, prefix+"decision", store.TaskDecision, ready),
		kindTask(q, prefix+"activity", store.TaskActivity, ready),
		kindTask(q, prefix+"wtimer", store.TaskWorkflowTimer, ready),
		kindTask(q, prefix+"op", store.TaskWorkflowOp, ready),
	}
	for i := range out {
		out[i].Handler = h
	}
	return out
}

func testTraceContext(t *testing.T, h *harness) {
	traceCreated(t, h)
	traceClaimed(t, h)
	traceUpdated(t, h)
	traceUnfenced(t, h)
	traceLimit(t, h)
	traceLabelLimits(t, h)
}

// traceCreated creates a traced run t1 and a plain run p1, each with a
// task of every kind, and reads them back.
func traceCreated(t *testing.T, h *harness) {
	ctx := t.Context()
	// Created: the traced run and each of its tasks carry the context, the
	// other run and its tasks none.
	traced := tagged(withTasks(newRun("t1"), mixedTasks("q", "", "action:a", at(0))...))
	traced.TraceContext, traced.BusinessID, traced.ConcurrencyKey = traceparent, "order::1", "tenant"
	plain := withTasks(newRun("p1"), mixedTasks("q", "", "action:a", at(0))...)
	res := h.create(at(0), traced, plain)
	for _, r := range res {
		if r.Run.TraceContext != traceOf(r.Run.ID) {
			t.Errorf("created run %s: trace context %q", r.Run.ID, r.Run.TraceContext)
		}
		wantCopies(t, "created tasks of "+r.Run.ID, 6, r.Tasks)
	}
	// Read back by every read of runs.
	for _, id := range []string{"t1", "p1"} {
		if got := h.get(id).TraceContext; got != traceOf(id) {
			t.Errorf("GetRun(%s): trace context %q", id, got)
		}
	}
	found, err := h.s.FindRun(ctx, &store.FindRunParams{BusinessID: "order::1"})
	if err != nil || found.TraceContext != traceparent {
		t.Errorf("FindRun: %+v, %v; want trace context %q", found, err, traceparent)
	}
	page := h.list(store.ListRunsParams{})
	if len(page.Runs) != 2 {
		t.Fatalf("ListRuns: %d runs", len(page.Runs))
	}
	for _, r := range page.Runs {
		if r.TraceContext != traceOf(r.ID) {
			t.Errorf("ListRuns: run %s has trace context %q", r.ID, r.TraceContext)
		}
	}
}

// traceClaimed claims the tasks of traceCreated's runs, reads them by
// GetTask, releases them and finds them stranded.
func traceClaimed(t *testing.T, h *harness) {
	ctx := t.Context()
	// Claimed, and read by GetTask and StrandedTasks.
	claimed := h.claim(at(time.Second), "w", 100, time.Minute, "q")
	wantCopies(t, "claimed tasks", 12, claimed)
	for _, tk := range claimed {
		got, err := h.s.GetTask(ctx, tk.ID)
		if err != nil {
			t.Fatalf("GetTask(%d): %v", tk.ID, err)
		}
		wantCopies(t, "GetTask", 1, []*store.Task{got})
	}
	// Released, with a handler no worker has: stranded.
	var leases []store.Lease
	for _, tk := range claimed {
		leases = append(leases, tk.Lease())
	}
	if err := h.s.ReleaseTasks(ctx, leases); err != nil {
		t.Fatalf("ReleaseTasks: %v", err)
	}
	for _, perRun := range []bool{false, true} {
		stranded, err := h.s.StrandedTasks(ctx, &store.StrandedParams{Queue: "q", Served: []string{}, ReadyBefore: at(time.Hour),
			Now: at(2 * time.Second), PerRun: perRun})
		if err != nil {
			t.Fatalf("StrandedTasks: %v", err)
		}
		n := 12
		if perRun {
			n = 2
		}
		wantCopies(t, "stranded tasks", n, stranded)
	}
}

// traceUpdated claims traceCreated's tasks again, and applies an update
// of each run fenced by its step with the hand-off claims.
func traceUpdated(t *testing.T, h *harness) {
	ctx := t.Context()
	// Updates fenced by a claimed task enqueue tasks of every kind, and a
	// claim of the same Apply (the hand-off) leases them; a controlled
	// queue's claims too, its work and its bookkeeping.
	h.putQueue(at(2*time.Second), store.Queue{Name: "cq", MaxRunning: 100})
	claimed := h.claim(at(3*time.Second), "w", 100, time.Minute, "q")
	wantCopies(t, "claimed again", 12, claimed)
	stepOf := func(runID string) *store.Task {
		for _, tk := range claimed {
			if tk.RunID == runID && tk.Kind == store.TaskStep {
				return tk
			}
		}
		t.Fatalf("no step of run %s claimed", runID)
		return nil
	}

	change := func(id, prefix string) store.Change {
		l := stepOf(id).Lease()
		return store.Change{RunID: id, Fence: &l, Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{Status: hephtype.StatusRunning, History: marker(prefix),
				Tasks: append(mixedTasks("h", prefix, "", at(0)), mixedTasks("cq", prefix, "", at(0))...)}, nil
		}}
	}
	ares, err := h.s.Apply(ctx, &store.ApplyParams{Now: at(4 * time.Second),
		Changes: []store.Change{change("t1", "u"), change("p1", "u")},
		Claims: []store.ClaimParams{
			{Queues: []string{"h"}, Owner: "w", Limit: 100, LeaseFor: time.Minute},
			{Queues: []string{"cq"}, Owner: "w", Limit: 100, LeaseFor: time.Minute},
		}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for _, r := range ares.Changes {
		if r.Err != nil {
			t.Fatalf("update: %v", r.Err)
		}
		if r.Run.TraceContext != traceOf(r.Run.ID) {
			t.Errorf("updated run %s: trace context %q", r.Run.ID, r.Run.TraceContext)
		}
		wantCopies(t, "tasks of an update of "+r.Run.ID, 12, r.Tasks)
	}
	wantCopies(t, "hand-off claim", 12, ares.Claimed[0])
	wantCopies(t, "hand-off claim of a controlled queue", 12, ares.Claimed[1])
}

// traceUnfenced enqueues tasks by updates without a fence, and by
// requests, and reopens a finished run.
func traceUnfenced(t *testing.T, h *harness) {
	ctx := t.Context()
	// Enqueued by an update without a fence, claimed by ClaimTasks of the
	// controlled queue and by a strict claim (a remote worker's).
	for _, id := range []string{"t1", "p1"} {
		tasks := append(mixedTasks("cq", "v", "", at(0)), mixedTasks("h", "v", "action:x", at(0))...)
		got := h.mustUpdate(at(5*time.Second), id, nil, &store.Update{Tasks: tasks})
		wantCopies(t, "tasks of an update without a fence of "+id, 12, got.Tasks)
	}
	wantCopies(t, "claim of a controlled queue", 12, h.claim(at(6*time.Second), "w", 100, time.Minute, "cq"))
	strict, err := h.s.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"h"}, Handlers: []string{"action:x"}, Strict: true,
		Owner: "w", Limit: 100, LeaseFor: time.Minute, Now: at(6 * time.Second)})
	if err != nil {
		t.Fatalf("strict ClaimTasks: %v", err)
	}
	wantCopies(t, "strict claim", 12, strict)

	// A request's task.
	for _, id := range []string{"t1", "p1"} {
		if _, err := h.s.CreateRequest(ctx, newRequest(id, "update:u1")); err != nil {
			t.Fatalf("CreateRequest(%s): %v", id, err)
		}
	}
	wantCopies(t, "request tasks", 2, h.claim(at(7*time.Second), "w", 100, time.Minute, "rq"))

	// A run that finishes and is reopened keeps its context.
	h.mustUpdate(at(8*time.Second), "t1", nil, &store.Update{Status: hephtype.StatusFailed, Error: "boom"})
	got := h.mustUpdate(at(9*time.Second), "t1", nil, &store.Update{Status: hephtype.StatusRunning, Reopen: true,
		Tasks: []store.NewTask{kindTask("z", "retry", store.TaskDecision, at(0))}})
	if got.Run.TraceContext != traceparent || h.get("t1").TraceContext != traceparent {
		t.Errorf("reopened run: trace context %q, stored %q", got.Run.TraceContext, h.get("t1").TraceContext)
	}
	wantCopies(t, "task of a reopened run", 1, h.claim(at(10*time.Second), "w", 100, time.Minute, "z"))
}

// traceLimit creates runs with the longest trace context, and refuses
// longer and malformed ones.
func traceLimit(t *testing.T, h *harness) {
	// The limit: 256 bytes of printable ASCII pass, anything else is
	// refused with nothing written.
	long := tagged(withTasks(newRun("t-long"), task("lq", "a", at(0))))
	long.TraceContext = "00-" + strings.Repeat("a", store.MaxTraceContext-3)
	h.create(at(11*time.Second), long)
	if got := h.get("t-long").TraceContext; got != long.TraceContext {
		t.Errorf("a trace context of %d bytes came back as %d bytes", len(long.TraceContext), len(got))
	}
	ts := h.claim(at(12*time.Second), "w", 100, time.Minute, "lq")
	if len(ts) != 1 || ts[0].TraceContext != long.TraceContext || !slices.Equal(ts[0].Tags, runTags) {
		t.Errorf("task of a run with the longest trace context: %+v", ts)
	}
	for _, bad := range []string{"00-" + strings.Repeat("a", store.MaxTraceContext-2), "00-a\nb", "00-é"} {
		r := withTasks(newRun("t-bad"), task("bq", "a", at(0)))
		r.TraceContext = bad
		err := h.apply(at(13*time.Second), store.Change{Create: r})[0].Err
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), "trace context") {
			t.Errorf("create with a trace context of %d bytes (%.10q...): %v, want ErrInvalidInput naming the trace context",
				len(bad), bad, err)
		} else if len(bad) > store.MaxTraceContext && !strings.Contains(err.Error(), "256") {
			t.Errorf("create with a trace context of %d bytes: %v, want the limit named", len(bad), err)
		}
	}
}

// traceLabelLimits creates a run with the largest labels, and refuses
// larger ones with nothing written.
func traceLabelLimits(t *testing.T, h *harness) {
	ctx := t.Context()
	// The labels' limits: at the limit passes, above it is refused with
	// nothing written, naming what is too large.
	full := withTasks(newRun("t-full"), task("fq", "a", at(0)))
	full.Tags = make([]string, store.MaxTags)
	for i := range full.Tags {
		full.Tags[i] = strings.Repeat("t", store.MaxTagSize)
	}
	full.Metadata = map[string]json.RawMessage{"k": json.RawMessage(`"` + strings.Repeat("m", store.MaxMetadataSize-3) + `"`)}
	h.create(at(13*time.Second), full)
	if ts := h.claim(at(13*time.Second), "w", 100, time.Minute, "fq"); len(ts) != 1 || len(ts[0].Tags) != store.MaxTags || len(ts[0].Metadata["k"]) != store.MaxMetadataSize-1 {
		t.Errorf("task of a run with the largest labels: %d tasks", len(ts))
	}
	for name, bad := range map[string]func(r *store.NewRun){
		"tags": func(r *store.NewRun) { r.Tags = make([]string, store.MaxTags+1) },
		"tag":  func(r *store.NewRun) { r.Tags = []string{"ok", strings.Repeat("t", store.MaxTagSize+1)} },
		"metadata": func(r *store.NewRun) {
			r.Metadata = map[string]json.RawMessage{"kk": json.RawMessage(`"` + strings.Repeat("m", store.MaxMetadataSize-3) + `"`)}
		},
	} {
		r := withTasks(newRun("t-bad"), task("bq", "a", at(0)))
		bad(r)
		err := h.apply(at(13*time.Second), store.Change{Create: r})[0].Err
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), name) {
			t.Errorf("create with too large %s: %v, want ErrInvalidInput naming them", name, err)
		}
	}
	_, err := h.s.GetRun(ctx, "t-bad")
	wantErr(t, "GetRun of a refused run", err, store.ErrRunNotFound)
	if ts := h.claim(at(14*time.Second), "w", 100, time.Minute, "bq"); len(ts) != 0 {
		t.Errorf("tasks of a refused run: %+v", ts)
	}
}

// Runs created in the caller's transaction (store.TxInserter) store their
// trace context and give it to their tasks as Apply's creates do, and a
// bad one is refused there too.
func testInsertInTxTrace(t *testing.T, h *harness, c *config) {
	traced := tagged(withTasks(newRun("t1"), mixedTasks("q", "", "", at(0))...))
	traced.TraceContext = traceparent
	bad := withTasks(newRun("t-bad"), task("q", "bad", at(0)))
	bad.TraceContext = "00-a\tb"
	tx := c.begin(t, h.s)
	res := insertInTx(t, h, tx, at(0), traced, withTasks(newRun("p1"), mixedTasks("q", "", "", at(0))...), bad)
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, r := range res[:2] {
		if r.Err != nil {
			t.Fatalf("insert: %v", r.Err)
		}
		wantCopies(t, "tasks inserted in a transaction", 6, r.Tasks)
		if got := h.get(r.Run.ID).TraceContext; got != traceOf(r.Run.ID) {
			t.Errorf("run %s inserted in a transaction: trace context %q", r.Run.ID, got)
		}
	}
	wantErr(t, "InsertInTx with a bad trace context", res[2].Err, hephtype.ErrInvalidInput)
	wantCopies(t, "claimed tasks inserted in a transaction", 12, h.claim(at(time.Second), "w", 100, time.Minute, "q"))
}
