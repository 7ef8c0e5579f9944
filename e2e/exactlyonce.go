package e2e

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
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The tests of "exactly once" under the faults that once broke it: tasks
// that outlive their lease, commits whose outcome is lost and that are
// retried, leases that cannot be extended, input that a backend cannot
// index, retention next to pending work, and runs no worker can run.

func testExactlyOnce(t *testing.T, b Backend) {
	runAll(t, b, []subtest{
		{"ChildStartOutlivesLease", testChildStartOutlivesLease},
		{"ChildReportRetriedCommit", testChildReportRetriedCommit},
		{"ChildReportOutlivesLease", testChildReportOutlivesLease},
		{"SignalRetriedCommit", testSignalRetriedCommit},
		{"UpdateAcceptRetriedCommit", testUpdateAcceptRetriedCommit},
		{"UpdateRequestRetriedCommit", testUpdateRequestRetriedCommit},
		{"UpdateDecisionStoreFailure", testUpdateDecisionStoreFailure},
		{"CancelAndResumeRetriedCommit", testCancelResumeRetriedCommit},
		{"GateDecisionRetriedCommit", testGateDecisionRetriedCommit},
		{"LeaseWatchdog", testLeaseWatchdog},
		{"LongBusinessValues", testLongBusinessValues},
		{"RetentionKeepsPendingWork", testRetentionKeepsPendingWork},
		{"UnservedVersion", testUnservedVersion},
		{"HeartbeatDetails", testHeartbeatDetails},
		{"StepStartedHistory", testStepStartedHistory},
	})
}

// faultStore wraps a store to inject faults. It hides the optional
// interfaces of the store it wraps (notifications, concurrent applies).
type faultStore struct {
	store.Store
	mu sync.Mutex
	// afterApply runs after every Apply that succeeded; an error it
	// returns is what Apply returns: the commit happened, its outcome is
	// lost (as when the connection dies after COMMIT).
	afterApply func(p *store.ApplyParams) error
	// heartbeat, when set, replaces the store's Heartbeat.
	heartbeat func(ctx context.Context, p *store.HeartbeatParams) ([]int64, error)
	lost      atomic.Int32
	// loseRequest: see CreateRequest.
	loseRequest atomic.Bool
	// failHistory makes that many History calls fail, as on a connection
	// the server terminated.
	failHistory atomic.Int32
}

func (s *faultStore) History(ctx context.Context, p *store.HistoryParams) ([]store.Event, error) {
	for n := s.failHistory.Load(); n > 0; n = s.failHistory.Load() {
		if s.failHistory.CompareAndSwap(n, n-1) {
			return nil, errors.New("injected: terminating connection due to administrator command")
		}
	}
	return s.Store.History(ctx, p)
}

func (s *faultStore) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	res, err := s.Store.Apply(ctx, p)
	s.mu.Lock()
	after := s.afterApply
	s.mu.Unlock()
	if err == nil && after != nil {
		if ferr := after(p); ferr != nil {
			s.lost.Add(1)
			return nil, ferr
		}
	}
	return res, err
}

func (s *faultStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	s.mu.Lock()
	hb := s.heartbeat
	s.mu.Unlock()
	if hb != nil {
		return hb(ctx, p)
	}
	return s.Store.Heartbeat(ctx, p)
}

// CreateRequest loses the outcome of the first request recorded while
// loseRequest is set: the request is stored, the caller gets an error.
func (s *faultStore) CreateRequest(ctx context.Context, p *store.CreateRequestParams) (*store.Request, error) {
	req, err := s.Store.CreateRequest(ctx, p)
	if err == nil && s.loseRequest.CompareAndSwap(true, false) {
		s.lost.Add(1)
		return nil, errors.New("injected: the connection died after COMMIT")
	}
	return req, err
}

// loseOnce loses the outcome of the first commit after which cond holds.
func (s *faultStore) loseOnce(cond func() bool) {
	var once atomic.Bool
	s.mu.Lock()
	s.afterApply = func(*store.ApplyParams) error {
		if !once.Load() && cond() && once.CompareAndSwap(false, true) {
			return errors.New("injected: the connection died after COMMIT")
		}
		return nil
	}
	s.mu.Unlock()
}

// waitLost waits until n commit outcomes were lost: the caller may see
// the effect of a commit before its outcome is reported lost.
func (s *faultStore) waitLost(t *testing.T, n int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d lost commit outcomes", n), func() bool { return s.lost.Load() >= n })
	if got := s.lost.Load(); got != n {
		t.Fatalf("%d commit outcomes lost, want %d", got, n)
	}
}

// hasEvent reports whether a run's history holds an entry of kind.
func hasEvent(st store.Store, runID string, kind hephtype.EventKind) bool {
	h, err := st.History(context.Background(), &store.HistoryParams{RunID: runID})
	if err != nil {
		return false
	}
	for _, e := range h {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// childPair is a parent that runs one child, waits for the signal
// "finish" and returns the child's result; a child given "wait" waits for
// the signal "go" first. The waits keep both runs alive, so that a
// duplicate report or a wrongful cancellation has a live run to hit.
func childPair(prefix string, slowChildOnce, slowParentOnce *atomic.Bool) (*workflow.Definition[string, string], *workflow.Definition[string, string]) {
	child := workflow.New(prefix+"_child", func(ctx workflow.Context, in string) (string, error) {
		//heph:nondeterministic-ok test instrumentation: the first activation is slow, the commands are the same
		if slowChildOnce != nil && slowChildOnce.CompareAndSwap(true, false) {
			time.Sleep(1500 * time.Millisecond) //heph:nondeterministic-ok a slow first activation, as above
		}
		if in == "wait" {
			if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
				return "", err
			}
			in = "x"
		}
		return "child:" + in, nil
	})
	parent := workflow.New(prefix+"_parent", func(ctx workflow.Context, in string) (string, error) {
		out, err := child.ExecuteChild(ctx, in)
		if err != nil {
			return "", err
		}
		//heph:nondeterministic-ok test instrumentation: one decision is slow, the commands are the same
		if slowParentOnce != nil && slowParentOnce.CompareAndSwap(true, false) {
			time.Sleep(1500 * time.Millisecond) //heph:nondeterministic-ok a slow decision on the child's result, as above
		}
		if _, err := workflow.WaitSignal[string](ctx, "finish"); err != nil {
			return "", err
		}
		return "parent(" + out + ")", nil
	})
	return parent, child
}

// opTracker counts the workflow operation tasks a client starts and ends.
type opTracker struct {
	mu            sync.Mutex
	started, done map[string]int
}

func trackOps(c *heph.Client) *opTracker {
	o := &opTracker{started: map[string]int{}, done: map[string]int{}}
	c.Subscribe(func(ev heph.Event) {
		o.mu.Lock()
		defer o.mu.Unlock()
		switch ev.Kind {
		case heph.TaskStarted:
			o.started[ev.Step]++
		case heph.TaskCompleted, heph.TaskFailed:
			o.done[ev.Step]++
		}
	})
	return o
}

// settled reports whether every task of op that started has ended.
func (o *opTracker) settled(op string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started[op] > 0 && o.started[op] == o.done[op]
}

// waitOneRun waits until the workflow has one run, and ok says it is
// ready, and returns it.
func waitOneRun(t *testing.T, e *env, workflow string, ok func(*heph.Run) bool) *heph.Run {
	t.Helper()
	var run *heph.Run
	waitFor(t, "the run of "+workflow, func() bool {
		l, err := e.c.ListRuns(ctxT(t), &heph.ListOptions{Flow: workflow})
		if err != nil || len(l.Runs) != 1 || !ok(l.Runs[0]) {
			return false
		}
		run = l.Runs[0]
		return true
	})
	return run
}

// finishParent waits until the child's run has a result recorded in the
// parent (and the operation tasks that led there have ended), then lets
// the parent finish and returns its result.
func finishParent(t *testing.T, e *env, ops *opTracker, r *heph.WorkflowRun[string], op string) (string, error) {
	t.Helper()
	ctx := ctxT(t)
	waitFor(t, "the child's result in the parent", func() bool {
		h := e.history(r.ID)
		return (count(h, hephtype.EventChildCompleted, "") > 0 || count(h, hephtype.EventChildFailed, "") > 0) && ops.settled(op)
	})
	if err := r.Signal(ctx, "finish", nil); err != nil {
		return "", err
	}
	return r.Get(ctx)
}

// checkChildOnce checks that a parent completed with its child's result,
// which its history records once, and that no child failed.
func checkChildOnce(t *testing.T, e *env, r *heph.WorkflowRun[string], out string, err error) {
	t.Helper()
	h := e.history(r.ID)
	if err != nil || out != "parent(child:x)" {
		t.Fatalf("parent result %q, %v; history %v", out, err, kinds(h))
	}
	if n := count(h, hephtype.EventChildStarted, ""); n != 1 {
		t.Errorf("%d child_started entries, want 1", n)
	}
	if n := count(h, hephtype.EventChildCompleted, ""); n != 1 {
		t.Errorf("%d child_completed entries, want 1: %v", n, kinds(h))
	}
	if n := count(h, hephtype.EventChildFailed, ""); n != 0 {
		t.Errorf("%d child_failed entries, want none: %v", n, kinds(h))
	}
}

// Observation 1: the task that starts a child outlives its lease (the
// child's first activation is slow). The child must not be cancelled, nor
// the parent failed, nor the child started twice.
func testChildStartOutlivesLease(t *testing.T, b Backend) {
	var slow atomic.Bool
	slow.Store(true)
	parent, child := childPair("slowstart", &slow, nil)
	e := newWfEnv(t, b, func(c *heph.Config) {
		c.LeaseDuration, c.HeartbeatInterval = 400*time.Millisecond, 100*time.Millisecond
	}, wfs(parent, child))
	ops := trackOps(e.c)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, parent, "wait", nil)
	if err != nil {
		t.Fatal(err)
	}
	kid := waitOneRun(t, e, child.Name(), func(*heph.Run) bool { return !slow.Load() && ops.settled("start_child") })
	if err := e.c.SignalWorkflow(ctx, kid.ID, "go", nil); err != nil {
		t.Fatalf("signal the child: %v (it is %s: %s)", err, kid.Status, kid.Error)
	}
	out, err := finishParent(t, e, ops, r, "report_parent")
	checkChildOnce(t, e, r, out, err)
	l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: child.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 1 || l.Runs[0].Status != heph.StatusCompleted {
		t.Fatalf("child runs: %+v, want one, completed", l.Runs)
	}
}

// Observation 2: the commit that reports a child's end to its parent
// happens, but its outcome is lost and it is retried.
func testChildReportRetriedCommit(t *testing.T, b Backend) {
	parent, child := childPair("lostreport", nil, nil)
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, fs, func(c *heph.Config) { c.LeaseDuration = 3 * time.Second }, wfs(parent, child))
	ops := trackOps(e.c)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, parent, "wait", nil)
	if err != nil {
		t.Fatal(err)
	}
	kid := waitOneRun(t, e, child.Name(), func(r *heph.Run) bool { return r.Status == heph.StatusWaiting })
	fs.loseOnce(func() bool { return hasEvent(st, r.ID, hephtype.EventChildCompleted) })
	if err := e.c.SignalWorkflow(ctx, kid.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	fs.waitLost(t, 1)
	out, err := finishParent(t, e, ops, r, "report_parent")
	checkChildOnce(t, e, r, out, err)
}

// Observation 2, the other way: the parent's decision on the child's
// result is slow, and the report task outlives its lease.
func testChildReportOutlivesLease(t *testing.T, b Backend) {
	var slow atomic.Bool
	slow.Store(true)
	parent, child := childPair("slowreport", nil, &slow)
	e := newWfEnv(t, b, func(c *heph.Config) {
		c.LeaseDuration, c.HeartbeatInterval = 400*time.Millisecond, 100*time.Millisecond
	}, wfs(parent, child))
	ops := trackOps(e.c)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, parent, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parent's slow decision", func() bool { return !slow.Load() })
	out, err := finishParent(t, e, ops, r, "report_parent")
	checkChildOnce(t, e, r, out, err)
}

// signalCounter takes "add" signals until one says "stop", and returns
// the others' payloads.
var signalCounter = workflow.New("signal_counter", func(ctx workflow.Context, _ struct{}) ([]string, error) {
	var got []string
	for {
		v, err := workflow.WaitSignal[string](ctx, "add")
		if err != nil {
			return nil, err
		}
		if v == "stop" {
			return got, nil
		}
		got = append(got, v)
	}
})

// Observation 3: a signal's commit happens, its outcome is lost, and it is
// retried: the workflow receives the signal once.
func testSignalRetriedCommit(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, fs, func(c *heph.Config) { c.LeaseDuration = 3 * time.Second }, wfs(signalCounter))
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, signalCounter, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.loseOnce(func() bool { return hasEvent(st, r.ID, hephtype.EventSignalReceived) })
	if err := r.Signal(ctx, "add", "a"); err != nil {
		t.Fatalf("the signal whose commit outcome was lost: %v", err)
	}
	if err := r.Signal(ctx, "add", "b"); err != nil {
		t.Fatal(err)
	}
	if err := r.Signal(ctx, "add", "stop"); err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil || strings.Join(out, ",") != "a,b" {
		t.Fatalf("signals received %q, %v; want a,b", out, err)
	}
	if n := count(e.history(r.ID), hephtype.EventSignalReceived, ""); n != 3 {
		t.Fatalf("%d signal_received entries, want 3", n)
	}
	fs.waitLost(t, 1)
}

// A resume and a cancellation whose commits happen but whose outcomes are
// lost succeed once, and say so.
func testCancelResumeRetriedCommit(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startClient(t, fs, func(c *heph.Config) { c.LeaseDuration = 3 * time.Second }, approvalFlow("approve", 0), approvalFlow("other", 0))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "approve", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	fs.loseOnce(func() bool { return hasEvent(st, r.ID, hephtype.EventStepResumed) })
	if err := e.c.ResumeRun(ctx, r.ID, "approved", nil); err != nil {
		t.Fatalf("a resume whose commit outcome was lost: %v", err)
	}
	e.waitStatus(r.ID, heph.StatusCompleted)
	if n := count(e.history(r.ID), hephtype.EventStepResumed, ""); n != 1 {
		t.Fatalf("%d step_resumed entries, want 1", n)
	}

	r2, err := e.c.StartRun(ctx, "other", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r2.ID, heph.StatusWaiting)
	fs.loseOnce(func() bool { return hasEvent(st, r2.ID, hephtype.EventRunCancelled) })
	if err := e.c.CancelRun(ctx, r2.ID, "no"); err != nil {
		t.Fatalf("a cancellation whose commit outcome was lost: %v", err)
	}
	if got := e.waitStatus(r2.ID, heph.StatusCancelled); got.Error != "no" {
		t.Fatalf("cancelled run: %+v", got)
	}
	fs.waitLost(t, 2)
}

// Observation 5: a worker that cannot extend a lease stops the task's code
// before the lease ends, so that no other worker runs it at the same time.
// Time is a fake clock: the test moves it.
func testLeaseWatchdog(t *testing.T, b Backend) {
	var running, calls atomic.Int32
	var overlap atomic.Bool
	started := make(chan int32, 4)
	stopped := make(chan error, 4)
	fb := flow.New("watched")
	flow.Step(fb, "long", func(ctx context.Context, in any) (string, error) {
		n := calls.Add(1)
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		started <- n
		if n > 1 {
			return "second", nil
		}
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return "", ctx.Err()
	}, flow.Timeout(time.Hour))
	st, reopen := b.New(t)
	failing := &atomic.Bool{}
	fs := &faultStore{Store: st, heartbeat: func(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
		if failing.Load() {
			return nil, errors.New("injected: the database is unreachable")
		}
		return st.Heartbeat(ctx, p)
	}}
	failing.Store(true)
	fc := clock.NewFake(time.Now())
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startClient(t, fs, func(c *heph.Config) {
		c.Clock, c.LeaseDuration, c.HeartbeatInterval = fc, 30*time.Second, 10*time.Second
	}, fb.MustBuild())
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "watched", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step never started")
	}
	// Heartbeats fail from the start; the lease (30 s) ends at +30 s, and
	// the task must be stopped a margin before: by +25 s.
	for _, d := range []time.Duration{10 * time.Second, 10 * time.Second} {
		fc.Advance(d)
		select {
		case err := <-stopped:
			t.Fatalf("the step was stopped at %v with its lease still good: %v", d, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fc.Advance(5 * time.Second) // +25 s
	select {
	case err := <-stopped:
		if err == nil || !strings.Contains(err.Error(), "could not be extended") {
			t.Fatalf("the step's context ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the step ran on past its lease's margin with its lease unconfirmed")
	}
	// The first execution has returned; once its lease is over, the task
	// runs again, and the run completes.
	failing.Store(false)
	for {
		fc.Advance(time.Second)
		select {
		case <-started:
		case <-time.After(50 * time.Millisecond):
			if ctx.Err() != nil {
				t.Fatal("the task never ran again")
			}
			continue
		}
		break
	}
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"long":"second"}`)
	if overlap.Load() {
		t.Fatal("two executions of the step ran at the same time")
	}
	h := e.history(r.ID)
	if n := count(h, hephtype.EventStepStarted, "long"); n != 1 {
		t.Fatalf("%d step_started entries, want 1 (the dropped execution writes none)", n)
	}
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepStarted {
			if d := startedOf(t, ev); !d.Reexecution || d.Claim != 2 {
				t.Fatalf("the second execution is not shown as a re-execution: %s", ev.Data)
			}
		}
	}
}

// startedOf decodes the Data of a step_started entry.
func startedOf(t *testing.T, ev heph.HistoryEvent) (d struct {
	Worker      string    `json:"worker"`
	StartedAt   time.Time `json:"started_at"`
	Claim       int       `json:"claim"`
	Reexecution bool      `json:"reexecution"`
}) {
	t.Helper()
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatalf("step_started data %s: %v", ev.Data, err)
	}
	return d
}

// Observation 6: business values and workflow ids have one limit and one
// character set on every backend, checked before the store.
func testLongBusinessValues(t *testing.T, b Backend) {
	fb := flow.New("keyed").BusinessKey("orderid", flow.ScopeActive)
	flow.Step(fb, "s", func(ctx context.Context, in any) (string, error) { return "ok", nil })
	e := newEnv(t, b, nil, fb.MustBuild())
	wf := workflow.New("keyed_wf", func(ctx workflow.Context, _ struct{}) (string, error) { return "ok", nil })
	if err := e.c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	long := strings.Repeat("x1y2z3", 500) // 3000 bytes, hard to compress away
	for _, v := range []string{long, strings.Repeat("a", 201), "a::b", "a b"} {
		if _, err := e.c.StartRun(ctx, "keyed", nil, &heph.StartOptions{BusinessValue: v}); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("business value of %d bytes %.12q…: %v, want ErrInvalidInput", len(v), v, err)
		}
		if _, err := e.c.StartWorkflow(ctx, wf.Name(), struct{}{}, &heph.WorkflowOptions{ID: v}); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("workflow id of %d bytes: %v, want ErrInvalidInput", len(v), err)
		}
	}
	_, err := e.c.StartRun(ctx, "keyed", nil, &heph.StartOptions{BusinessValue: long})
	if err == nil || !strings.Contains(err.Error(), "limit is 200") {
		t.Errorf("the error for a long value does not give the limit: %v", err)
	}
	for _, v := range []string{"order-42", "ORD-1", "user_7", "v1.2", strings.Repeat("a", 200), "5f0c8a2e-3b1d-4c6e-9a7f-2d4b6c8e0a1f"} {
		r, err := e.c.StartRun(ctx, "keyed", nil, &heph.StartOptions{BusinessValue: v})
		if err != nil {
			t.Errorf("business value %q: %v", v, err)
			continue
		}
		if r.BusinessID != "orderid::"+v {
			t.Errorf("business id %q, want orderid::%s", r.BusinessID, v)
		}
		if _, err := e.c.StartWorkflow(ctx, wf.Name(), struct{}{}, &heph.WorkflowOptions{ID: v}); err != nil {
			t.Errorf("workflow id %q: %v", v, err)
		}
	}
	// Payloads have a limit too.
	big := strings.Repeat("p", 3<<20)
	if _, err := e.c.StartRun(ctx, "keyed", big, &heph.StartOptions{BusinessValue: "big"}); !errors.Is(err, heph.ErrPayloadTooLarge) || !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("an input of 3 MiB: %v, want ErrPayloadTooLarge", err)
	}
}

// Observation 7: retention never deletes a finished run that still has
// work: here a run that continued as new before any worker created the run
// that carries it on.
func testRetentionKeepsPendingWork(t *testing.T, b Backend) {
	wf := workflow.New("relay", func(ctx workflow.Context, n int) (int, error) {
		if n < 2 {
			return 0, workflow.ContinueAsNew(ctx, n+1)
		}
		return n, nil
	})
	st, reopen := b.New(t)
	fc := clock.NewFake(time.Now())
	// A client without workers: it decides the first activation (which
	// continues as new) but runs no task.
	front, err := heph.New(&heph.Config{Store: st, Clock: fc, Retention: time.Minute, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Stop(context.Background()) })
	if err := front.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	r, err := front.StartWorkflow(ctx, wf.Name(), 0, &heph.WorkflowOptions{ID: "relay1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != hephtype.StatusContinued {
		t.Fatalf("first run is %s, want continued", r.Status)
	}
	fc.Advance(time.Hour)
	if _, err := front.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := front.GetRun(ctx, r.ID); err != nil {
		t.Fatalf("the continued run, whose successor is not created yet, was pruned: %v", err)
	}
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, st, nil, wfs(wf))
	got, err := e.c.WorkflowResult(ctx, r.ID)
	if err != nil || string(got.Output) != "2" {
		t.Fatalf("result of the chain: %+v, %v", got, err)
	}
	cur, err := e.c.FindWorkflow(ctx, wf.Name(), "relay1")
	if err != nil || cur.ID != got.ID {
		t.Fatalf("FindWorkflow: %+v, %v; want the last run %s", cur, err, got.ID)
	}
}

// Observation 8: a run pinned to a flow version that the only worker lacks
// is not claimed by it; it is marked unserved (GetRun shows why), and a
// worker that has the version runs it.
func testUnservedVersion(t *testing.T, b Backend) {
	build := func(v int) *flow.Flow {
		fb := flow.New("versioned").Version(v)
		flow.Step(fb, "s", func(ctx context.Context, in any) (string, error) { return fmt.Sprintf("v%d", v), nil })
		return fb.MustBuild()
	}
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	var events []heph.Event
	var mu sync.Mutex
	// The old worker has version 1 only.
	old := startClient(t, st, func(c *heph.Config) {
		c.LeaseDuration, c.HeartbeatInterval = 300*time.Millisecond, 100*time.Millisecond
	}, build(1))
	old.Subscribe(func(ev heph.Event) {
		if ev.Kind == heph.RunCondition {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	})
	// A client without workers starts runs of both versions.
	front, err := heph.New(&heph.Config{Store: st, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Stop(context.Background()) })
	if err := front.Register(build(1), build(2)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	r1, err := front.StartRun(ctx, "versioned", nil, &heph.StartOptions{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := front.StartRun(ctx, "versioned", nil, &heph.StartOptions{Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	e.c = old
	done := e.waitStatus(r1.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"s":"v1"}`)
	var stuck *heph.Run
	waitFor(t, "version 2's run to be marked unserved", func() bool {
		got, err := old.GetRun(ctx, r2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			t.Fatalf("a worker without version 2 ran it: %+v", got)
		}
		stuck = got
		return got.Condition.Code == heph.ConditionUnserved
	})
	if msg := stuck.Condition.Message; !strings.Contains(msg, `flow "versioned" version 2`) || !strings.Contains(msg, `queue "default"`) {
		t.Fatalf("condition message %q does not say what is missing", msg)
	}
	if n := count(e.history(r2.ID), hephtype.EventStepFailed, ""); n != 0 {
		t.Fatalf("the run's step failed %d times on a worker that lacks its version", n)
	}
	l, err := old.ListRuns(ctx, &heph.ListOptions{Flow: "versioned", Statuses: []hephtype.RunStatus{heph.StatusRunning}})
	if err != nil || len(l.Runs) != 1 || l.Runs[0].Condition.Code != heph.ConditionUnserved {
		t.Fatalf("ListRuns does not show the condition: %+v, %v", l, err)
	}
	waitFor(t, "a RunCondition telemetry event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.RunID == r2.ID && ev.Condition == heph.ConditionUnserved && ev.Err != nil {
				return true
			}
		}
		return false
	})
	// A worker with both versions, side by side with the old one, runs it
	// and the condition clears.
	startClient(t, st, nil, build(1), build(2))
	done = e.waitStatus(r2.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"s":"v2"}`)
	if !done.Condition.IsZero() {
		t.Fatalf("the condition stayed after the run completed: %+v", done.Condition)
	}
}

// Heartbeat details recorded by an attempt reach the next one: for flow
// steps and for activities.
func testHeartbeatDetails(t *testing.T, b Backend) {
	type progress struct{ Done int }
	var stepSeen, actSeen atomic.Int32
	stepSeen.Store(-1)
	actSeen.Store(-1)
	fb := flow.New("resumable")
	flow.Step(fb, "s", func(ctx context.Context, in any) (int, error) {
		info, _ := flow.CallInfo(ctx)
		if info.Attempt == 1 {
			if err := flow.RecordHeartbeat(ctx, progress{Done: 7}); err != nil {
				return 0, err
			}
			// Wait for the heartbeat to carry the details? Not needed: the
			// failing attempt's last details go with its retry.
			return 0, errors.New("crash after 7 items")
		}
		p, ok, err := flow.HeartbeatDetails[progress](ctx)
		if err != nil || !ok {
			return 0, fmt.Errorf("no details: %v", err)
		}
		stepSeen.Store(int32(p.Done))
		return p.Done, nil
	}, flow.Retry(fastRetry))
	act := workflow.NewActivity("resumable_act", func(ctx context.Context, _ struct{}) (int, error) {
		info, _ := workflow.GetActivityInfo(ctx)
		if info.Attempt == 1 {
			workflow.RecordHeartbeat(ctx, progress{Done: 5})
			return 0, errors.New("crash after 5 items")
		}
		p, ok, err := workflow.HeartbeatDetails[progress](ctx)
		if err != nil || !ok {
			return 0, fmt.Errorf("no details: %v", err)
		}
		actSeen.Store(int32(p.Done))
		return p.Done, nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: fastRetry})
	wf := workflow.New("resumable_wf", func(ctx workflow.Context, _ struct{}) (int, error) {
		return act.Execute(ctx, struct{}{})
	})
	e := newEnv(t, b, nil, fb.MustBuild())
	if err := e.c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RegisterActivities(act); err != nil {
		t.Fatal(err)
	}
	r := e.run("resumable", nil, nil)
	wantStatus(t, r, heph.StatusCompleted)
	if stepSeen.Load() != 7 {
		t.Fatalf("the step's second attempt read details %d, want 7", stepSeen.Load())
	}
	ctx := ctxT(t)
	out, err := heph.ExecuteWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil || out != 5 || actSeen.Load() != 5 {
		t.Fatalf("activity: output %d, %v; the second attempt read %d, want 5", out, err, actSeen.Load())
	}
}

// The history tells what happened: a step_started entry per attempt with
// the worker, the backoff chosen for a retry, attempt numbers of
// activities.
func testStepStartedHistory(t *testing.T, b Backend) {
	var calls atomic.Int32
	fb := flow.New("twice")
	flow.Step(fb, "s", func(ctx context.Context, in any) (string, error) {
		if calls.Add(1) == 1 {
			return "", errors.New("first attempt fails")
		}
		return "ok", nil
	}, flow.Retry(fastRetry))
	var acalls atomic.Int32
	act := workflow.NewActivity("twice_act", func(ctx context.Context, _ struct{}) (string, error) {
		if acalls.Add(1) == 1 {
			return "", errors.New("first attempt fails")
		}
		return "ok", nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: fastRetry})
	wf := workflow.New("twice_wf", func(ctx workflow.Context, _ struct{}) (string, error) { return act.Execute(ctx, struct{}{}) })
	e := newEnv(t, b, func(c *heph.Config) { c.WorkerID = "worker-one" }, fb.MustBuild())
	if err := e.c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RegisterActivities(act); err != nil {
		t.Fatal(err)
	}
	r := e.run("twice", nil, nil)
	wantStatus(t, r, heph.StatusCompleted)
	checkAttempts := func(h []heph.HistoryEvent, what string) {
		t.Helper()
		var started []int
		for _, ev := range h {
			switch ev.Kind {
			case hephtype.EventStepStarted:
				started = append(started, ev.Attempt)
				if d := startedOf(t, ev); d.Worker != "worker-one" || d.Claim != 1 || d.Reexecution || d.StartedAt.IsZero() {
					t.Errorf("%s: step_started says %s", what, ev.Data)
				}
			case hephtype.EventStepRetrying:
				var d struct {
					Backoff *time.Duration `json:"backoff"`
					ReadyAt time.Time      `json:"ready_at"`
				}
				if err := json.Unmarshal(ev.Data, &d); err != nil || d.Backoff == nil || d.ReadyAt.IsZero() {
					t.Errorf("%s: step_retrying without the backoff: %s", what, ev.Data)
				}
			case hephtype.EventStepCompleted:
				if ev.Attempt != 2 {
					t.Errorf("%s: step_completed with attempt %d, want 2", what, ev.Attempt)
				}
			}
		}
		if fmt.Sprint(started) != "[1 2]" {
			t.Errorf("%s: step_started attempts %v, want [1 2]: %v", what, started, kinds(h))
		}
	}
	checkAttempts(e.history(r.ID), "flow")
	ctx := ctxT(t)
	wr, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := wr.Get(ctx); err != nil || out != "ok" {
		t.Fatalf("workflow: %q, %v", out, err)
	}
	checkAttempts(e.history(wr.ID), "workflow")
}

// updateCounter accepts "add" updates until one says "stop", and returns
// the others' arguments: its handler runs once per accepted update.
var updateCounter = workflow.New("update_counter", func(ctx workflow.Context, _ struct{}) ([]string, error) {
	return workflow.Phase(ctx, []string(nil),
		workflow.OnUpdate("add", func(ctx workflow.Context, v string, got []string) (workflow.Reply[[]string, int], error) {
			if v == "stop" {
				return workflow.RespondAndStop(got, len(got)), nil
			}
			got = append(slices.Clip(got), v)
			return workflow.Respond(got, len(got)), nil
		}),
	)
})

// sendUpdates sends "add" updates a, b and stop from a client that does
// not have the workflow, and checks the replies and the history: each
// accepted and completed once.
func sendUpdates(t *testing.T, e *env, c *heph.Client, r *heph.WorkflowRun[[]string]) {
	t.Helper()
	ctx := ctxT(t)
	for i, v := range []string{"a", "b", "stop"} {
		want := min(i+1, 2)
		if n, err := heph.Update[int](ctx, c, r.ID, "add", v, &heph.UpdateOptions{ID: "add-" + v}); err != nil || n != want {
			t.Fatalf("update add %s: %d, %v; want %d", v, n, err, want)
		}
	}
	out, err := r.Get(ctx)
	if err != nil || strings.Join(out, ",") != "a,b" {
		t.Fatalf("updates applied %q, %v; want a,b", out, err)
	}
	h := e.history(r.ID)
	for _, k := range []hephtype.EventKind{hephtype.EventUpdateAccepted, hephtype.EventUpdateDone} {
		if n := count(h, k, ""); n != 3 {
			t.Fatalf("%d %s entries, want 3", n, k)
		}
	}
}

// faultyUpdateWorker starts a run of updateCounter worked by a client on a
// faultStore (3 s leases), and a sender client on the plain store whose
// updates reach the run as requests.
func faultyUpdateWorker(t *testing.T, b Backend) (*env, *faultStore, *heph.WorkflowRun[[]string], *heph.Client) {
	t.Helper()
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, fs, func(c *heph.Config) { c.LeaseDuration = 3 * time.Second }, wfs(updateCounter))
	r, err := heph.StartWorkflow(ctxT(t), e.c, updateCounter, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := heph.New(&heph.Config{Store: st, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(sender) })
	return e, fs, r, sender
}

// An update's acceptance commits, the worker loses its outcome and the
// commit is retried: the update is accepted, and handled, once.
func testUpdateAcceptRetriedCommit(t *testing.T, b Backend) {
	e, fs, r, sender := faultyUpdateWorker(t, b)
	fs.loseOnce(func() bool { return hasEvent(e.st, r.ID, hephtype.EventUpdateAccepted) })
	sendUpdates(t, e, sender, r)
	fs.waitLost(t, 1)
}

// An update's request is recorded, the sender loses the outcome and
// records it again: the update is recorded, accepted and handled once.
func testUpdateRequestRetriedCommit(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, st, nil, wfs(updateCounter))
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, updateCounter, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := heph.New(&heph.Config{Store: fs, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(sender) })
	fs.loseRequest.Store(true)
	sendUpdates(t, e, sender, r)
	fs.waitLost(t, 1)
}

// The store fails under the decision that offers an update to the
// workflow (its history read, on a connection the server terminated): the
// update is not rejected, since the workflow did nothing wrong; the
// request stays pending, its task is tried again, and the update is
// accepted and handled once.
func testUpdateDecisionStoreFailure(t *testing.T, b Backend) {
	e, fs, r, sender := faultyUpdateWorker(t, b)
	fs.failHistory.Store(1)
	sendUpdates(t, e, sender, r)
	if n := fs.failHistory.Load(); n != 0 {
		t.Fatalf("%d injected history failures left, want the one used", n)
	}
}
