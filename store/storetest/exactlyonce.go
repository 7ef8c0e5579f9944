package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The store's share of "exactly once": idempotency keys, fences on any
// run and on creates, handlers that keep tasks from workers that cannot
// run them, heartbeat details, run conditions, the worker registry and
// stranded tasks.

func marker(name string) []store.NewEvent {
	return []store.NewEvent{{Kind: hephtype.EventMarker, Name: name}}
}

func keyed(runID, key string, evs []store.NewEvent) store.Change {
	return store.Change{RunID: runID, Key: key, Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{History: evs}, nil
	}}
}

func testChangeKey(t *testing.T, h *harness) {
	h.create(at(0), newRun("k"), newRun("other"))

	// The first change with a key applies and records it on its first
	// entry only.
	res := h.apply(at(time.Second), keyed("k", "signal:1", []store.NewEvent{
		{Kind: hephtype.EventSignalReceived, Name: "a"}, {Kind: hephtype.EventMarker, Name: "b"},
	}))[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	evs := h.history("k")
	if len(evs) != 2 || evs[0].Key != "signal:1" || evs[1].Key != "" {
		t.Fatalf("history after a keyed change = %+v, want the key on the first entry only", evs)
	}

	// The same key again writes nothing, even in a later batch.
	before := h.get("k")
	calls := 0
	res = h.apply(at(2*time.Second), store.Change{RunID: "k", Key: "signal:1", Decide: func(*store.Run) (*store.Update, error) {
		calls++
		return &store.Update{History: marker("again")}, nil
	}})[0]
	wantErr(t, "the same key again", res.Err, store.ErrDuplicateChange)
	if res.Run != nil {
		t.Fatalf("a duplicate change returned a run: %+v", res.Run)
	}
	diff(t, "run after a duplicate", before, h.get("k"))
	if n := len(h.history("k")); n != 2 {
		t.Fatalf("history after a duplicate has %d entries, want 2", n)
	}
	_ = calls // Decide may or may not be called for a duplicate; its update is not written.

	// Keys are per run.
	if res := h.apply(at(3*time.Second), keyed("other", "signal:1", marker("x")))[0]; res.Err != nil {
		t.Fatalf("the same key on another run: %v", res.Err)
	}

	// Twice in one batch: the second is a duplicate of the first.
	res2 := h.apply(at(4*time.Second), keyed("k", "signal:2", marker("1")), keyed("k", "signal:2", marker("2")), keyed("k", "signal:3", marker("3")))
	if res2[0].Err != nil || res2[2].Err != nil {
		t.Fatalf("keyed changes in one batch: %v, %v", res2[0].Err, res2[2].Err)
	}
	wantErr(t, "the same key twice in one batch", res2[1].Err, store.ErrDuplicateChange)
	var names []string
	for _, e := range h.history("k") {
		names = append(names, e.Name)
	}
	diff(t, "history names", []string{"a", "b", "1", "3"}, names)

	// A change that appends nothing records no key.
	h.apply(at(5*time.Second), store.Change{RunID: "k", Key: "empty", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{Published: raw(`1`)}, nil
	}})
	if res := h.apply(at(6*time.Second), keyed("k", "empty", marker("e")))[0]; res.Err != nil {
		t.Fatalf("a key whose first change appended nothing: %v", res.Err)
	}

	// A refused change records no key.
	errNo := errors.New("no")
	h.apply(at(7*time.Second), store.Change{RunID: "k", Key: "refused", Decide: func(*store.Run) (*store.Update, error) { return nil, errNo }})
	if res := h.apply(at(8*time.Second), keyed("k", "refused", marker("r")))[0]; res.Err != nil {
		t.Fatalf("a key whose first change was refused: %v", res.Err)
	}

	// A lost lease is reported before a duplicate key.
	h.mustUpdate(at(9*time.Second), "k", nil, &store.Update{Tasks: []store.NewTask{task("kq", "a", at(0))}})
	l := h.claim(at(9*time.Second), "w", 1, time.Minute, "kq")[0].Lease()
	stale := store.Lease{TaskID: l.TaskID, Token: l.Token + 1}
	res = h.apply(at(10*time.Second), store.Change{RunID: "k", Key: "signal:1", Fence: &stale, Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{History: marker("late")}, nil
	}})[0]
	wantErr(t, "a stale fence with a duplicate key", res.Err, store.ErrLeaseLost)

	// A key over the limit is refused.
	res = h.apply(at(11*time.Second), keyed("k", strings.Repeat("k", store.MaxKeyLen+1), marker("long")))[0]
	if res.Err == nil {
		t.Fatalf("a key of %d bytes was accepted", store.MaxKeyLen+1)
	}
	if res := h.apply(at(12*time.Second), keyed("k", strings.Repeat("k", store.MaxKeyLen), marker("max")))[0]; res.Err != nil {
		t.Fatalf("a key of %d bytes: %v", store.MaxKeyLen, res.Err)
	}
}

func testFenceOtherRun(t *testing.T, h *harness) {
	// A child's task fences a change of its parent, and goes with it.
	h.create(at(0), newRun("parent"), withTasks(newRun("child"), task("q", "report", at(0))))
	l := h.claim(at(0), "w", 1, time.Minute, "q")[0].Lease()
	stale := store.Lease{TaskID: l.TaskID, Token: l.Token + 1}
	res := h.update(at(time.Second), "parent", &stale, &store.Update{History: marker("child done")})
	wantErr(t, "stale fence of another run's task", res.Err, store.ErrLeaseLost)
	res = h.update(at(2*time.Second), "parent", &l, &store.Update{History: marker("child done")})
	if res.Err != nil {
		t.Fatalf("fence with another run's task: %v", res.Err)
	}
	if lost := h.heartbeat(at(time.Hour), l); len(lost) != 1 {
		t.Fatalf("the fenced task of the child is still leased after the parent's change")
	}
	res = h.update(at(3*time.Second), "parent", &l, &store.Update{History: marker("child done")})
	wantErr(t, "the same report again", res.Err, store.ErrLeaseLost)
	if n := len(h.history("parent")); n != 1 {
		t.Fatalf("parent history has %d entries, want 1", n)
	}
}

func testFencedCreate(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("p"), task("q", "start1", at(0)), task("q", "start2", at(0)), task("q", "start3", at(0)), task("q", "start4", at(0))))
	ts := h.claim(at(0), "w", 4, time.Minute, "q")
	if len(ts) != 4 {
		t.Fatalf("claimed %d tasks", len(ts))
	}
	l1, l2, l3, l4 := ts[0].Lease(), ts[1].Lease(), ts[2].Lease(), ts[3].Lease()

	// Held: the run is created and the task deleted, in one change.
	res := h.apply(at(time.Second), store.Change{Create: newRun("c1"), Fence: &l1})[0]
	if res.Err != nil || res.Run == nil {
		t.Fatalf("fenced create: %+v", res)
	}
	h.get("c1")
	if lost := h.heartbeat(at(time.Hour), l1); len(lost) != 1 {
		t.Fatal("the fence of a create survived it")
	}
	// Again with the same (now gone) lease: refused, nothing created.
	res = h.apply(at(2*time.Second), store.Change{Create: newRun("c1b"), Fence: &l1})[0]
	wantErr(t, "create with a lost fence", res.Err, store.ErrLeaseLost)
	if _, err := h.s.GetRun(t.Context(), "c1b"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("a refused fenced create was written: %v", err)
	}
	// A stale token.
	stale := store.Lease{TaskID: l2.TaskID, Token: l2.Token + 1}
	res = h.apply(at(3*time.Second), store.Change{Create: newRun("c2"), Fence: &stale})[0]
	wantErr(t, "create with a stale fence", res.Err, store.ErrLeaseLost)
	// The id is taken: refused as such, and the task stays leased.
	res = h.apply(at(4*time.Second), store.Change{Create: newRun("c1"), Fence: &l2})[0]
	wantErr(t, "fenced create of an existing id", res.Err, store.ErrRunExists)
	if lost := h.heartbeat(at(time.Hour), l2); len(lost) != 0 {
		t.Fatal("a refused fenced create deleted its fence")
	}
	// The business id is taken: the same.
	k := newRun("k1")
	k.BusinessID, k.KeyScope = "id::1", businesskey.ScopeActive
	h.create(at(5*time.Second), k)
	k2 := newRun("k2")
	k2.BusinessID, k2.KeyScope = "id::1", businesskey.ScopeActive
	res = h.apply(at(6*time.Second), store.Change{Create: k2, Fence: &l3})[0]
	wantErr(t, "fenced create of a taken business id", res.Err, store.ErrDuplicateRun)
	if lost := h.heartbeat(at(time.Hour), l3); len(lost) != 0 {
		t.Fatal("a fenced create refused for its business id deleted its fence")
	}
	// Two creates with one fence in a batch: the second finds it gone.
	rs := h.apply(at(7*time.Second), store.Change{Create: newRun("d1"), Fence: &l4}, store.Change{Create: newRun("d2"), Fence: &l4})
	if rs[0].Err != nil {
		t.Fatalf("first create of the batch: %v", rs[0].Err)
	}
	wantErr(t, "second create with the same fence", rs[1].Err, store.ErrLeaseLost)
	if _, err := h.s.GetRun(t.Context(), "d2"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("the second fenced create was written: %v", err)
	}
	// A fence cancelled by an earlier change of the batch.
	h.mustUpdate(at(8*time.Second), "p", nil, &store.Update{Tasks: []store.NewTask{task("q", "start5", at(0))}})
	l5 := h.claim(at(8*time.Second), "w", 1, time.Minute, "q")[0].Lease()
	rs = h.apply(at(9*time.Second),
		store.Change{RunID: "p", Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{Status: hephtype.StatusCancelled, Cancel: []store.TaskMatch{{Index: -1}}}, nil
		}},
		store.Change{Create: newRun("e1"), Fence: &l5})
	if rs[0].Err != nil {
		t.Fatal(rs[0].Err)
	}
	wantErr(t, "create fenced by a task an earlier change cancelled", rs[1].Err, store.ErrLeaseLost)
}

func testHandlers(t *testing.T, h *harness) {
	mk := func(step, handler string) store.NewTask {
		n := task("hq", step, at(0))
		n.Handler = handler
		return n
	}
	h.create(at(0), withTasks(newRun("h"), mk("any", ""), mk("a1", "flow:a@1"), mk("a2", "flow:a@2"), mk("b", "activity:b")))
	claim := func(handlers []string) []string {
		t.Helper()
		ts, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"hq"}, Handlers: handlers, Owner: "w", Limit: 10, LeaseFor: time.Minute, Now: at(0)})
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, tk := range ts {
			steps = append(steps, tk.Step+"="+tk.Handler)
			if err := h.s.ReleaseTasks(t.Context(), []store.Lease{tk.Lease()}); err != nil {
				t.Fatal(err)
			}
		}
		return sorted(steps)
	}
	diff(t, "claim with no handler list", []string{"a1=flow:a@1", "a2=flow:a@2", "any=", "b=activity:b"}, claim(nil))
	diff(t, "claim with flow a@1", []string{"a1=flow:a@1", "any="}, claim([]string{"flow:a@1"}))
	diff(t, "claim with an empty list", []string{"any="}, claim([]string{}))
	diff(t, "claim with two handlers", []string{"a2=flow:a@2", "any=", "b=activity:b"}, claim([]string{"activity:b", "flow:a@2", "flow:zzz@1"}))

	// Claims in Apply filter too.
	res, err := h.s.Apply(t.Context(), &store.ApplyParams{Now: at(0), Claims: []store.ClaimParams{{
		Queues: []string{"hq"}, Handlers: []string{"activity:b"}, Owner: "w", Limit: 10, LeaseFor: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range res.Claimed[0] {
		got = append(got, tk.Step)
	}
	diff(t, "claim in Apply with a handler list", []string{"any", "b"}, sorted(got))

	// NextReady ignores tasks the handlers exclude: only a1 (at +1h) is
	// left unleased for flow:a@1 once "any" and "b" are leased.
	h.create(at(0), withTasks(newRun("h2"), mk("late", "flow:x@1")))
	h.mustUpdate(at(0), "h2", nil, &store.Update{Tasks: []store.NewTask{func() store.NewTask {
		n := mk("soon", "flow:y@1")
		n.ReadyAt = at(time.Hour)
		return n
	}()}})
	next, ok, err := h.s.NextReady(t.Context(), &store.NextReadyParams{Queues: []string{"hq"}, Handlers: []string{"flow:y@1"}})
	if err != nil {
		t.Fatal(err)
	}
	// Ready at once for flow:y@1: a1 and a2 are not its; "any" and "b"
	// are leased until +1m, and "soon" is ready at +1h.
	if !ok || !next.Equal(at(time.Minute)) {
		t.Fatalf("NextReady for flow:y@1 = %v, %v; want the lease expiry of the tasks any worker can run (%v)", next, ok, at(time.Minute))
	}
	next, ok, err = h.s.NextReady(t.Context(), &store.NextReadyParams{Queues: []string{"hq"}, Handlers: []string{"flow:x@1"}})
	if err != nil || !ok || !next.Equal(at(0)) {
		t.Fatalf("NextReady for flow:x@1 = %v, %v, %v; want %v", next, ok, err, at(0))
	}
}

// testHandlersBehindOthers: a claim that lists handlers, of two queues
// whose fronts hold many tasks of another handler, takes its own tasks
// (and those any worker runs, unless strict) in claim order across the
// queues and handlers: priority, then ready time, then id; leased tasks
// are skipped, and the limit cuts the merged order.
func testHandlersBehindOthers(t *testing.T, h *harness) {
	mk := func(queue, step, handler string, priority int, ready time.Duration) store.NewTask {
		n := task(queue, step, at(ready))
		n.Handler, n.Priority = handler, priority
		return n
	}
	var front []store.NewTask
	for i := range 40 {
		front = append(front, mk([]string{"bq", "bq2"}[i%2], fmt.Sprint("o", i), "action:other", 9, time.Duration(i)*time.Millisecond))
	}
	h.create(at(0), withTasks(newRun("front"), front...))
	h.create(at(0), withTasks(newRun("mine"),
		mk("bq", "m1", "flow:mine@1", 0, 40*time.Second), mk("bq", "m2", "flow:mine@1", 5, 50*time.Second),
		mk("bq", "m3", "flow:mine@1", 0, 45*time.Second), mk("bq", "e1", "", 0, 42*time.Second),
		mk("bq2", "n1", "flow:mine@1", 0, 41*time.Second), mk("bq2", "late", "flow:mine@1", 0, time.Hour),
		mk("bq3", "elsewhere", "flow:mine@1", 9, 0)))
	claim := func(strict bool, limit int) []string {
		t.Helper()
		ts, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"bq", "bq2"}, Handlers: []string{"flow:mine@1", "flow:none@1"},
			Strict: strict, Owner: "w", Limit: limit, LeaseFor: time.Minute, Now: at(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, tk := range ts {
			steps = append(steps, tk.Step)
		}
		return steps
	}
	diff(t, "the first claim, limit 3", []string{"m2", "m1", "n1"}, claim(false, 3))
	diff(t, "a strict claim after it", []string{"m3"}, claim(true, 10))
	diff(t, "the rest", []string{"e1"}, claim(false, 10))
	diff(t, "nothing left that is ready", []string(nil), claim(false, 10))

	// Claimers racing for one handler's tasks share them: none twice, and
	// none left while a claimer had room.
	var race []store.NewTask
	for i := range 20 {
		race = append(race, mk("rq", fmt.Sprint("r", i), "flow:race@1", 0, time.Duration(i)*time.Millisecond))
	}
	h.create(at(0), withTasks(newRun("race"), race...))
	var wg sync.WaitGroup
	got := make([][]*store.Task, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			got[i], errs[i] = h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"rq"}, Handlers: []string{"flow:race@1"}, Strict: true,
				Owner: fmt.Sprint("w", i), Limit: 5, LeaseFor: time.Minute, Now: at(time.Minute)})
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("racing claimer %d: %v", i, errs[i])
		}
		for _, tk := range got[i] {
			if seen[tk.ID] {
				t.Fatalf("task %s claimed twice", tk.Step)
			}
			seen[tk.ID] = true
		}
	}
	if len(seen) != 20 {
		t.Errorf("4 racing claimers of 5 took %d of the 20 tasks", len(seen))
	}
}

func testHeartbeatDetails(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("d"), task("dq", "a", at(0)), task("dq", "b", at(0))))
	ts := h.claim(at(0), "w", 2, time.Minute, "dq")
	if len(ts) != 2 || len(ts[0].Details) != 0 {
		t.Fatalf("claimed %+v", ts)
	}
	la, lb := ts[0].Lease(), ts[1].Lease()
	lost, err := h.s.Heartbeat(t.Context(), &store.HeartbeatParams{Leases: []store.Lease{la, lb}, Until: at(time.Minute),
		Details: map[int64]json.RawMessage{la.TaskID: raw(`{"done":3}`)}})
	if err != nil || len(lost) != 0 {
		t.Fatalf("heartbeat with details: %v, lost %v", err, lost)
	}
	// A stale lease records nothing.
	staleB := store.Lease{TaskID: lb.TaskID, Token: lb.Token + 1}
	if _, err := h.s.Heartbeat(t.Context(), &store.HeartbeatParams{Leases: []store.Lease{staleB}, Until: at(time.Minute),
		Details: map[int64]json.RawMessage{lb.TaskID: raw(`{"stale":true}`)}}); err != nil {
		t.Fatal(err)
	}
	// The next claim (the lease expired: a re-execution) reads them.
	again := h.claim(at(2*time.Minute), "w2", 2, time.Minute, "dq")
	details := map[string]string{}
	for _, tk := range again {
		details[tk.Step] = string(tk.Details)
	}
	if !jsonEqual(raw(details["a"]), raw(`{"done":3}`)) || details["b"] != "" {
		t.Fatalf("details after re-claim = %v", details)
	}
	// A retry carries them in its NewTask (claimed while w2 still holds
	// the others).
	n := task("dq", "a", at(0))
	n.Details = raw(`{"done":4}`)
	res := h.mustUpdate(at(150*time.Second), "d", nil, &store.Update{Tasks: []store.NewTask{n}})
	if !jsonEqual(res.Tasks[0].Details, raw(`{"done":4}`)) {
		t.Fatalf("enqueued task details = %s", res.Tasks[0].Details)
	}
	got := h.claim(at(150*time.Second), "w3", 1, time.Minute, "dq")
	if len(got) != 1 || !jsonEqual(got[0].Details, raw(`{"done":4}`)) {
		t.Fatalf("claimed retry = %+v", got)
	}
}

func testCondition(t *testing.T, h *harness) {
	h.create(at(0), newRun("c"))
	if c := h.get("c").Condition; !c.IsZero() {
		t.Fatalf("a new run has condition %+v", c)
	}
	res := h.mustUpdate(at(time.Second), "c", nil, &store.Update{Condition: &store.Condition{Code: "decision_failing", Message: "boom"}})
	want := store.Condition{Code: "decision_failing", Message: "boom", Since: at(time.Second)}
	diff(t, "condition in the result", want, res.Run.Condition)
	diff(t, "condition read back", want, h.get("c").Condition)
	page := h.list(store.ListRunsParams{})
	diff(t, "condition in ListRuns", want, page.Runs[0].Condition)
	// Nil parameters are no parameters, not a panic.
	if all, err := h.s.ListRuns(t.Context(), nil); err != nil || len(all.Runs) != 1 {
		t.Fatalf("ListRuns(nil) = %v, %v; want the one run", all, err)
	}
	// A nil Condition keeps it; an explicit Since is kept.
	h.mustUpdate(at(2*time.Second), "c", nil, &store.Update{History: marker("x")})
	diff(t, "condition after an update that does not name one", want, h.get("c").Condition)
	h.mustUpdate(at(3*time.Second), "c", nil, &store.Update{Condition: &store.Condition{Code: "decision_failing", Message: "boom again", Since: at(time.Second)}})
	diff(t, "condition updated", store.Condition{Code: "decision_failing", Message: "boom again", Since: at(time.Second)}, h.get("c").Condition)
	// A zero Condition clears it.
	h.mustUpdate(at(4*time.Second), "c", nil, &store.Update{Condition: &store.Condition{}})
	if c := h.get("c").Condition; !c.IsZero() || !c.Since.IsZero() {
		t.Fatalf("condition after clearing = %+v", c)
	}
}

func testPruneKeepsWork(t *testing.T, h *harness) {
	ctx := t.Context()
	// A continued run whose successor is not started yet: its task keeps it.
	r := withTasks(newRun("cont"), task("pq", "continue", at(0)))
	h.create(at(0), r, newRun("done"))
	h.mustUpdate(at(time.Second), "cont", nil, &store.Update{Status: hephtype.StatusContinued, History: marker("continued")})
	h.mustUpdate(at(time.Second), "done", nil, &store.Update{Status: hephtype.StatusCompleted, History: marker("completed")})
	n, err := h.s.PruneRuns(ctx, &store.PruneParams{FinishedBefore: at(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("pruned %d runs, want 1 (the run without tasks)", n)
	}
	h.get("cont")
	if _, err := h.s.GetRun(ctx, "done"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("the finished run without tasks was kept: %v", err)
	}
	// Once its task is done, it goes.
	l := h.claim(at(2*time.Second), "w", 1, time.Minute, "pq")[0].Lease()
	h.mustUpdate(at(3*time.Second), "cont", &l, &store.Update{})
	if n, err := h.s.PruneRuns(ctx, &store.PruneParams{FinishedBefore: at(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("prune after the task was done: %d, %v", n, err)
	}
}

func testStrandedTasks(t *testing.T, h *harness) {
	mk := func(step, handler string, ready time.Time) store.NewTask {
		n := task("sq", step, ready)
		n.Handler = handler
		return n
	}
	h.create(at(0), withTasks(newRun("s"),
		mk("served", "flow:a@1", at(0)),
		mk("anyone", "", at(0)),
		mk("old", "flow:a@2", at(0)),
		mk("older", "activity:x", at(-time.Hour)),
		mk("young", "flow:a@2", at(50*time.Minute)),
		mk("leased", "flow:a@3", at(-2*time.Hour)),
	))
	leased, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"sq"}, Handlers: []string{"flow:a@3"},
		Owner: "w", Limit: 1, LeaseFor: 2 * time.Hour, Now: at(0)})
	if err != nil || len(leased) != 1 || leased[0].Step != "leased" {
		t.Fatalf("claim of the oldest task = %+v, %v", leased, err)
	}
	get := func(p store.StrandedParams) []string {
		t.Helper()
		ts, err := h.s.StrandedTasks(t.Context(), &p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range ts {
			out = append(out, tk.Step)
		}
		return out
	}
	served := []string{"flow:a@1"}
	diff(t, "stranded tasks, oldest first", []string{"older", "old", "young"},
		get(store.StrandedParams{Queue: "sq", Served: served, ReadyBefore: at(time.Hour), Now: at(time.Hour)}))
	diff(t, "stranded tasks ready before +30m", []string{"older", "old"},
		get(store.StrandedParams{Queue: "sq", Served: served, ReadyBefore: at(30 * time.Minute), Now: at(time.Hour)}))
	diff(t, "stranded tasks with a limit", []string{"older"},
		get(store.StrandedParams{Queue: "sq", Served: served, ReadyBefore: at(time.Hour), Now: at(time.Hour), Limit: 1}))
	diff(t, "no stranded tasks when all are served", []string(nil),
		get(store.StrandedParams{Queue: "sq", Served: []string{"flow:a@1", "flow:a@2", "flow:a@3", "activity:x"}, ReadyBefore: at(time.Hour), Now: at(time.Hour)}))
	diff(t, "no stranded tasks of another queue", []string(nil),
		get(store.StrandedParams{Queue: "other", ReadyBefore: at(time.Hour), Now: at(time.Hour)}))
	// A leased task is not stranded while its lease lasts; it is once the
	// lease expired.
	diff(t, "stranded tasks once the lease expired", []string{"leased", "older", "served", "old", "young"},
		get(store.StrandedParams{Queue: "sq", ReadyBefore: at(time.Hour), Now: at(3 * time.Hour)}))
	// PerRun: the oldest of each run, Limit counting runs, so that a run
	// with many stranded tasks hides no other.
	h.create(at(0), withTasks(newRun("s2"), mk("late", "flow:a@2", at(10*time.Minute)), mk("later", "flow:a@2", at(20*time.Minute))))
	diff(t, "stranded tasks, one per run", []string{"older", "late"},
		get(store.StrandedParams{Queue: "sq", Served: served, ReadyBefore: at(time.Hour), Now: at(time.Hour), PerRun: true}))
	diff(t, "stranded tasks, one per run, with a limit of 2 runs", []string{"leased", "late"},
		get(store.StrandedParams{Queue: "sq", ReadyBefore: at(time.Hour), Now: at(3 * time.Hour), PerRun: true, Limit: 2}))
	diff(t, "stranded tasks of two runs without PerRun, limit 3", []string{"leased", "older", "served"},
		get(store.StrandedParams{Queue: "sq", ReadyBefore: at(time.Hour), Now: at(3 * time.Hour), Limit: 3}))
}

func testWorkers(t *testing.T, h *harness) {
	ctx := t.Context()
	w1 := &store.Worker{ID: "w1", Queues: []string{"a", "b"}, Handlers: []string{"flow:f@1"}, BuildID: "b1", Host: "h1", PID: 11,
		StartedAt: at(0), SeenAt: at(0), ExpiresAt: at(time.Minute)}
	w2 := &store.Worker{ID: "w2", Queues: []string{"a"}, Host: "h2", PID: 22, StartedAt: at(0), SeenAt: at(0), ExpiresAt: at(2 * time.Minute)}
	for _, w := range []*store.Worker{w1, w2} {
		if err := h.s.RegisterWorker(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	list := func(now time.Time) []*store.Worker {
		t.Helper()
		ws, err := h.s.ListWorkers(ctx, &store.ListWorkersParams{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	diff(t, "live workers", []*store.Worker{w1, w2}, list(at(30*time.Second)))
	diff(t, "live workers after w1 expired", []*store.Worker{w2}, list(at(90*time.Second)))
	// A refresh extends the record and replaces its fields.
	w1b := *w1
	w1b.SeenAt, w1b.ExpiresAt, w1b.Handlers, w1b.BuildID = at(100*time.Second), at(5*time.Minute), []string{"flow:f@1", "flow:f@2"}, "b2"
	if err := h.s.RegisterWorker(ctx, &w1b); err != nil {
		t.Fatal(err)
	}
	diff(t, "live workers after w1 refreshed", []*store.Worker{&w1b, w2}, list(at(100*time.Second)))
	if err := h.s.RemoveWorker(ctx, "w2"); err != nil {
		t.Fatal(err)
	}
	if err := h.s.RemoveWorker(ctx, "nobody"); err != nil {
		t.Fatalf("removing an unknown worker: %v", err)
	}
	diff(t, "live workers after w2 left", []*store.Worker{&w1b}, list(at(100*time.Second)))
}
