package e2e

// Versioning, non-determinism, children, cancellation, timers, retries,
// the sticky cache, history export, and decisions in several clients.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// greeter returns a workflow that waits for a name, makes a greeting the
// old way or (patched) the new way, then waits for "go".
func greeter(patched bool) *workflow.Definition[struct{}, string] {
	return workflow.New("greeter", func(ctx workflow.Context, _ struct{}) (string, error) {
		name, err := workflow.WaitSignal[string](ctx, "name")
		if err != nil {
			return "", err
		}
		greeting := "hi " + name
		if patched && workflow.Patched(ctx, "formal-greeting") {
			greeting = "Good day, " + name + "."
		}
		if _, err := workflow.WaitSignal[struct{}](ctx, "go"); err != nil {
			return "", err
		}
		return greeting, nil
	})
}

func testWfPatched(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(greeter(false)))
	ctx := ctxT(t)
	old, err := heph.StartWorkflow(ctx, e.c, greeter(false), struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The old run passes the changed code before the deploy...
	if err := old.Signal(ctx, "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old run to take its name", func() bool {
		h := e.history(old.ID)
		return len(h) >= 4 && h[2].Kind == hephtype.EventSignalReceived && h[3].Kind == hephtype.EventDecision
	})
	// ...the patched code is deployed (every cached instance is dropped,
	// so the old run replays its history with the new code)...
	if err := e.c.RegisterWorkflows(greeter(true)); err != nil {
		t.Fatal(err)
	}
	// ...and a new run reaches it with the new code.
	fresh, err := heph.StartWorkflow(ctx, e.c, greeter(true), struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Signal(ctx, "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*heph.WorkflowRun[string]{old, fresh} {
		if err := r.Signal(ctx, "go", nil); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := old.Get(ctx); err != nil || got != "hi Ada" {
		t.Fatalf("old run: %q, %v", got, err)
	}
	if got, err := fresh.Get(ctx); err != nil || got != "Good day, Ada." {
		t.Fatalf("new run: %q, %v", got, err)
	}
	if n := count(e.history(old.ID), hephtype.EventMarker, ""); n != 0 {
		t.Fatalf("the old run has %d markers", n)
	}
	if n := count(e.history(fresh.ID), hephtype.EventMarker, ""); n != 1 {
		t.Fatalf("the new run has %d markers, want 1", n)
	}
	// Both histories replay with the patched code.
	for _, id := range []string{old.ID, fresh.ID} {
		x, err := e.c.ExportHistory(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := hephtest.ReplayHistory(x, greeter(true)); err != nil {
			t.Fatalf("run %s with the patched code: %v", id, err)
		}
	}
}

// ndeWorkflow is the workflow of the non-determinism test: first (an
// activity) then, after a signal, second. The broken version calls other
// first.
func ndeWorkflow(broken bool) (*workflow.Definition[struct{}, string], []heph.Activity) {
	first := workflow.NewActivity("first", func(ctx context.Context, _ struct{}) (string, error) { return "1", nil })
	other := workflow.NewActivity("other", func(ctx context.Context, _ struct{}) (string, error) { return "o", nil })
	second := workflow.NewActivity("second", func(ctx context.Context, _ struct{}) (string, error) { return "2", nil })
	wf := workflow.New("nde", func(ctx workflow.Context, _ struct{}) (string, error) {
		act := first
		if broken {
			act = other
		}
		a, err := act.Execute(ctx, struct{}{})
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[struct{}](ctx, "go"); err != nil {
			return "", err
		}
		b, err := second.Execute(ctx, struct{}{})
		return a + b, err
	})
	return wf, []heph.Activity{first, other, second}
}

func testWfNonDeterminism(t *testing.T, b Backend) {
	ctx := ctxT(t)
	fast := func(c *heph.Config) { c.DecisionRetryBackoff = 20 * time.Millisecond }
	good, acts := ndeWorkflow(false)
	e := newWfEnv(t, b, fast, wfs(good), acts...)
	r, err := heph.StartWorkflow(ctx, e.c, good, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	if err := e.c.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// A deploy changes the workflow incompatibly.
	broken, acts := ndeWorkflow(true)
	failures := make(chan heph.Event, 16)
	c2 := startWfClient(t, e.st, func(c *heph.Config) {
		fast(c)
	}, wfs(broken), acts...)
	unsub := c2.Subscribe(func(ev heph.Event) {
		if ev.Kind == heph.DecisionFailed {
			select {
			case failures <- ev:
			default:
			}
		}
	})
	defer unsub()
	if err := c2.SignalWorkflow(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	var ev heph.Event
	select {
	case ev = <-failures:
	case <-ctx.Done():
		t.Fatal("no decision.failed event")
	}
	var nde *heph.NonDeterminismError
	if !errors.As(ev.Err, &nde) {
		t.Fatalf("decision failed with %v, want a *NonDeterminismError", ev.Err)
	}
	if nde.RecordedKind != hephtype.EventStepScheduled || nde.Recorded != `step_scheduled #1 "first"` || nde.Entry == 0 {
		t.Fatalf("recorded entry %d %s %q, want step_scheduled #1 \"first\"", nde.Entry, nde.RecordedKind, nde.Recorded)
	}
	if !strings.Contains(nde.Command, `Execute activity "other"`) {
		t.Fatalf("command %q, want Execute activity \"other\"", nde.Command)
	}
	if nde.Changed != "activity name" || nde.Old != `"first"` || nde.New != `"other"` {
		t.Fatalf("changed %s from %s to %s, want the activity name from \"first\" to \"other\"", nde.Changed, nde.Old, nde.New)
	}
	// Both sides are located: the new call, and the recorded one (the
	// history records where each activity was called).
	if !strings.Contains(nde.CommandAt, "workflow_runtime.go:") || !strings.HasPrefix(nde.RecordedAt, "e2e/workflow_runtime.go:") {
		t.Fatalf("located at %q (recorded at %q), want this file for both", nde.CommandAt, nde.RecordedAt)
	}
	if nde.RunID != r.ID || nde.Decision == 0 || !strings.Contains(nde.Hint, "workflow.Patched") {
		t.Fatalf("error fields %+v", nde)
	}
	for _, s := range []string{`step_scheduled #1 "first"`, `Execute activity "other"`, "workflow_runtime.go:", "workflow.Patched", "decision "} {
		if !strings.Contains(nde.Error(), s) {
			t.Errorf("error %q does not mention %q", nde.Error(), s)
		}
	}
	// Retried with backoff, not lost.
	for range 2 {
		select {
		case ev = <-failures:
		case <-ctx.Done():
			t.Fatal("the decision was not retried")
		}
	}
	run, err := e.c.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status.Terminal() {
		t.Fatalf("the run is %s", run.Status)
	}
	// The run shows why it does not progress, with the last error.
	if run.Condition.Code != heph.ConditionDecisionFailing || !strings.Contains(run.Condition.Message, `Execute activity "other"`) || run.Condition.Since.IsZero() {
		t.Fatalf("condition %+v, want decision_failing with the non-determinism", run.Condition)
	}
	if err := c2.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// The fix is deployed: the run goes on from where it was.
	fixed, acts := ndeWorkflow(false)
	c3 := startWfClient(t, e.st, fast, wfs(fixed), acts...)
	out, err := heph.GetWorkflow(c3, fixed, r.ID).Get(ctx)
	if err != nil || out != "12" {
		t.Fatalf("output %q, %v; want 12", out, err)
	}
	if run, err := c3.GetRun(ctx, r.ID); err != nil || !run.Condition.IsZero() {
		t.Fatalf("condition after the fix: %+v, %v; want none", run.Condition, err)
	}
}

type parentResult struct {
	Child  string
	Failed string
}

func childWorkflows() (*workflow.Definition[string, parentResult], *workflow.Definition[string, string]) {
	child := workflow.New("child", func(ctx workflow.Context, in string) (string, error) {
		if in == "fail" {
			return "", errors.New("child says no")
		}
		if err := workflow.Sleep(ctx, 10*time.Millisecond); err != nil {
			return "", err
		}
		return "child:" + in, nil
	})
	parent := workflow.New("parent", func(ctx workflow.Context, in string) (parentResult, error) {
		ok := child.StartChild(ctx, in)
		bad := child.StartChild(ctx, "fail")
		out, err := ok.Get(ctx)
		if err != nil {
			return parentResult{}, err
		}
		_, err = bad.Get(ctx)
		var ce *workflow.ChildError
		if !errors.As(err, &ce) {
			return parentResult{}, fmt.Errorf("the failing child returned %v", err)
		}
		return parentResult{Child: out, Failed: ce.Message}, nil
	})
	return parent, child
}

func testWfChildren(t *testing.T, b Backend) {
	parent, child := childWorkflows()
	e := newWfEnv(t, b, nil, wfs(parent, child))
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, parent, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out != (parentResult{Child: "child:x", Failed: "child says no"}) {
		t.Fatalf("output %+v", out)
	}
	l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "child"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 2 {
		t.Fatalf("%d child runs, want 2", len(l.Runs))
	}
}

func testWfCancelChildren(t *testing.T, b Backend) {
	child := workflow.New("sleeper", func(ctx workflow.Context, _ struct{}) (string, error) {
		return "", workflow.Sleep(ctx, time.Hour)
	})
	parent := workflow.New("parent_of_sleeper", func(ctx workflow.Context, _ struct{}) (string, error) {
		return child.ExecuteChild(ctx, struct{}{})
	})
	e := newWfEnv(t, b, nil, wfs(parent, child))
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, parent, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kid *heph.Run
	waitFor(t, "the child to start", func() bool {
		l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "sleeper"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Runs) == 1 && l.Runs[0].Status == heph.StatusWaiting {
			kid = l.Runs[0]
			return true
		}
		return false
	})
	if err := r.Cancel(ctx, "enough"); err != nil {
		t.Fatal(err)
	}
	_, err = r.Get(ctx)
	var ce *heph.CanceledError
	if !errors.As(err, &ce) || ce.Reason != "enough" {
		t.Fatalf("result of the cancelled parent: %v", err)
	}
	e.waitStatus(kid.ID, heph.StatusCancelled)
	if err := r.Cancel(ctx, "again"); !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("second cancel: %v, want ErrRunFinished", err)
	}
}

func testWfCancelDuringActivity(t *testing.T, b Backend) {
	started := make(chan struct{})
	stopped := make(chan error, 1)
	long := workflow.NewActivity("long", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return "", ctx.Err()
	})
	wf := workflow.New("long_runner", func(ctx workflow.Context, _ struct{}) (string, error) {
		return long.Execute(ctx, struct{}{})
	})
	e := newWfEnv(t, b, nil, wfs(wf), long)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := r.Cancel(ctx, "stop it"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("activity context: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the activity's context was not cancelled")
	}
	e.waitStatus(r.ID, heph.StatusCancelled)
	h := e.history(r.ID)
	if last := h[len(h)-1]; last.Kind != hephtype.EventRunCancelled || last.Error != "stop it" {
		t.Fatalf("last event %+v", last)
	}
}

func testWfSleep(t *testing.T, b Backend) {
	wf := workflow.New("napper", func(ctx workflow.Context, d time.Duration) (time.Duration, error) {
		start := workflow.Now(ctx)
		if err := workflow.Sleep(ctx, d); err != nil {
			return 0, err
		}
		return workflow.Now(ctx).Sub(start), nil
	})
	e := newWfEnv(t, b, nil, wfs(wf))
	ctx := ctxT(t)
	t0 := time.Now()
	got, err := heph.ExecuteWorkflow(ctx, e.c, wf, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got < 200*time.Millisecond || time.Since(t0) < 200*time.Millisecond {
		t.Fatalf("slept %s (workflow time) in %s", got, time.Since(t0))
	}
}

func testWfActivityRetries(t *testing.T, b Backend) {
	var calls atomic.Int32
	flaky := workflow.NewActivity("flaky", func(ctx context.Context, n int) (int, error) {
		if calls.Add(1) < 3 {
			return 0, errors.New("not yet")
		}
		info, _ := workflow.GetActivityInfo(ctx)
		return n * info.Attempt, nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 5, InitialBackoff: time.Millisecond, Jitter: -1}})
	never := workflow.NewActivity("never", func(ctx context.Context, _ struct{}) (int, error) {
		return 0, errors.New("never works")
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond}})
	wf := workflow.New("retrier", func(ctx workflow.Context, n int) (string, error) {
		v, err := flaky.Execute(ctx, n)
		if err != nil {
			return "", err
		}
		_, err = never.Execute(ctx, struct{}{})
		var ae *workflow.ActivityError
		if !errors.As(err, &ae) {
			return "", fmt.Errorf("never returned %v", err)
		}
		return fmt.Sprintf("%d %s after %d", v, ae.Message, ae.Attempt), nil
	})
	e := newWfEnv(t, b, nil, wfs(wf), flaky, never)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil || out != "21 never works after 2" {
		t.Fatalf("output %q, %v", out, err)
	}
	h := e.history(r.ID)
	if n := count(h, hephtype.EventStepRetrying, ""); n != 3 {
		t.Fatalf("%d step_retrying events, want 3", n)
	}
}

func testWfHeartbeatTimeout(t *testing.T, b Backend) {
	var attempts atomic.Int32
	beat := workflow.NewActivity("beater", func(ctx context.Context, _ struct{}) (string, error) {
		if attempts.Add(1) == 1 {
			// The first attempt hangs without heartbeats.
			<-ctx.Done()
			return "", ctx.Err()
		}
		for range 5 {
			workflow.RecordHeartbeat(ctx, "alive")
			time.Sleep(20 * time.Millisecond)
		}
		return "done", nil
	}).WithOptions(workflow.ActivityOptions{
		// Far above the 20 ms between the second attempt's heartbeats, so
		// that a busy machine does not time it out too.
		HeartbeatTimeout: time.Second,
		RetryPolicy:      flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond},
	})
	wf := workflow.New("heartbeats", func(ctx workflow.Context, _ struct{}) (string, error) {
		return beat.Execute(ctx, struct{}{})
	})
	e := newWfEnv(t, b, nil, wfs(wf), beat)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Get(ctx); err != nil || out != "done" {
		t.Fatalf("output %q, %v", out, err)
	}
	h := e.history(r.ID)
	i := slices.IndexFunc(h, func(ev heph.HistoryEvent) bool { return ev.Kind == hephtype.EventStepRetrying })
	if i < 0 || !strings.Contains(h[i].Error, "no heartbeat") {
		t.Fatalf("no step_retrying for the heartbeat timeout in %v", kinds(h))
	}
}

func testWfStickyEviction(t *testing.T, b Backend) {
	// A cache of one instance among 20 concurrent runs: nearly every
	// decision replays; the results are the same.
	e := newWfEnv(t, b, func(c *heph.Config) { c.StickyCacheSize = 1 }, wfs(Onboarding, Counter), CreateAccount, SendWelcome)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() {
			out, err := heph.ExecuteWorkflow(ctx, e.c, Onboarding, OnboardingInput{UserID: fmt.Sprint("u", i)}, nil)
			if err == nil && out["account_id"] != fmt.Sprint("acct-u", i) {
				err = fmt.Errorf("output %v", out)
			}
			errs <- err
		})
		wg.Go(func() {
			r, err := heph.StartWorkflow(ctx, e.c, Counter, struct{}{}, nil)
			if err == nil {
				for _, s := range []string{"increment", "increment", "done"} {
					if err = r.Signal(ctx, s, nil); err != nil {
						break
					}
				}
			}
			if err == nil {
				var n int
				if n, err = r.Get(ctx); err == nil && n != 2 {
					err = fmt.Errorf("counter %d", n)
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func testWfExportAndReplay(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(ShoppingCart), Charge, Refund, SendReceipt)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, ShoppingCart, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heph.Update[int](ctx, e.c, r.ID, "add_item", Item{SKU: "ABC-123", Price: 30}, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Signal(ctx, "checkout", nil); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, e.c, r.ID, func(s CartStatus) bool { return s.Phase == "confirming" })
	if _, err := heph.Update[string](ctx, e.c, r.ID, "confirm", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx); err != nil {
		t.Fatal(err)
	}
	export, err := e.c.ExportHistory(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var x heph.HistoryExport
	if err := json.Unmarshal(export, &x); err != nil || x.RunID != r.ID || len(x.Events) == 0 {
		t.Fatalf("export: %v, %+v", err, x)
	}
	if err := hephtest.ReplayHistory(export, ShoppingCart); err != nil {
		t.Fatalf("the current code does not replay its own history: %v", err)
	}
	// A deliberate change: charging before the phase.
	changed := workflow.New("shopping_cart", func(ctx workflow.Context, _ struct{}) (CartResult, error) {
		total, err := Charge.Execute(ctx, nil)
		return CartResult{Total: total}, err
	})
	err = hephtest.ReplayHistory(export, changed)
	var nde *heph.NonDeterminismError
	if !errors.As(err, &nde) {
		t.Fatalf("replaying a changed workflow: %v, want a *NonDeterminismError", err)
	}
	if !strings.Contains(nde.Error(), `"payment.charge"`) {
		t.Fatalf("error %v", nde)
	}
}

// testWfOtherProcess runs a workflow whose decisions are made by a
// client other than the one that starts it and sends it messages: the
// starting client has no workers; the worker client was not told of the
// signals.
func testWfOtherProcess(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(ShoppingCart), Charge, Refund, SendReceipt)
	ctx := ctxT(t)
	front, err := heph.New(&heph.Config{Store: e.st, Queues: map[string]int{"other": 1}, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = front.Stop(ctx) }()
	if err := front.RegisterWorkflows(ShoppingCart); err != nil {
		t.Fatal(err)
	}
	r, err := heph.StartWorkflow(ctx, front, ShoppingCart, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heph.Update[int](ctx, front, r.ID, "add_item", Item{SKU: "ABC-123", Price: 30}, nil); err != nil {
		t.Fatal(err)
	}
	if err := front.SignalWorkflow(ctx, r.ID, "checkout", nil); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, front, r.ID, func(s CartStatus) bool { return s.Phase == "confirming" })
	// The worker client decided the charge; the update is decided here
	// and completed at once.
	if got, err := heph.Update[string](ctx, front, r.ID, "confirm", nil, nil); err != nil || got != "ok" {
		t.Fatalf("confirm: %q, %v", got, err)
	}
	out, err := heph.GetWorkflow(front, ShoppingCart, r.ID).Get(ctx)
	if err != nil || out.Total != 30 {
		t.Fatalf("output %+v, %v", out, err)
	}
}

// testWfTwoWorkers runs workflows on two clients with workers on one
// store, as two processes would: decisions of a run happen in both, each
// client's cached instance falls behind the other's decisions, and every
// run still ends with the right result.
func testWfTwoWorkers(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Counter, Onboarding, BatchProcess), CreateAccount, SendWelcome, ProcessItem)
	other := startWfClient(t, e.st, nil, wfs(Counter, Onboarding, BatchProcess), CreateAccount, SendWelcome, ProcessItem)
	clients := []*heph.Client{e.c, other}
	var failed atomic.Int32
	for _, c := range clients {
		c.Subscribe(func(ev heph.Event) {
			if ev.Kind == heph.DecisionFailed {
				failed.Add(1)
				t.Logf("decision failed: %v", ev.Err)
			}
		})
	}
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 10 {
		c := clients[i%2]
		wg.Go(func() {
			r, err := heph.StartWorkflow(ctx, c, Counter, struct{}{}, nil)
			if err != nil {
				errs <- err
				return
			}
			// Signals alternate between the clients.
			for k, s := range []string{"increment", "increment", "decrement", "increment", "done"} {
				if err := clients[k%2].SignalWorkflow(ctx, r.ID, s, nil); err != nil {
					errs <- err
					return
				}
			}
			if n, err := heph.GetWorkflow(clients[(i+1)%2], Counter, r.ID).Get(ctx); err != nil || n != 2 {
				errs <- fmt.Errorf("counter %d, %v", n, err)
			}
		})
		wg.Go(func() {
			out, err := heph.ExecuteWorkflow(ctx, c, BatchProcess, BatchInput{Items: []string{"a", "b", "c", "d"}}, nil)
			if err != nil || out.Processed != 4 {
				errs <- fmt.Errorf("batch %+v, %v", out, err)
			}
		})
		wg.Go(func() {
			out, err := heph.ExecuteWorkflow(ctx, c, Onboarding, OnboardingInput{UserID: fmt.Sprint("u", i)}, nil)
			if err != nil || out["account_id"] != fmt.Sprint("acct-u", i) {
				errs <- fmt.Errorf("onboarding %v, %v", out, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d decisions failed", n)
	}
}

// testWfChildChain: a child that continues as new reports its final
// result to its parent; a parent that ends without waiting for a child
// cancels it.
func testWfChildChain(t *testing.T, b Backend) {
	steps := workflow.New("steps", func(ctx workflow.Context, n int) (int, error) {
		if n >= 3 {
			return n * 10, nil
		}
		return 0, workflow.ContinueAsNew(ctx, n+1)
	})
	sleeper := workflow.New("forever", func(ctx workflow.Context, _ struct{}) (struct{}, error) {
		return struct{}{}, workflow.Sleep(ctx, 24*time.Hour)
	})
	parent := workflow.New("impatient", func(ctx workflow.Context, _ struct{}) (int, error) {
		sleeper.StartChild(ctx, struct{}{}) // never waited for
		return steps.ExecuteChild(ctx, 0)
	})
	e := newWfEnv(t, b, nil, wfs(parent, steps, sleeper))
	ctx := ctxT(t)
	out, err := heph.ExecuteWorkflow(ctx, e.c, parent, struct{}{}, nil)
	if err != nil || out != 30 {
		t.Fatalf("output %d, %v; want 30", out, err)
	}
	l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "steps"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 4 {
		t.Fatalf("%d runs of the child chain, want 4", len(l.Runs))
	}
	parents, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "impatient"})
	if err != nil || len(parents.Runs) != 1 {
		t.Fatalf("the parent: %+v, %v", parents, err)
	}
	// The orphan is cancelled; or, when the parent ended before the
	// child's start (its own task, which a loaded machine may run late),
	// the start went with the parent's other tasks and the child never
	// runs. Either way nothing of it is left running.
	wctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		l, err := e.c.ListRuns(wctx, &heph.ListOptions{Flow: "forever"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Runs) == 1 && l.Runs[0].Status == heph.StatusCancelled {
			return
		}
		if len(l.Runs) == 0 {
			left, err := e.st.RunTasks(wctx, parents.Runs[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) == 0 {
				t.Logf("the parent ended before its orphan child started: the child never ran")
				return
			}
		}
		select {
		case <-wctx.Done():
			t.Fatalf("the orphan child: %+v, not cancelled", l.Runs)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
