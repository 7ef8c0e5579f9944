package e2e

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// pauseTests are the tests of Client.PauseRun and UnpauseRun (in
// RunRootAPI).
var pauseTests = []subtest{
	{"PauseRunningAndTimer", testPauseRunningAndTimer},
	{"PauseCancelRunning", testPauseCancelRunning},
	{"PauseFinished", testPauseFinished},
	{"PauseWorkflowSignals", testPauseWorkflowSignals},
	{"PauseJobAndDocument", testPauseJobAndDocument},
}

// heldFlow is hold -> after: hold signals started, then waits for
// release (or its context's end: it then signals stopped, without
// blocking, and fails with the cause); both count their calls.
func heldFlow(name string, started, stopped chan<- struct{}, release <-chan struct{}, calls *[2]atomic.Int32) *flow.Flow {
	fb := flow.New(name)
	flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
		calls[0].Add(1)
		started <- struct{}{}
		select {
		case <-release:
			return "held", nil
		case <-ctx.Done():
			select {
			case stopped <- struct{}{}:
			default:
			}
			return "", context.Cause(ctx)
		}
	}, flow.Timeout(time.Hour))
	flow.Step(fb, "after", func(ctx context.Context, in any) (string, error) {
		calls[1].Add(1)
		return "after", nil
	}, flow.DependsOn("hold"))
	return fb.MustBuild()
}

// probeClaim claims what is claimable on the default queue at now, as
// a worker would, and hands it back: the tasks of paused runs must not be
// among them.
func (e *env) probeClaim(now time.Time) []*store.Task {
	e.t.Helper()
	ctx := ctxT(e.t)
	ts, err := e.st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"default"}, Owner: "probe", Limit: 100, LeaseFor: time.Minute, Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(ts) > 0 {
		ls := make([]store.Lease, len(ts))
		for i, t := range ts {
			ls[i] = store.Lease{TaskID: t.ID, Token: t.Token}
		}
		if err := e.st.ReleaseTasks(ctx, ls); err != nil {
			e.t.Fatal(err)
		}
	}
	return ts
}

// testPauseRunningAndTimer: a run paused while its step runs keeps that
// step's result but runs nothing after it; a run paused while it waits
// keeps its timer past the due time; an event sent meanwhile is
// accepted. After unpause, each step has run once and the timer fired.
func testPauseRunningAndTimer(t *testing.T, b Backend) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	var calls [2]atomic.Int32
	start := time.Date(2031, 3, 4, 5, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	e.c = startClient(t, st, func(c *heph.Config) { c.Clock = fc },
		heldFlow("held", started, make(chan struct{}, 1), release, &calls), approvalFlow("expiring", time.Minute), approvalFlow("approval", 0))
	ctx := ctxT(t)

	held, err := e.c.StartRun(ctx, "held", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	waiting, err := e.c.StartRun(ctx, "expiring", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(waiting.ID, heph.StatusWaiting)
	approval, err := e.c.StartRun(ctx, "approval", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(approval.ID, heph.StatusWaiting)

	for _, id := range []string{held.ID, waiting.ID, approval.ID} {
		if err := e.c.PauseRun(ctx, id, &heph.PauseOptions{By: "alice"}); err != nil {
			t.Fatal(err)
		}
		// A second pause changes nothing and succeeds.
		if err := e.c.PauseRun(ctx, id, &heph.PauseOptions{By: "bob"}); err != nil {
			t.Fatalf("second pause: %v", err)
		}
		r, err := e.c.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Condition.Code != heph.ConditionPaused || r.Condition.Message != "paused by alice" || !r.Condition.Since.Equal(start) {
			t.Fatalf("run %s: condition %+v, want paused by alice at %v", id, r.Condition, start)
		}
	}
	// The running step finishes: its commit is accepted, and nothing
	// after it is claimed.
	once.Do(func() { close(release) })
	for {
		if h := e.history(held.ID); count(h, hephtype.EventStepCompleted, "hold") == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the running step's commit never came")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The timer comes due; an event is sent to the other waiting run.
	fc.Advance(2 * time.Minute)
	if err := e.c.ResumeRun(ctx, approval.ID, "approved", &heph.ResumeOptions{Payload: map[string]string{"by": "carol"}}); err != nil {
		t.Fatalf("event to a paused run: %v", err)
	}
	if ts := e.probeClaim(fc.Now()); len(ts) != 0 {
		t.Fatalf("claimable while paused: %d tasks, of run %s (%s %s)", len(ts), ts[0].RunID, ts[0].Kind, ts[0].Step)
	}
	if calls[1].Load() != 0 {
		t.Fatal("the step after the paused one ran")
	}
	if r, err := e.c.GetRun(ctx, waiting.ID); err != nil || r.Status != heph.StatusWaiting {
		t.Fatalf("paused waiting run: %+v, %v", r, err)
	}

	for _, id := range []string{held.ID, waiting.ID, approval.ID} {
		if err := e.c.UnpauseRun(ctx, id, &heph.UnpauseOptions{By: "dave"}); err != nil {
			t.Fatal(err)
		}
		// A second unpause writes nothing; the run may have finished in
		// between (the first unpause let it go on), and is then refused
		// as finished.
		if err := e.c.UnpauseRun(ctx, id, nil); err != nil && !errors.Is(err, heph.ErrRunFinished) {
			t.Fatalf("second unpause: %v", err)
		}
	}
	got := e.waitStatus(held.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"after":"after"}`)
	if got.Condition.Code != "" {
		t.Errorf("condition after unpause: %+v", got.Condition)
	}
	if a, b := calls[0].Load(), calls[1].Load(); a != 1 || b != 1 {
		t.Errorf("hold ran %d times, after %d; want once each", a, b)
	}
	exp := e.waitStatus(waiting.ID, heph.StatusCompleted)
	wantJSON(t, exp.Output, `{"expire":"expired"}`)
	appr := e.waitStatus(approval.ID, heph.StatusCompleted)
	wantJSON(t, appr.Output, `{"publish":"published by carol"}`)

	e.checkPauseHistory(held.ID, waiting.ID, approval.ID)
}

// checkPauseHistory: each run was paused once by alice and unpaused once
// by dave; the held run's step completed while paused and the next one
// ran after the unpause.
func (e *env) checkPauseHistory(held, waiting, approval string) {
	t := e.t
	t.Helper()
	for _, id := range []string{held, waiting, approval} {
		h := e.history(id)
		if count(h, hephtype.EventRunPaused, "") != 1 || count(h, hephtype.EventRunUnpaused, "") != 1 {
			t.Fatalf("run %s history %v: want one run_paused and one run_unpaused", id, kinds(h))
		}
		for _, ev := range h {
			switch ev.Kind {
			case hephtype.EventRunPaused:
				if ev.Name != "alice" {
					t.Errorf("run_paused by %q, want alice", ev.Name)
				}
			case hephtype.EventRunUnpaused:
				if ev.Name != "dave" {
					t.Errorf("run_unpaused by %q, want dave", ev.Name)
				}
			}
		}
	}
	// The held run: its step completed while paused, the next one ran
	// after the unpause.
	h := kinds(e.history(held))
	p, c, u := slices.Index(h, string(hephtype.EventRunPaused)), slices.Index(h, string(hephtype.EventStepCompleted)), slices.Index(h, string(hephtype.EventRunUnpaused))
	if p >= c || c >= u || count(e.history(held), hephtype.EventStepStarted, "after") != 1 {
		t.Errorf("held run history %v", h)
	}
}

// testPauseCancelRunning: a pause that cancels what runs stops the
// running step (its commit is refused); the step runs again after the
// unpause, and the run completes.
func testPauseCancelRunning(t *testing.T, b Backend) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	var calls [2]atomic.Int32
	stopped := make(chan struct{}, 1)
	e := newEnv(t, b, nil, heldFlow("held", started, stopped, release, &calls))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "held", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := e.c.PauseRun(ctx, r.ID, &heph.PauseOptions{CancelRunning: true, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Condition.Code != heph.ConditionPaused || got.Condition.Message != "paused by alice (running tasks cancelled)" {
		t.Fatalf("condition %+v", got.Condition)
	}
	// The running step is stopped (its context ends); its task is not
	// claimable while the run is paused, even once any lease would have
	// ended.
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the running step never stopped")
	}
	if ts := e.probeClaim(time.Now().Add(24 * time.Hour)); len(ts) != 0 {
		t.Fatalf("claimable while paused: %d tasks", len(ts))
	}
	close(release)
	if err := e.c.UnpauseRun(ctx, r.ID, &heph.UnpauseOptions{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"after":"after"}`)
	if a, b := calls[0].Load(), calls[1].Load(); a != 2 || b != 1 {
		t.Errorf("hold ran %d times, after %d; want hold twice (cancelled once), after once", a, b)
	}
	h := e.history(r.ID)
	if count(h, hephtype.EventStepFailed, "hold") != 0 || count(h, hephtype.EventStepCompleted, "hold") != 1 {
		t.Errorf("history %v: the cancelled attempt left a trace", kinds(h))
	}
	for _, ev := range h {
		if ev.Kind == hephtype.EventRunPaused && string(ev.Data) != `{"cancel_running":true}` {
			t.Errorf("run_paused data %s", ev.Data)
		}
	}
}

// testPauseFinished: a finished run is refused with ErrRunFinished; a
// run that does not exist with ErrRunNotFound.
func testPauseFinished(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, deleteEchoFlow("echo"))
	ctx := ctxT(t)
	r := e.run("echo", "hi", nil)
	if err := e.c.PauseRun(ctx, r.ID, nil); !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("pause of a finished run: %v, want ErrRunFinished", err)
	}
	if err := e.c.UnpauseRun(ctx, r.ID, nil); !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("unpause of a finished run: %v, want ErrRunFinished", err)
	}
	if err := e.c.PauseRun(ctx, "no-such-run", nil); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("pause of a missing run: %v, want ErrRunNotFound", err)
	}
	if h := e.history(r.ID); count(h, hephtype.EventRunPaused, "") != 0 {
		t.Fatalf("history %v", kinds(h))
	}
}

// testPauseWorkflowSignals: a code-first workflow paused while its
// activity runs: the activity's result is kept, the signals sent
// meanwhile are recorded and no decision is taken on them until the
// unpause; then the workflow handles them all (replaying a history that
// holds run_paused and run_unpaused) and completes, the activity having
// run once.
func testPauseWorkflowSignals(t *testing.T, b Backend) {
	g := newGate()
	wf, slow := signalWorkflow(g)
	e := newWfEnv(t, b, nil, wfs(wf), slow)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the activity to run", func() bool { return g.waiting.Load() == 1 })
	if err := e.c.PauseRun(ctx, r.ID, &heph.PauseOptions{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	g.open()
	for i, s := range []struct {
		name string
		v    int
	}{{"x", 1}, {"x", 2}, {"x", 3}, {"y", 4}} {
		if err := r.Signal(ctx, s.name, s.v); err != nil {
			t.Fatalf("signal %d to a paused workflow: %v", i, err)
		}
	}
	waitFor(t, "the activity's result", func() bool {
		return count(e.history(r.ID), hephtype.EventStepCompleted, "") == 1
	})
	h := e.history(r.ID)
	paused := slices.IndexFunc(h, func(ev heph.HistoryEvent) bool { return ev.Kind == hephtype.EventRunPaused })
	if n := count(h[paused:], hephtype.EventSignalReceived, ""); n != 4 {
		t.Fatalf("signals recorded while paused: %d, want 4 (%v)", n, kinds(h))
	}
	if n := count(h[paused:], hephtype.EventDecision, ""); n != 0 {
		t.Fatalf("decisions while paused: %d (%v)", n, kinds(h))
	}
	if ts := e.probeClaim(time.Now().Add(time.Hour)); len(ts) != 0 {
		t.Fatalf("claimable while paused: %d tasks (%s)", len(ts), ts[0].Kind)
	}
	if err := e.c.UnpauseRun(ctx, r.ID, &heph.UnpauseOptions{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []int{1, 2, 3, 4}) {
		t.Fatalf("output %v, want [1 2 3 4]", out)
	}
	h = e.history(r.ID)
	if count(h, hephtype.EventStepCompleted, "") != 1 || count(h, hephtype.EventRunPaused, "") != 1 || count(h, hephtype.EventRunUnpaused, "") != 1 {
		t.Fatalf("history %v", kinds(h))
	}
}
