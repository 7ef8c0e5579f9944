package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// RunRewrite runs the suite of store.PayloadRewriter: every payload of
// every table of store.PayloadTables is read, rewritten and read back
// through the store, in batches; payloads left unchanged are not
// written; a bad cursor, table or a failing Rewrite are errors.
func RunRewrite(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Run("EveryPayload", func(t *testing.T) {
		t.Parallel()
		testRewriteEvery(t, &harness{t: t, s: newStore(t)})
	})
	t.Run("Errors", func(t *testing.T) {
		t.Parallel()
		testRewriteErrors(t, &harness{t: t, s: newStore(t)})
	})
}

// wrapped is what the suite's Rewrite makes of a payload.
func wrapped(v string) string { return `{"w":` + v + `}` }

func testRewriteEvery(t *testing.T, h *harness) {
	ctx := t.Context()
	rw, ok := h.s.(store.PayloadRewriter)
	if !ok {
		t.Fatalf("%T does not implement store.PayloadRewriter", h.s)
	}
	// Three runs with inputs, history data, tasks with payloads, items
	// and details; outputs and published state on one; a request; a
	// schedule.
	for i := range 3 {
		r := newRun(fmt.Sprintf("r%d", i))
		r.History = []store.NewEvent{{Kind: hephtype.EventRunStarted, Data: raw(`{"h":` + fmt.Sprint(i) + `}`)}, {Kind: hephtype.EventStepScheduled, Step: "a"}}
		r.Tasks = []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: "a", Index: -1, Attempt: 1, ReadyAt: at(0), Payload: raw(`{"p":1}`), Item: raw(`[1]`), Details: raw(`{"d":1}`)}}
		h.create(at(0), r)
	}
	h.apply(at(time.Second), store.Change{RunID: "r0", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{Output: raw(`{"o":1}`), Published: raw(`{"pub":1}`), State: raw(`{"s":1}`)}, nil
	}})
	if _, err := h.s.CreateRequest(ctx, &store.CreateRequestParams{Request: store.NewRequest{RunID: "r1", ID: "q1", Kind: store.RequestQuery, Name: "n", Args: raw(`{"a":1}`)},
		Task: store.NewTask{Queue: "q", Kind: store.TaskDecision, Step: "request", Index: -1, ReadyAt: at(0)}, Now: at(time.Second)}); err != nil {
		t.Fatal(err)
	}
	h.createSchedule(newSchedule("s1"), at(0))
	for i := range 3 {
		h.send(fmt.Sprint("ev", i), "n", `{"e":`+fmt.Sprint(i)+`}`, at(0))
	}
	h.send("ev-empty", "n", ``, at(0))
	putWaitAndGroup(t, h)

	rewrites, unchanged := 0, 0
	rewrite := func(v json.RawMessage) (json.RawMessage, bool, error) {
		if jsonEqual(v, raw(`{"pub":1}`)) {
			unchanged++
			return v, false, nil // left as it is
		}
		rewrites++
		return json.RawMessage(wrapped(string(v))), true, nil
	}
	total := 0
	for _, table := range store.PayloadTables {
		after, batches := "", 0
		for {
			res, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: table, After: after, Limit: 2, Rewrite: rewrite})
			if err != nil {
				t.Fatalf("%s after %q: %v", table, after, err)
			}
			if res.Skipped != 0 || res.Rows > 2 {
				t.Fatalf("%s: %+v", table, res)
			}
			total += res.Changed
			batches++
			if after = res.Next; after == "" {
				break
			}
			if batches > 10 {
				t.Fatalf("%s: the walk does not end (next %q)", table, after)
			}
		}
	}
	if total != rewrites || unchanged != 1 {
		t.Fatalf("%d payloads changed, %d rewritten, %d unchanged", total, rewrites, unchanged)
	}
	// Read back through the store.
	for i := range 3 {
		e, err := h.s.GetEvent(ctx, fmt.Sprint("ev", i))
		if err != nil || !jsonEqual(e.Data, raw(wrapped(`{"e":`+fmt.Sprint(i)+`}`))) {
			t.Errorf("event ev%d: %+v, %v", i, e, err)
		}
	}
	r0, err := h.s.GetRun(ctx, "r0")
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]json.RawMessage{"input": r0.Input, "output": r0.Output, "state": r0.State, "published": r0.Published} {
		want := map[string]string{"input": wrapped(`{"id":"r0"}`), "output": wrapped(`{"o":1}`), "state": wrapped(`{"s":1}`), "published": `{"pub":1}`}[what]
		if !jsonEqual(got, raw(want)) {
			t.Errorf("run r0 %s: %s, want %s", what, got, want)
		}
	}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		evs, err := h.s.History(ctx, &store.HistoryParams{RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(evs[0].Data, raw(wrapped(`{"h":`+fmt.Sprint(i)+`}`))) || len(evs[1].Data) != 0 {
			t.Errorf("run %s history data: %s, %s", id, evs[0].Data, evs[1].Data)
		}
		ts, err := h.s.RunTasks(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range ts {
			if tk.Kind != store.TaskStep {
				continue
			}
			if !jsonEqual(tk.Payload, raw(wrapped(`{"p":1}`))) || !jsonEqual(tk.Item, raw(wrapped(`[1]`))) || !jsonEqual(tk.Details, raw(wrapped(`{"d":1}`))) {
				t.Errorf("run %s task: %s, %s, %s", id, tk.Payload, tk.Item, tk.Details)
			}
		}
	}
	req, err := h.s.GetRequest(ctx, "r1", "q1")
	if err != nil || !jsonEqual(req.Args, raw(wrapped(`{"a":1}`))) {
		t.Errorf("request args: %v, %v", req, err)
	}
	if sc := h.getSchedule("s1"); !jsonEqual(sc.Input, raw(wrapped(`{"k":1}`))) {
		t.Errorf("schedule input: %s", sc.Input)
	}
	wantWaitAndGroupRewritten(t, h)
}

// putWaitAndGroup stores an event wait's input, and a group event's
// input (a debounced trigger's open group).
func putWaitAndGroup(t *testing.T, h *harness) {
	t.Helper()
	if _, err := h.s.PutEventWait(t.Context(), eventWaitFixture("w1")); err != nil {
		t.Fatal(err)
	}
	g := newGroupHarness(t, h, &store.Trigger{Name: "deb", Event: "typed", TargetKind: store.TargetFlow, TargetName: "f", Debounce: time.Hour})
	if err := g.join(g.fire("deb", "g1", at(0)), "", 1, at(0)); err != nil {
		t.Fatal(err)
	}
}

// wantWaitAndGroupRewritten checks that the inputs putWaitAndGroup
// stored read back rewritten.
func wantWaitAndGroupRewritten(t *testing.T, h *harness) {
	t.Helper()
	ctx := t.Context()
	if ws, err := h.s.EventWaitsOf(ctx, "run-w1"); err != nil || len(ws) != 1 || !jsonEqual(ws[0].Input, raw(wrapped(`{"invoice":7}`))) {
		t.Errorf("event wait: %+v, %v", ws, err)
	}
	gs, err := h.s.ListTriggerGroups(ctx, &store.ListTriggerGroupsParams{Trigger: "deb", Limit: store.MaxGroupsPage})
	if err != nil || len(gs) != 1 || len(gs[0].Events) != 1 || !jsonEqual(gs[0].Events[0].Input, raw(wrapped(`"in-g1"`))) {
		t.Errorf("trigger groups: %+v, %v", gs, err)
	}
}

func testRewriteErrors(t *testing.T, h *harness) {
	ctx := t.Context()
	rw := h.s.(store.PayloadRewriter)
	h.create(at(0), newRun("r0"))
	same := func(v json.RawMessage) (json.RawMessage, bool, error) { return v, false, nil }
	if _, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: "principals", Rewrite: same}); err == nil {
		t.Error("a table without payloads: no error")
	}
	if _, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: "runs", After: "nope", Rewrite: same}); err == nil {
		t.Error("a bad cursor: no error")
	}
	boom := errors.New("boom")
	if _, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: "runs", Rewrite: func(json.RawMessage) (json.RawMessage, bool, error) { return nil, false, boom }}); !errors.Is(err, boom) {
		t.Errorf("a failing Rewrite: %v", err)
	}
	if r, err := h.s.GetRun(ctx, "r0"); err != nil || !jsonEqual(r.Input, raw(`{"id":"r0"}`)) {
		t.Errorf("after the failed rewrite: %v, %v", r, err)
	}
}
