package commit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// A submitted Create is committed to the store before Submit returns, and
// its result carries the run as stored.
func TestSubmitCreateStoresRun(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	c := newCommitter(t, commit.Config{Store: st})

	r, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if r.Err != nil || r.Res.Run == nil || r.Res.Run.ID != "r1" || r.Res.Run.Status != hephtype.StatusRunning {
		t.Fatalf("result: err %v, run %+v", r.Err, r.Res.Run)
	}
	got, err := st.GetRun(ctx, "r1")
	if err != nil {
		t.Fatalf("GetRun after Submit: %v", err)
	}
	if got.Workflow != "wf" || got.Status != hephtype.StatusRunning {
		t.Fatalf("stored run: %+v", got)
	}
}

// After Close every kind of submission is refused with ErrClosed and
// nothing reaches the store; Close may be called again.
func TestSubmitAfterCloseReturnsErrClosed(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	c := newCommitter(t, commit.Config{Store: st})
	if _, err := c.Submit(ctx, store.Change{Create: newRun("before", hephtype.StatusRunning)}); err != nil {
		t.Fatalf("Submit before Close: %v", err)
	}
	c.Close()
	c.Close() // safe twice

	if r, err := c.Submit(ctx, store.Change{Create: newRun("late", hephtype.StatusRunning)}); !errors.Is(err, commit.ErrClosed) || r != nil {
		t.Errorf("Submit after Close: %v, %+v; want ErrClosed and no request", r, err)
	}
	if _, err := c.SubmitHandoff(ctx, store.Change{Create: newRun("late", hephtype.StatusRunning)}, "q"); !errors.Is(err, commit.ErrClosed) {
		t.Errorf("SubmitHandoff after Close: %v, want ErrClosed", err)
	}
	if _, err := c.SubmitAll(ctx, []store.Change{{Create: newRun("late", hephtype.StatusRunning)}}); !errors.Is(err, commit.ErrClosed) {
		t.Errorf("SubmitAll after Close: %v, want ErrClosed", err)
	}
	if _, err := st.GetRun(ctx, "late"); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("GetRun of a refused create: %v, want ErrRunNotFound", err)
	}
}

// A committer closed before its loops ever started (nothing submitted)
// closes at once, twice, and refuses later submissions.
func TestCloseBeforeFirstSubmit(t *testing.T) {
	c := newCommitter(t, commit.Config{Store: openStore(t)})
	c.Close()
	c.Close()
	if _, err := c.Submit(t.Context(), store.Change{Create: newRun("r1", hephtype.StatusRunning)}); !errors.Is(err, commit.ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
}

// Changes queued when Close is called are still applied: their callers get
// their results, not ErrClosed, and the runs are stored.
func TestCloseAppliesQueuedChanges(t *testing.T) {
	ctx := t.Context()
	entered, gate := make(chan struct{}), make(chan struct{})
	st := &hookedStore{Store: openStore(t)}
	st.onApply = func(call int, p *store.ApplyParams, real func() (*store.ApplyResult, error)) (*store.ApplyResult, error) {
		if call == 1 {
			close(entered)
			<-gate // hold the loop inside its first transaction
		}
		return real()
	}
	c := newCommitter(t, commit.Config{Store: st})

	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	submit := func(i int) {
		wg.Go(func() {
			_, errs[i] = c.Submit(ctx, store.Change{Create: newRun(fmt.Sprint("r", i), hephtype.StatusRunning)})
		})
	}
	submit(0)
	awaitDone(t, entered, "the first Apply")
	for i := 1; i < n; i++ {
		submit(i)
	}
	waitFor(t, "the other changes to be queued", func() bool { return commit.Queued(c) == n-1 })
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	waitFor(t, "Close to stop the loops", func() bool { return commit.Stopping(c) })
	close(gate)
	wg.Wait()
	awaitDone(t, closed, "Close")

	for i, err := range errs {
		if err != nil {
			t.Errorf("Submit %d queued before Close: %v", i, err)
		}
		if _, err := st.GetRun(ctx, fmt.Sprint("r", i)); err != nil {
			t.Errorf("run %d queued before Close: %v", i, err)
		}
	}
}

// Group commit: changes submitted while a transaction commits go together
// in the next one. 200 concurrent creates all succeed with at most two
// Apply calls: the one that was held and one for everything queued
// meanwhile.
func TestGroupCommit(t *testing.T) {
	ctx := t.Context()
	entered, gate := make(chan struct{}), make(chan struct{})
	st := &hookedStore{Store: openStore(t)}
	st.onApply = func(call int, p *store.ApplyParams, real func() (*store.ApplyResult, error)) (*store.ApplyResult, error) {
		if call == 1 {
			close(entered)
			<-gate
		}
		return real()
	}
	c := newCommitter(t, commit.Config{Store: st})

	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := c.Submit(ctx, store.Change{Create: newRun(fmt.Sprint("r", i), hephtype.StatusRunning)})
			if err == nil && (r.Res.Run == nil || r.Res.Run.ID != fmt.Sprint("r", i)) {
				err = fmt.Errorf("result run %+v", r.Res.Run)
			}
			errs[i] = err
		})
	}
	awaitDone(t, entered, "the first Apply")
	first := st.applySizes()[0]
	waitFor(t, "every change to be queued or in the first Apply", func() bool { return first+commit.Queued(c) == n })
	close(gate)
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			t.Errorf("Submit %d: %v", i, err)
		}
	}
	page, err := st.ListRuns(ctx, &store.ListRunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != n {
		t.Errorf("%d runs stored, want %d", len(page.Runs), n)
	}
	sizes := st.applySizes()
	if len(sizes) >= n {
		t.Errorf("%d Apply calls for %d changes: no group commit", len(sizes), n)
	}
	// The held transaction, then one for everything that queued behind it
	// (nothing, when all changes made it into the first one).
	want := []int{first, n - first}
	if first == n {
		want = want[:1]
	}
	if !slices.Equal(sizes, want) {
		t.Errorf("Apply calls with %v changes, want %v", sizes, want)
	}
}

// SubmitAll returns one result per change, in order, and commits groups
// of at most MaxCommitBatch changes in order: of two creates with the same
// id the first wins and the second is refused with ErrRunExists.
func TestSubmitAllInOrderGroups(t *testing.T) {
	ctx := t.Context()
	st := &hookedStore{Store: openStore(t)}
	c := newCommitter(t, commit.Config{Store: st, MaxCommitBatch: 2})

	ids := []string{"a", "a", "b", "c", "d"}
	var chs []store.Change
	for i, id := range ids {
		nr := newRun(id, hephtype.StatusRunning)
		nr.Input = json.RawMessage(fmt.Sprint(i))
		chs = append(chs, store.Change{Create: nr})
	}
	reqs, err := c.SubmitAll(ctx, chs)
	if err != nil {
		t.Fatalf("SubmitAll: %v", err)
	}
	if len(reqs) != len(ids) {
		t.Fatalf("%d results for %d changes", len(reqs), len(ids))
	}
	for i, r := range reqs {
		if r.Change.Create.ID != ids[i] {
			t.Errorf("result %d is for run %s, want %s", i, r.Change.Create.ID, ids[i])
		}
		switch {
		case i == 1:
			if !errors.Is(r.Err, store.ErrRunExists) {
				t.Errorf("second create of a: %v, want ErrRunExists", r.Err)
			}
		case r.Err != nil || r.Res.Run == nil || r.Res.Run.ID != ids[i]:
			t.Errorf("create %d: err %v, run %+v", i, r.Err, r.Res.Run)
		}
	}
	if a, err := st.GetRun(ctx, "a"); err != nil || string(a.Input) != "0" {
		t.Errorf("run a: %+v, %v; want the first create's", a, err)
	}
	sizes := st.applySizes()
	total := 0
	for _, s := range sizes {
		total += s
		if s > 2 {
			t.Errorf("an Apply of %d changes, over MaxCommitBatch 2 (all: %v)", s, sizes)
		}
	}
	if total != len(ids) {
		t.Errorf("Apply calls carried %d changes (%v), want %d", total, sizes, len(ids))
	}
}

// A batch whose transaction committed but whose outcome was lost (Apply
// reports an error after committing) is retried; the retried Create finds
// its own run, so the caller gets the run and no ErrRunExists; the failure
// is reported as a CommitFailed event.
func TestRetryAfterLostCommitFindsOwnRun(t *testing.T) {
	ctx := t.Context()
	errLost := errors.New("connection lost after commit")
	st := &hookedStore{Store: openStore(t)}
	st.onApply = func(call int, p *store.ApplyParams, real func() (*store.ApplyResult, error)) (*store.ApplyResult, error) {
		res, err := real()
		if call == 1 && err == nil {
			return nil, errLost
		}
		return res, err
	}
	hub := telemetry.New(nil)
	evs := record(t, hub)
	c := newCommitter(t, commit.Config{Store: st, Telemetry: hub})

	r, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)})
	if err != nil {
		t.Fatalf("Submit after a lost commit outcome: %v", err)
	}
	if r.Res.Run == nil || r.Res.Run.ID != "r1" {
		t.Fatalf("result run: %+v", r.Res.Run)
	}
	if sizes := st.applySizes(); len(sizes) != 2 {
		t.Errorf("Apply calls: %v, want the failed one and one retry", sizes)
	}
	failed := evs.of(telemetry.CommitFailed)
	if len(failed) != 1 || failed[0].Count != 1 || !errors.Is(failed[0].Err, errLost) {
		t.Errorf("CommitFailed events: %+v, want one for a batch of 1 with the store's error", failed)
	}
	page, err := st.ListRuns(ctx, &store.ListRunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 || page.Runs[0].ID != "r1" {
		t.Errorf("runs stored: %+v, want exactly r1", page.Runs)
	}
}

// A store that keeps failing is retried a bounded number of times, then
// the error reaches the caller and the standing claims of the batch;
// AfterCommit is not called for a batch that did not commit.
func TestRetryGivesUp(t *testing.T) {
	ctx := t.Context()
	errDown := errors.New("database down")
	st := &hookedStore{Store: openStore(t)}
	st.onApply = func(int, *store.ApplyParams, func() (*store.ApplyResult, error)) (*store.ApplyResult, error) {
		return nil, errDown
	}
	fc := clock.NewFake(t0)
	hub := telemetry.New(fc)
	evs := record(t, hub)
	var after commits
	c := newCommitter(t, commit.Config{Store: st, Clock: fc, Telemetry: hub, AfterCommit: after.hook})

	// Move the fake clock through the committer's backoffs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if fc.Waiters() > 0 {
				fc.Advance(time.Hour)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	cr := c.Claim("q", 1, false) // rides in the failing batch
	r, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)})
	if !errors.Is(err, errDown) || r == nil || !errors.Is(r.Err, errDown) {
		t.Fatalf("Submit against a failing store: %v (request %+v), want the store's error", err, r)
	}
	awaitDone(t, cr.Done(), "the claim of the failed batch")
	if !errors.Is(cr.Err, errDown) || len(cr.Tasks) != 0 {
		t.Errorf("claim of the failed batch: err %v, tasks %v", cr.Err, cr.Tasks)
	}
	calls := len(st.applySizes())
	if calls < 2 {
		t.Errorf("Apply called %d times: not retried", calls)
	}
	if failed := evs.of(telemetry.CommitFailed); len(failed) != calls-1 {
		t.Errorf("%d CommitFailed events for %d Apply calls, want one per retry", len(failed), calls)
	}
	after.mu.Lock()
	if len(after.batches) != 0 {
		t.Errorf("AfterCommit called %d times for a batch that failed", len(after.batches))
	}
	after.mu.Unlock()
	if _, err := st.GetRun(ctx, "r1"); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("GetRun: %v, want ErrRunNotFound", err)
	}
}

// A closed store is not retried: its error goes to the caller at once.
func TestStoreClosedIsNotRetried(t *testing.T) {
	st := &hookedStore{Store: openStore(t)}
	st.onApply = func(int, *store.ApplyParams, func() (*store.ApplyResult, error)) (*store.ApplyResult, error) {
		return nil, fmt.Errorf("apply: %w", store.ErrClosed)
	}
	hub := telemetry.New(nil)
	evs := record(t, hub)
	c := newCommitter(t, commit.Config{Store: st, Telemetry: hub})

	_, err := c.Submit(t.Context(), store.Change{Create: newRun("r1", hephtype.StatusRunning)})
	if !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Submit on a closed store: %v, want store.ErrClosed", err)
	}
	if sizes := st.applySizes(); len(sizes) != 1 {
		t.Errorf("Apply calls: %v, want one", sizes)
	}
	if failed := evs.of(telemetry.CommitFailed); len(failed) != 0 {
		t.Errorf("CommitFailed events: %+v, want none", failed)
	}
}

// Claim(now) runs a transaction at once that leases the ready tasks of the
// queue that this process can run (Config.Handlers, or no handler) to
// Config.WorkerID for LeaseDuration; the leases are real.
func TestClaimLeasesReadyTasks(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	fc := clock.NewFake(t0)
	c := newCommitter(t, commit.Config{
		Store: st, Clock: fc, WorkerID: "w1", LeaseDuration: time.Minute,
		Handlers: func() []string { return []string{"h"} },
	})
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning,
		readyTask("q", "mine", "h", 0), readyTask("q", "anyone", "", 0),
		readyTask("q", "foreign", "x", 0), readyTask("other", "elsewhere", "h", 0))}); err != nil {
		t.Fatal(err)
	}

	cr := c.Claim("q", 10, true)
	awaitDone(t, cr.Done(), "the claim")
	if cr.Err != nil {
		t.Fatalf("claim: %v", cr.Err)
	}
	if got, want := steps(cr.Tasks), []string{"anyone", "mine"}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for _, tk := range cr.Tasks {
		if tk.RunID != "r1" || tk.Queue != "q" || tk.Owner != "w1" || !tk.LeaseUntil.Equal(t0.Add(time.Minute)) {
			t.Errorf("claimed task %s: run %s queue %s owner %q lease until %v", tk.Step, tk.RunID, tk.Queue, tk.Owner, tk.LeaseUntil)
		}
	}
	// Another worker finds only what the claim left.
	rest, err := st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q"}, Owner: "w2", Limit: 10, LeaseFor: time.Minute, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if got := steps(rest); !slices.Equal(got, []string{"foreign"}) {
		t.Errorf("left for another worker: %v, want [foreign]", got)
	}
}

// A standing claim (now=false) that no transaction has taken can be
// withdrawn: Withdraw returns true, the claim is never served and later
// commits do not lease tasks for it.
func TestWithdrawUntakenClaim(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	fc := clock.NewFake(t0)
	c := newCommitter(t, commit.Config{Store: st, Clock: fc})

	cr := c.Claim("q", 1, false)
	if !c.Withdraw(cr) {
		t.Fatal("Withdraw of a standing claim that no transaction took: false")
	}
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning, readyTask("q", "s", "", 0))}); err != nil {
		t.Fatal(err)
	}
	if isClosed(cr.Done()) {
		t.Errorf("a withdrawn claim was served: tasks %v, err %v", cr.Tasks, cr.Err)
	}
	left, err := st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q"}, Owner: "w2", Limit: 10, LeaseFor: time.Minute, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 {
		t.Errorf("tasks left after a withdrawn claim: %v, want the one created", steps(left))
	}
}

// A standing claim rides in the next transaction: it leases the task that
// the same transaction's change created, after which Withdraw returns
// false, and AfterCommit is told the task was claimed.
func TestStandingClaimRidesInNextCommit(t *testing.T) {
	ctx := t.Context()
	fc := clock.NewFake(t0)
	var after commits
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc, WorkerID: "w1", AfterCommit: after.hook})

	cr := c.Claim("q", 5, false)
	r, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning, readyTask("q", "s", "", 0))})
	if err != nil {
		t.Fatal(err)
	}
	awaitDone(t, cr.Done(), "the standing claim")
	if cr.Err != nil || len(cr.Tasks) != 1 || cr.Tasks[0].RunID != "r1" || cr.Tasks[0].Owner != "w1" {
		t.Fatalf("standing claim: err %v, tasks %+v", cr.Err, cr.Tasks)
	}
	if len(r.Res.Tasks) != 1 || r.Res.Tasks[0].ID != cr.Tasks[0].ID {
		t.Errorf("created tasks %+v, claimed %+v: want the same task", r.Res.Tasks, cr.Tasks)
	}
	if c.Withdraw(cr) {
		t.Error("Withdraw of a claim a transaction served: true")
	}
	if !after.sawClaimed(cr.Tasks[0].ID) {
		t.Error("AfterCommit was not told the task was claimed")
	}
}

// A hand-off claims a task of its queue in the transaction of its change,
// into Request.Claimed, leased to WorkerID; AfterCommit is told.
func TestHandoffClaimsIntoRequest(t *testing.T) {
	ctx := t.Context()
	fc := clock.NewFake(t0)
	var after commits
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc, WorkerID: "w1", LeaseDuration: time.Minute, AfterCommit: after.hook})

	r, err := c.SubmitHandoff(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning, readyTask("q", "next", "", 0))}, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Claimed) != 1 {
		t.Fatalf("hand-off claimed %+v, want the created task", r.Claimed)
	}
	tk := r.Claimed[0]
	if tk.RunID != "r1" || tk.Step != "next" || tk.Owner != "w1" || !tk.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Errorf("hand-off task: %+v", tk)
	}
	if len(r.Res.Tasks) != 1 || r.Res.Tasks[0].ID != tk.ID {
		t.Errorf("created tasks %+v, want the claimed one", r.Res.Tasks)
	}
	if !after.sawClaimed(tk.ID) {
		t.Error("AfterCommit was not told the hand-off's task was claimed")
	}
}

// A hand-off and a standing claim of the same queue share one claim:
// the hand-off takes the first (highest-priority) task, the standing claim
// the rest.
func TestHandoffBeforeStandingClaim(t *testing.T) {
	ctx := t.Context()
	fc := clock.NewFake(t0)
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc})

	cr := c.Claim("q", 5, false)
	r, err := c.SubmitHandoff(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning,
		readyTask("q", "low", "", 1), readyTask("q", "high", "", 3), readyTask("q", "mid", "", 2))}, "q")
	if err != nil {
		t.Fatal(err)
	}
	if got := steps(r.Claimed); !slices.Equal(got, []string{"high"}) {
		t.Errorf("hand-off claimed %v, want [high]", got)
	}
	awaitDone(t, cr.Done(), "the standing claim")
	if got := steps(cr.Tasks); cr.Err != nil || !slices.Equal(got, []string{"low", "mid"}) {
		t.Errorf("standing claim: err %v, tasks %v; want [low mid]", cr.Err, got)
	}
}

// AfterCommit is called with the committed batch (the caller's own
// Request) and the transaction's time, before the caller is told.
func TestAfterCommitSeesBatch(t *testing.T) {
	fc := clock.NewFake(t0)
	var after commits
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc, AfterCommit: after.hook})

	r, err := c.Submit(t.Context(), store.Change{Create: newRun("r1", hephtype.StatusRunning)})
	if err != nil {
		t.Fatal(err)
	}
	after.mu.Lock()
	defer after.mu.Unlock()
	if len(after.batches) != 1 || !slices.Contains(after.batches[0], r) {
		t.Fatalf("AfterCommit batches %v, want one holding the caller's request", after.batches)
	}
	if !after.nows[0].Equal(t0) {
		t.Errorf("AfterCommit now %v, want the clock's %v", after.nows[0], t0)
	}
}

// WaitRun returns as soon as a commit of this committer ends the run: the
// fake clock never moves, so the store is not polled again.
func TestWaitRunWokenByCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	fc := clock.NewFake(t0)
	hub := telemetry.New(fc)
	evs := record(t, hub)
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc, Telemetry: hub})
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)}); err != nil {
		t.Fatal(err)
	}

	type result struct {
		run *store.Run
		err error
	}
	got := make(chan result, 1)
	go func() {
		run, err := c.WaitRun(ctx, "r1", time.Hour)
		got <- result{run, err}
	}()
	// WaitRun has read the run (still running) and sleeps on the clock.
	waitFor(t, "WaitRun to wait", func() bool { return commit.Waiting(c, "r1") == 1 && fc.Waiters() == 1 })

	if _, err := c.Submit(ctx, store.Change{RunID: "r1", Decide: complete}); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil || res.run == nil || res.run.ID != "r1" || res.run.Status != hephtype.StatusCompleted {
		t.Fatalf("WaitRun: %+v, %v; want r1 completed", res.run, res.err)
	}
	if n := commit.Waiting(c, "r1"); n != 0 {
		t.Errorf("%d waiters left after WaitRun returned", n)
	}
	if ended := evs.of(telemetry.RunCompleted); len(ended) != 1 || ended[0].RunID != "r1" || ended[0].Workflow != "wf" {
		t.Errorf("RunCompleted events: %+v", ended)
	}
}

// A Create with a terminal status ends its run: a RunCompleted event is
// emitted, and WaitRun returns the run at once, without waiting on the
// clock.
func TestWaitRunReturnsTerminalRunAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	fc := clock.NewFake(t0)
	hub := telemetry.New(fc)
	evs := record(t, hub)
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc, Telemetry: hub})

	nr := newRun("r1", hephtype.StatusCompleted)
	nr.Output = json.RawMessage(`"done"`)
	if _, err := c.Submit(ctx, store.Change{Create: nr}); err != nil {
		t.Fatal(err)
	}
	if ended := evs.of(telemetry.RunCompleted); len(ended) != 1 || ended[0].RunID != "r1" {
		t.Errorf("RunCompleted events after a terminal create: %+v", ended)
	}
	run, err := c.WaitRun(ctx, "r1", time.Hour)
	if err != nil || run.Status != hephtype.StatusCompleted || string(run.Output) != `"done"` {
		t.Fatalf("WaitRun of a completed run: %+v, %v", run, err)
	}
	if n := fc.Waiters(); n != 0 {
		t.Errorf("WaitRun of a completed run waited on the clock (%d waiters)", n)
	}
	if _, err := c.WaitRun(ctx, "nope", time.Hour); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("WaitRun of an unknown run: %v, want ErrRunNotFound", err)
	}
}

// WaitRun returns the context's error when its context ends first, and
// leaves no waiter behind.
func TestWaitRunContextCancel(t *testing.T) {
	fc := clock.NewFake(t0)
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: fc})
	if _, err := c.Submit(t.Context(), store.Change{Create: newRun("r1", hephtype.StatusRunning)}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		run, err := c.WaitRun(ctx, "r1", time.Hour)
		if run != nil {
			err = fmt.Errorf("returned run %+v with %w", run, err)
		}
		errc <- err
	}()
	waitFor(t, "WaitRun to wait", func() bool { return fc.Waiters() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitRun after cancel: %v, want context.Canceled", err)
	}
	if n := commit.Waiting(c, "r1"); n != 0 {
		t.Errorf("%d waiters left after WaitRun returned", n)
	}
}

// Decide receives the run as stored; the Update it returns is written and
// recorded in Request.Update. A Decide error refuses the change: it is the
// caller's error and nothing is written.
func TestDecideUpdateRecorded(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	c := newCommitter(t, commit.Config{Store: st})
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)}); err != nil {
		t.Fatal(err)
	}

	want := &store.Update{Status: hephtype.StatusWaiting, State: json.RawMessage(`{"at":"b"}`)}
	var seen *store.Run
	r, err := c.Submit(ctx, store.Change{RunID: "r1", Decide: func(run *store.Run) (*store.Update, error) {
		seen = run
		return want, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if seen == nil || seen.ID != "r1" || seen.Status != hephtype.StatusRunning {
		t.Errorf("Decide saw %+v, want r1 running", seen)
	}
	if r.Update != want {
		t.Errorf("Request.Update = %+v, want Decide's %+v", r.Update, want)
	}
	if r.Res.Run == nil || r.Res.Run.Status != hephtype.StatusWaiting {
		t.Errorf("result run %+v, want waiting", r.Res.Run)
	}

	errRefuse := errors.New("refused")
	r, err = c.Submit(ctx, store.Change{RunID: "r1", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{Status: hephtype.StatusFailed}, errRefuse
	}})
	if !errors.Is(err, errRefuse) || r == nil || !errors.Is(r.Err, errRefuse) {
		t.Fatalf("Submit of a refused change: %v (request %+v), want Decide's error", err, r)
	}
	if got, err := st.GetRun(ctx, "r1"); err != nil || got.Status != hephtype.StatusWaiting {
		t.Errorf("run after a refused change: %+v, %v; want still waiting", got, err)
	}
}

// A change applied to a run that had already ended (its Update does not
// end it) is stale: it emits no second end event.
func TestStaleChangeOfEndedRunEmitsNoEndEvent(t *testing.T) {
	ctx := t.Context()
	hub := telemetry.New(nil)
	evs := record(t, hub)
	c := newCommitter(t, commit.Config{Store: openStore(t), Telemetry: hub})
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, store.Change{RunID: "r1", Decide: complete}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Submit(ctx, store.Change{RunID: "r1", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventSignalReceived, Name: "late"}}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Res.Run == nil || !r.Res.Run.Status.Terminal() {
		t.Fatalf("stale change's run: %+v, want the ended run", r.Res.Run)
	}
	if ended := evs.of(telemetry.RunCompleted); len(ended) != 1 {
		t.Errorf("%d RunCompleted events, want one (the stale change must not end the run again)", len(ended))
	}
}

// countingStore counts the reads of runs, to tell whether a wait read the
// run.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) GetRun(ctx context.Context, id string) (*store.Run, error) {
	s.reads.Add(1)
	return s.Store.GetRun(ctx, id)
}

// WaitStarted waits for a run this process has just created without
// reading it first, is woken by the commit that ends it, and still
// returns a run that a commit ended before it was called (by reading it
// then).
func TestWaitStarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	fc := clock.NewFake(t0)
	st := &countingStore{Store: openStore(t)}
	c := newCommitter(t, commit.Config{Store: st, Clock: fc})
	for _, id := range []string{"r1", "r2"} {
		if _, err := c.Submit(ctx, store.Change{Create: newRun(id, hephtype.StatusRunning)}); err != nil {
			t.Fatal(err)
		}
	}

	got := make(chan error, 1)
	go func() {
		run, err := c.WaitStarted(ctx, "r1", time.Hour)
		if err == nil && run.Status != hephtype.StatusCompleted {
			err = fmt.Errorf("status %s", run.Status)
		}
		got <- err
	}()
	waitFor(t, "WaitStarted to wait", func() bool { return commit.Waiting(c, "r1") == 1 && fc.Waiters() == 1 })
	if n := st.reads.Load(); n != 0 {
		t.Errorf("WaitStarted read the run %d times before waiting, want 0", n)
	}
	if _, err := c.Submit(ctx, store.Change{RunID: "r1", Decide: complete}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("WaitStarted(r1): %v", err)
	}

	// r2 ends before its caller waits: the wait reads it at once. (The
	// first wait's timer stays with the fake clock.)
	timers := fc.Waiters()
	if _, err := c.Submit(ctx, store.Change{RunID: "r2", Decide: complete}); err != nil {
		t.Fatal(err)
	}
	run, err := c.WaitStarted(ctx, "r2", time.Hour)
	if err != nil || run.Status != hephtype.StatusCompleted {
		t.Fatalf("WaitStarted of a run ended before the call: %+v, %v", run, err)
	}
	if n := fc.Waiters(); n != timers {
		t.Errorf("WaitStarted of an ended run waited on the clock (%d waiters, %d before)", n, timers)
	}
}
