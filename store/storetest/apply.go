package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func testApplyUpdate(t *testing.T, h *harness) {
	r := newRun("u")
	r.Status, r.State = hephtype.StatusPending, raw(`{"v":0}`)
	r.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}}
	created := h.create(at(0), r)[0].Run

	// Decide sees the run as stored.
	var seen *store.Run
	res := h.apply(at(time.Second), store.Change{RunID: "u", Decide: func(run *store.Run) (*store.Update, error) {
		seen = run
		return &store.Update{Status: hephtype.StatusRunning, State: raw(`{"v":1}`),
			History: []store.NewEvent{{Kind: hephtype.EventStepScheduled, Step: "a"}}}, nil
	}})[0]
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	diff(t, "run given to Decide", created, seen)
	want := *created
	want.Status, want.State, want.Seq, want.UpdatedAt = hephtype.StatusRunning, raw(`{"v":1}`), 2, at(time.Second)
	diff(t, "run after status+state", &want, res.Run)
	diff(t, "GetRun after status+state", &want, h.get("u"))

	// Zero fields leave the run as it is.
	res = h.mustUpdate(at(2*time.Second), "u", nil, &store.Update{Published: raw(`{"q":"p1"}`)})
	want.Published, want.UpdatedAt = raw(`{"q":"p1"}`), at(2*time.Second)
	diff(t, "run after published", &want, res.Run)
	diff(t, "GetRun after published", &want, h.get("u"))

	res = h.mustUpdate(at(3*time.Second), "u", nil, &store.Update{Status: hephtype.StatusWaiting, Output: raw(`[1,2]`)})
	want.Status, want.Output, want.UpdatedAt = hephtype.StatusWaiting, raw(`[1,2]`), at(3*time.Second)
	diff(t, "run after waiting", &want, res.Run)

	// A terminal status sets FinishedAt.
	res = h.mustUpdate(at(4*time.Second), "u", nil, &store.Update{Status: hephtype.StatusFailed, Error: "boom",
		History: []store.NewEvent{{Kind: hephtype.EventRunFailed, Error: "boom"}}})
	want.Status, want.Error, want.Seq, want.UpdatedAt, want.FinishedAt = hephtype.StatusFailed, "boom", 3, at(4*time.Second), at(4*time.Second)
	diff(t, "run after failing", &want, res.Run)
	diff(t, "GetRun after failing", &want, h.get("u"))

	// A later change of a finished run keeps its FinishedAt.
	res = h.mustUpdate(at(5*time.Second), "u", nil, &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: "late"}}})
	want.Seq, want.UpdatedAt = 4, at(5*time.Second)
	diff(t, "run after a late change", &want, res.Run)
	diff(t, "GetRun after a late change", &want, h.get("u"))

	// An update enqueues tasks with the run's workflow and version.
	res = h.mustUpdate(at(6*time.Second), "u", nil, &store.Update{Tasks: []store.NewTask{task("q", "b", at(time.Minute))}})
	if len(res.Tasks) != 1 || res.Tasks[0].ID == 0 || res.Tasks[0].Workflow != "wf" || res.Tasks[0].Version != 1 ||
		res.Tasks[0].RunID != "u" || !res.Tasks[0].ReadyAt.Equal(at(time.Minute)) || !res.Tasks[0].CreatedAt.Equal(at(6*time.Second)) {
		t.Fatalf("enqueued task = %+v", res.Tasks)
	}
}

func testSameRunTwiceInBatch(t *testing.T, h *harness) {
	h.create(at(0), newRun("s"))
	var seqs []int64
	var statuses []hephtype.RunStatus
	decide := func(st hephtype.RunStatus) func(*store.Run) (*store.Update, error) {
		return func(run *store.Run) (*store.Update, error) {
			seqs, statuses = append(seqs, run.Seq), append(statuses, run.Status)
			return &store.Update{Status: st, History: []store.NewEvent{{Kind: hephtype.EventMarker}}}, nil
		}
	}
	res := h.apply(at(time.Second),
		store.Change{RunID: "s", Decide: decide(hephtype.StatusWaiting)},
		store.Change{RunID: "s", Decide: decide(hephtype.StatusCompleted)},
	)
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	diff(t, "seq seen by Decide", []int64{0, 1}, seqs)
	diff(t, "status seen by Decide", []hephtype.RunStatus{hephtype.StatusRunning, hephtype.StatusWaiting}, statuses)
	got := h.get("s")
	if got.Seq != 2 || got.Status != hephtype.StatusCompleted || len(h.history("s")) != 2 {
		t.Fatalf("run after two changes = %+v", got)
	}
}

func testDecideError(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("bad"), task("q", "a", at(0))), newRun("good"))
	lease := h.claim(at(0), "w", 1, time.Minute, "q")[0].Lease()
	before := h.get("bad")
	errNo := errors.New("no, thanks")
	res := h.apply(at(time.Second),
		store.Change{RunID: "bad", Fence: &lease, Decide: func(*store.Run) (*store.Update, error) { return nil, errNo }},
		store.Change{RunID: "good", Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{Status: hephtype.StatusCompleted, History: []store.NewEvent{{Kind: hephtype.EventRunCompleted}}}, nil
		}},
		store.Change{RunID: "ghost", Decide: func(*store.Run) (*store.Update, error) { return &store.Update{}, nil }},
		store.Change{Create: newRun("new")},
	)
	if !errors.Is(res[0].Err, errNo) || res[0].Run != nil || res[0].Tasks != nil {
		t.Fatalf("refused change: %+v, want the Decide error and no run", res[0])
	}
	if res[1].Err != nil || res[1].Run.Status != hephtype.StatusCompleted {
		t.Fatalf("good change: %+v", res[1])
	}
	wantErr(t, "unknown run", res[2].Err, store.ErrRunNotFound)
	if res[3].Err != nil || res[3].Run == nil {
		t.Fatalf("create in the batch: %+v", res[3])
	}
	// Nothing of the refused change was written: the fenced task is still
	// there and still leased.
	diff(t, "refused run", before, h.get("bad"))
	if evs := h.history("bad"); len(evs) != 0 {
		t.Fatalf("refused run history = %v", evs)
	}
	if lost := h.heartbeat(at(time.Minute), lease); len(lost) != 0 {
		t.Fatalf("lease of the refused change's task lost: %v", lost)
	}
	if got := h.get("good"); got.Status != hephtype.StatusCompleted || got.Seq != 1 {
		t.Fatalf("good run = %+v", got)
	}
	h.get("new")
}

func testFencing(t *testing.T, h *harness) {
	res := h.create(at(0), withTasks(newRun("f"), task("q", "a", at(0))), withTasks(newRun("other"), task("q2", "x", at(0))))
	taskID := res[0].Tasks[0].ID
	claimed := h.claim(at(0), "w", 1, time.Minute, "q")
	if len(claimed) != 1 || claimed[0].ID != taskID {
		t.Fatalf("claimed %v, want task %d", claimed, taskID)
	}
	lease := claimed[0].Lease()

	// A stale token of another run's task does not fence this run (a
	// held one does: see FenceOtherRun).
	otherLease := h.claim(at(0), "w", 1, time.Minute, "q2")[0].Lease()
	otherLease.Token++
	r := h.update(at(time.Second), "f", &otherLease, &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker}}})
	wantErr(t, "fence with another run's stale task", r.Err, store.ErrLeaseLost)

	// The right token completes and deletes the task.
	r = h.update(at(2*time.Second), "f", &lease, &store.Update{History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "a"}}})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if lost := h.heartbeat(at(time.Hour), lease); len(lost) != 1 || lost[0] != taskID {
		t.Fatalf("heartbeat of the completed task: lost %v, want [%d]", lost, taskID)
	}
	if ts := h.claim(at(24*time.Hour), "w", 10, time.Minute, "q"); len(ts) != 0 {
		t.Fatalf("completed task still claimable: %v", ts)
	}
	// A duplicate completion changes nothing.
	r = h.update(at(3*time.Second), "f", &lease, &store.Update{History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "a"}}})
	wantErr(t, "duplicate completion", r.Err, store.ErrLeaseLost)
	if got := h.get("f"); got.Seq != 1 {
		t.Fatalf("seq after a duplicate completion = %d, want 1", got.Seq)
	}
	// An unknown task id.
	ghost := store.Lease{TaskID: taskID + 1000, Token: lease.Token}
	r = h.update(at(4*time.Second), "f", &ghost, &store.Update{})
	wantErr(t, "unknown task", r.Err, store.ErrLeaseLost)
}

func testFencingStale(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("f"), task("q", "a", at(0))))
	old := h.claim(at(0), "w1", 1, time.Minute, "q")[0]
	// The lease expires and another worker claims the task.
	fresh := h.claim(at(time.Minute), "w2", 1, time.Minute, "q")
	if len(fresh) != 1 || fresh[0].ID != old.ID || fresh[0].Token == old.Token {
		t.Fatalf("reclaim = %+v, want task %d with a new token (old %d)", fresh, old.ID, old.Token)
	}
	before := h.get("f")
	oldLease := old.Lease()
	r := h.update(at(90*time.Second), "f", &oldLease, &store.Update{Status: hephtype.StatusCompleted,
		History: []store.NewEvent{{Kind: hephtype.EventStepCompleted}}, Tasks: []store.NewTask{task("q", "b", at(0))}})
	wantErr(t, "stale completion", r.Err, store.ErrLeaseLost)
	diff(t, "run after a stale completion", before, h.get("f"))
	if evs := h.history("f"); len(evs) != 0 {
		t.Fatalf("history after a stale completion = %v", evs)
	}
	if ts := h.claim(at(90*time.Second), "w3", 10, time.Minute, "q"); len(ts) != 0 {
		t.Fatalf("tasks after a stale completion: %v", ts)
	}
	freshLease := fresh[0].Lease()
	if lost := h.heartbeat(at(2*time.Minute), freshLease); len(lost) != 0 {
		t.Fatalf("new holder lost its lease: %v", lost)
	}
	r = h.update(at(100*time.Second), "f", &freshLease, &store.Update{Status: hephtype.StatusCompleted})
	if r.Err != nil {
		t.Fatalf("completion by the new holder: %v", r.Err)
	}
}

func testKeyActive(t *testing.T, h *harness) {
	mk := func(id string) *store.NewRun {
		r := newRun(id)
		r.BusinessID, r.KeyScope = "order::1", businesskey.ScopeActive
		return r
	}
	h.create(at(0), mk("r1"))
	dup := func(id, holder string) {
		t.Helper()
		res := h.apply(at(time.Second), store.Change{Create: mk(id)})[0]
		wantErr(t, "duplicate "+id, res.Err, store.ErrDuplicateRun)
		var de *store.DuplicateRunError
		if !errors.As(res.Err, &de) || de.BusinessID != "order::1" || de.ExistingRunID != holder {
			t.Fatalf("duplicate %s: error %#v, want a *DuplicateRunError naming %s", id, res.Err, holder)
		}
		if res.Run != nil {
			t.Fatalf("duplicate %s: run %v", id, res.Run)
		}
		if _, err := h.s.GetRun(t.Context(), id); !errors.Is(err, store.ErrRunNotFound) {
			t.Fatalf("refused run %s exists: %v", id, err)
		}
	}
	dup("r2", "r1")
	h.mustUpdate(at(2*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusWaiting})
	dup("r2", "r1") // waiting is still active
	// An update that keeps the status and the key (a backend may leave
	// both out of what it writes) keeps the key held.
	h.mustUpdate(at(2*time.Second), "r1", nil, &store.Update{State: raw(`{"step":"b"}`)})
	dup("r2", "r1")
	h.mustUpdate(at(3*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusCompleted})
	h.create(at(4*time.Second), mk("r3"))
	dup("r4", "r3")
	if r, err := h.s.FindRun(t.Context(), &store.FindRunParams{BusinessID: "order::1"}); err != nil || r.ID != "r3" {
		t.Fatalf("FindRun = %v, %v; want r3", r, err)
	}
	// An empty KeyScope with a business id is ScopeActive.
	r := newRun("r5")
	r.BusinessID = "order::2"
	if got := h.create(at(5*time.Second), r)[0].Run; got.KeyScope != businesskey.ScopeActive {
		t.Fatalf("default scope = %q, want active", got.KeyScope)
	}
	r = newRun("r6")
	r.BusinessID = "order::2"
	res := h.apply(at(6*time.Second), store.Change{Create: r})[0]
	wantErr(t, "duplicate under the default scope", res.Err, store.ErrDuplicateRun)
	// Runs without a business id never collide.
	h.create(at(7*time.Second), newRun("n1"), newRun("n2"))
}

func testKeyForever(t *testing.T, h *harness) {
	mk := func(id string, scope businesskey.Scope) *store.NewRun {
		r := newRun(id)
		r.BusinessID, r.KeyScope = "invoice::7", scope
		return r
	}
	h.create(at(0), mk("r1", businesskey.ScopeForever))
	h.mustUpdate(at(time.Second), "r1", nil, &store.Update{Status: hephtype.StatusCompleted})
	for _, scope := range []businesskey.Scope{businesskey.ScopeForever, businesskey.ScopeActive} {
		res := h.apply(at(2*time.Second), store.Change{Create: mk("r2", scope)})[0]
		var de *store.DuplicateRunError
		if !errors.As(res.Err, &de) || de.ExistingRunID != "r1" || !errors.Is(res.Err, store.ErrDuplicateRun) {
			t.Fatalf("%s run after a finished forever run: %v, want a duplicate naming r1", scope, res.Err)
		}
	}
	// ScopeNone never collides, even with a forever run.
	h.create(at(3*time.Second), mk("r3", businesskey.ScopeNone))
}

func testKeyNone(t *testing.T, h *harness) {
	var rs []*store.NewRun
	for _, id := range []string{"a", "b", "c"} {
		r := newRun(id)
		r.BusinessID, r.KeyScope = "order::1", businesskey.ScopeNone
		rs = append(rs, r)
	}
	h.create(at(0), rs[0])
	h.create(at(time.Second), rs[1], rs[2])
	// An active run with that id is still allowed, once.
	act := newRun("d")
	act.BusinessID, act.KeyScope = "order::1", businesskey.ScopeActive
	h.create(at(2*time.Second), act)
	if page := h.list(store.ListRunsParams{BusinessID: "order::1"}); len(page.Runs) != 4 {
		t.Fatalf("runs with the id: %v", ids(page.Runs))
	}
}

func testKeySameBatch(t *testing.T, h *harness) {
	mk := func(id, bid string) *store.NewRun {
		r := newRun(id)
		r.BusinessID, r.KeyScope = bid, businesskey.ScopeActive
		return r
	}
	res := h.apply(at(0),
		store.Change{Create: mk("a", "k::x")},
		store.Change{Create: mk("b", "k::x")},
		store.Change{Create: mk("c", "k::y")},
		store.Change{Create: mk("d", "k::y")},
	)
	var de *store.DuplicateRunError
	if res[0].Err != nil || res[2].Err != nil {
		t.Fatalf("first creates: %v, %v", res[0].Err, res[2].Err)
	}
	if !errors.As(res[1].Err, &de) || de.ExistingRunID != "a" {
		t.Fatalf("second create of k::x: %v, want a duplicate naming a", res[1].Err)
	}
	if !errors.As(res[3].Err, &de) || de.ExistingRunID != "c" {
		t.Fatalf("second create of k::y: %v, want a duplicate naming c", res[3].Err)
	}
	// Finishing the holder and starting again in one batch works.
	res = h.apply(at(time.Second),
		store.Change{RunID: "a", Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{Status: hephtype.StatusCancelled}, nil
		}},
		store.Change{Create: mk("e", "k::x")},
	)
	if res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("finish and restart: %v, %v", res[0].Err, res[1].Err)
	}
}
