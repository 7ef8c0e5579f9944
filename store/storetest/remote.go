package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// What workers outside the process need of the store: claims that return
// only the handlers they list (ClaimParams.Strict), on controlled queues
// too, and GetTask, which reads a task and its lease back by id.

func testStrictClaims(t *testing.T, h *harness) {
	mk := func(q, step string, kind store.TaskKind, handler string) store.NewTask {
		n := task(q, step, at(0))
		n.Kind, n.Handler = kind, handler
		return n
	}
	h.create(at(0), withTasks(newRun("s"),
		mk("sq", "timer", store.TaskWorkflowTimer, ""), mk("sq", "a", store.TaskStep, "action:a"),
		mk("sq", "b", store.TaskActivity, "activity:b"), mk("sq", "f", store.TaskStep, "flow:f@1")))
	claim := func(handlers []string, strict bool) []string {
		t.Helper()
		ts, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"sq"}, Handlers: handlers, Strict: strict,
			Owner: "w", Limit: 10, LeaseFor: time.Minute, Now: at(0)})
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, tk := range ts {
			steps = append(steps, tk.Step)
			if err := h.s.ReleaseTasks(t.Context(), []store.Lease{tk.Lease()}); err != nil {
				t.Fatal(err)
			}
		}
		return sorted(steps)
	}
	diff(t, "strict claim of one handler", []string{"a"}, claim([]string{"action:a"}, true))
	diff(t, "strict claim of two handlers", []string{"a", "b"}, claim([]string{"activity:b", "action:a", "action:zzz"}, true))
	diff(t, "strict claim of an empty list", []string(nil), claim([]string{}, true))
	diff(t, "lenient claim of one handler", []string{"a", "timer"}, claim([]string{"action:a"}, false))
	diff(t, "strict without a list (ignored)", []string{"a", "b", "f", "timer"}, claim(nil, true))

	// In Apply too.
	res, err := h.s.Apply(t.Context(), &store.ApplyParams{Now: at(0), Claims: []store.ClaimParams{{
		Queues: []string{"sq"}, Handlers: []string{"activity:b"}, Strict: true, Owner: "w", Limit: 10, LeaseFor: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Claimed[0]) != 1 || res.Claimed[0][0].Step != "b" {
		t.Fatalf("strict claim in Apply got %d tasks, want activity b alone", len(res.Claimed[0]))
	}

	// A controlled queue: the bookkeeping task (a workflow timer, which
	// flow control never holds back) is left to lenient claims, and the
	// queue's limit holds for the strict one.
	r := keyedRun("c", "k", "cq", 0, at(0))
	r.Tasks = append(r.Tasks, mk("cq", "timer", store.TaskWorkflowTimer, ""),
		mk("cq", "a1", store.TaskStep, "action:a"), mk("cq", "a2", store.TaskStep, "action:a"))
	h.putQueue(at(0), store.Queue{Name: "cq", MaxRunning: 1})
	h.create(at(0), r)
	ts, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"cq"}, Handlers: []string{"action:a"}, Strict: true,
		Owner: "w", Limit: 10, LeaseFor: time.Minute, Now: at(0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Step != "a1" {
		t.Fatalf("strict claim of a queue limited to 1 got %v, want a1 alone", steps(ts))
	}
	ts, err = h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"cq"}, Handlers: []string{"action:a"},
		Owner: "w2", Limit: 10, LeaseFor: time.Minute, Now: at(0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Step != "timer" {
		t.Fatalf("lenient claim of the limited queue got %v, want the timer alone (a2 waits for the slot)", steps(ts))
	}
}

func steps(ts []*store.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Step
	}
	return out
}

func testGetTask(t *testing.T, h *harness) {
	n := task("gq", "a", at(0))
	n.Handler, n.Payload, n.Details = "action:a", raw(`{"x":1}`), raw(`{"d":2}`)
	res := h.create(at(0), withTasks(newRun("g"), n))
	id := res[0].Tasks[0].ID
	got, err := h.s.GetTask(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := &store.Task{ID: id, RunID: "g", Queue: "gq", Kind: store.TaskStep, Workflow: "wf", Version: 1, Step: "a", Index: -1, Attempt: 1,
		Payload: raw(`{"x":1}`), ReadyAt: at(0), Handler: "action:a", Details: raw(`{"d":2}`), CreatedAt: at(0)}
	diff(t, "unclaimed task", want, got)

	ts := h.claim(at(time.Second), "w", 1, time.Minute, "gq")
	got, err = h.s.GetTask(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	want.Owner, want.Token, want.LeaseUntil, want.Claims = "w", ts[0].Token, at(time.Second+time.Minute), 1
	diff(t, "claimed task", want, got)

	l := ts[0].Lease()
	h.mustUpdate(at(2*time.Second), "g", &l, &store.Update{})
	if _, err := h.s.GetTask(t.Context(), id); !errors.Is(err, store.ErrTaskNotFound) {
		t.Fatalf("GetTask of a completed task: %v, want ErrTaskNotFound", err)
	}
	if _, err := h.s.GetTask(t.Context(), id+1000); !errors.Is(err, store.ErrTaskNotFound) {
		t.Fatalf("GetTask of an unknown id: %v, want ErrTaskNotFound", err)
	}
}
