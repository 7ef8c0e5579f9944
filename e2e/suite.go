// Package e2e is the end-to-end suite: real flows run through the public
// API of package hephaestus on a real store. Every backend runs the same
// suite by calling Run with a Backend.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
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
)

// Backend opens stores for the suite.
type Backend struct {
	Name string
	// New returns a fresh, empty store, and a function that opens the same
	// database again after the first store was closed.
	New func(t *testing.T) (st store.Store, reopen func(t *testing.T) store.Store)
	// BeginTx, when set, opens a transaction of the application's on
	// st's database, of the kind InsertJobTx takes.
	BeginTx func(t *testing.T, st store.Store) *AppTx
	// Dump, when set, returns every row of every table of st's database
	// as text (RunPayloads greps it).
	Dump func(t *testing.T, st store.Store) string
}

// Run runs the whole suite on b.
func Run(t *testing.T, b Backend) { runAll(t, b, suite()) }

// RunNamed runs the tests of the suite that names lists on b (a name
// the suite does not have fails the test).
func RunNamed(t *testing.T, b Backend, names ...string) {
	all := suite()
	var some []subtest
	for _, n := range names {
		i := slices.IndexFunc(all, func(s subtest) bool { return s.name == n })
		if i < 0 {
			t.Fatalf("the suite has no test %q", n)
		}
		some = append(some, all[i])
	}
	runAll(t, b, some)
}

// suite is the whole suite.
func suite() []subtest {
	return []subtest{
		{"FanOutFanIn", testFanOutFanIn},
		{"BranchThenJoin", testBranchThenJoin},
		{"Map", testMap},
		{"ReadNotAncestor", testReadNotAncestor},
		{"WaitThenResume", testWaitThenResume},
		{"WaitThenTimeout", testWaitThenTimeout},
		{"RetriesThenSuccess", testRetriesThenSuccess},
		{"RetriesExhausted", testRetriesExhausted},
		{"FailureRoute", testFailureRoute},
		{"StepTimeoutThenRetry", testStepTimeoutThenRetry},
		{"CancelWhileStepRuns", testCancelWhileStepRuns},
		{"BusinessKeyScopes", testBusinessKeyScopes},
		{"Facade", testFacade},
		{"VersionedFlows", testVersionedFlows},
		{"ReopenMidRun", testReopenMidRun},
		{"BadInput", testBadInput},
		{"Telemetry", testTelemetry},
		{"Retention", testRetention},
		{"RetentionPolicies", testRetentionPolicies},
		{"ListAndHistory", testListAndHistory},
		{"ManyConcurrentRuns", testManyConcurrentRuns},
		{"HeartbeatKeepsLongStep", testHeartbeat},
		{"TimerAfterRestart", testTimerAfterRestart},
		{"GracefulShutdown", testGracefulShutdown},
		{"WakeUpsWithoutPolling", testWakeUpsWithoutPolling},
		{"IdempotencyKey", testIdempotencyKey},
		{"BulkStart", testBulkStart},
		{"Workflows", testWorkflows},
		{"ExactlyOnce", testExactlyOnce},
		{"Jobs", testJobs},
		{"DocResearch", testDocResearch},
		{"DocBranching", testDocBranching},
		{"DocReopenMidRun", testDocReopenMidRun},
		{"DocApprovalGate", testDocApprovalGate},
		{"DocPinned", testDocPinned},
		{"DocPinnedLoader", testDocPinnedLoader},
		{"DocStartErrors", testDocStartErrors},
		{"DocGate", testDocGate},
		{"DocWaitUntil", testDocWaitUntil},
		{"Remote", func(t *testing.T, b Backend) { runAll(t, b, remoteTests) }},
	}
}

// subtest is one test of the suite.
type subtest struct {
	name string
	fn   func(t *testing.T, b Backend)
}

// runAll runs tests on b, each as a parallel subtest.
func runAll(t *testing.T, b Backend, tests []subtest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, b)
		})
	}
}

// env is a client with workers on a fresh store.
type env struct {
	t      *testing.T
	c      *heph.Client
	st     store.Store
	reopen func(t *testing.T) store.Store
}

func newEnv(t *testing.T, b Backend, mod func(*heph.Config), flows ...*flow.Flow) *env {
	t.Helper()
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startClient(t, st, mod, flows...)
	return e
}

func startClient(t *testing.T, st store.Store, mod func(*heph.Config), flows ...*flow.Flow) *heph.Client {
	t.Helper()
	cfg := &heph.Config{Store: st, Queues: map[string]int{"default": 8}, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()}
	if mod != nil {
		mod(cfg)
	}
	c, err := heph.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(flows...); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c) })
	return c
}

// stopClient stops a test's client. The wait for its running steps is
// bounded in real time too: a client on a fake clock would otherwise wait
// for a ShutdownTimeout that never comes if a failed test left a step
// blocked.
func stopClient(c *heph.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.Stop(ctx)
}

// QuietLogger is the clients' logger: quiet, unless HEPH_TEST_LOG is set
// (then standard error, at debug level).
func QuietLogger() *slog.Logger {
	if os.Getenv("HEPH_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) run(name string, input any, opts *heph.StartOptions) *heph.Run {
	e.t.Helper()
	r, err := e.c.Run(ctxT(e.t), name, input, opts)
	if err != nil {
		e.t.Fatalf("run %s: %v", name, err)
	}
	return r
}

// waitStatus polls a run until it has status s.
func (e *env) waitStatus(id string, s hephtype.RunStatus) *heph.Run {
	e.t.Helper()
	ctx := ctxT(e.t)
	for {
		r, err := e.c.GetRun(ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.Status == s {
			return r
		}
		if r.Status.Terminal() {
			e.t.Fatalf("run %s is %s (%s), want %s", id, r.Status, r.Error, s)
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("run %s still %s, want %s", id, r.Status, s)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (e *env) history(id string) []heph.HistoryEvent {
	e.t.Helper()
	h, err := e.c.History(ctxT(e.t), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func count(h []heph.HistoryEvent, kind hephtype.EventKind, step string) int {
	n := 0
	for _, ev := range h {
		if ev.Kind == kind && (step == "" || ev.Step == step) {
			n++
		}
	}
	return n
}

func wantStatus(t *testing.T, r *heph.Run, s hephtype.RunStatus) {
	t.Helper()
	if r.Status != s {
		t.Fatalf("run %s: status %s (error %q), want %s", r.ID, r.Status, r.Error, s)
	}
}

func wantJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("output %s, want %s", gb, wb)
	}
}

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func orderFlow() *flow.Flow {
	b := flow.New("order")
	flow.Input[order](b)
	flow.EventStep(b, "validate", func(ctx context.Context, o order) (flow.Result[order], error) {
		if o.Amount <= 0 {
			return flow.Emit("invalid", o), nil
		}
		return flow.Emit("valid", o), nil
	}, flow.Events("valid", "invalid"))
	charge := flow.Step(b, "charge", func(ctx context.Context, o order) (string, error) { return "ch_" + o.ID, nil })
	reserve := flow.Step(b, "reserve", func(ctx context.Context, o order) (string, error) { return "wh_" + o.ID, nil })
	flow.Step(b, "ship", func(ctx context.Context, o order) (string, error) {
		c, err := charge.Output(ctx)
		if err != nil {
			return "", err
		}
		r, err := reserve.Output(ctx)
		if err != nil {
			return "", err
		}
		return c + "+" + r, nil
	})
	return b.Start("validate").
		Edge("validate", "valid", "charge", "reserve").
		Edge("validate", "invalid", flow.Done).
		Edge("charge", "ok", "ship").
		Edge("reserve", "ok", "ship").
		Edge("ship", "ok", flow.Done).
		MustBuild()
}

func testFanOutFanIn(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, orderFlow())
	r := e.run("order", order{ID: "7", Amount: 10}, nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"ship":"ch_7+wh_7"}`)
	h := e.history(r.ID)
	for _, s := range []string{"validate", "charge", "reserve", "ship"} {
		if n := count(h, hephtype.EventStepCompleted, s); n != 1 {
			t.Errorf("step %s completed %d times in history, want 1", s, n)
		}
	}
	// ship is scheduled after both branches completed.
	var shipAt, chargeAt, reserveAt int64
	for _, ev := range h {
		switch {
		case ev.Kind == hephtype.EventStepScheduled && ev.Step == "ship":
			shipAt = ev.Seq
		case ev.Kind == hephtype.EventStepCompleted && ev.Step == "charge":
			chargeAt = ev.Seq
		case ev.Kind == hephtype.EventStepCompleted && ev.Step == "reserve":
			reserveAt = ev.Seq
		}
	}
	if shipAt < chargeAt || shipAt < reserveAt {
		t.Errorf("ship scheduled at seq %d before charge (%d) or reserve (%d) completed", shipAt, chargeAt, reserveAt)
	}

	bad := e.run("order", order{ID: "8"}, nil)
	wantStatus(t, bad, heph.StatusCompleted)
	for _, s := range []string{"charge", "reserve", "ship"} {
		st, _ := bad.Step(s)
		if st.Status != hephtype.StepSkipped {
			t.Errorf("invalid order: step %s is %s, want skipped", s, st.Status)
		}
	}
}

func testBranchThenJoin(t *testing.T, b Backend) {
	fb := flow.New("branch")
	flow.EventStep(fb, "decide", func(ctx context.Context, in string) (flow.Result[string], error) {
		return flow.Emit(in, in), nil
	}, flow.Events("left", "right"))
	flow.Step(fb, "left", func(ctx context.Context, in string) (string, error) { return "L", nil })
	flow.Step(fb, "right", func(ctx context.Context, in string) (string, error) { return "R", nil })
	flow.Step(fb, "join", func(ctx context.Context, in string) ([]string, error) {
		var got []string
		for _, k := range []string{"left", "right"} {
			if v, err := flow.Output[string](ctx, k); err == nil {
				got = append(got, v)
			}
		}
		return got, nil
	}, flow.DependsOn("left", "right"))
	fb.Edge("decide", "left", "left").Edge("decide", "right", "right")
	e := newEnv(t, b, nil, fb.MustBuild())

	r := e.run("branch", "left", nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"join":["L"]}`)
	if st, _ := r.Step("right"); st.Status != hephtype.StepSkipped {
		t.Errorf("right is %s, want skipped", st.Status)
	}
	r = e.run("branch", "right", nil)
	wantJSON(t, r.Output, `{"join":["R"]}`)
	if n := count(e.history(r.ID), hephtype.EventStepSkipped, "left"); n != 1 {
		t.Errorf("left skipped %d times in history, want 1", n)
	}
}

func testMap(t *testing.T, b Backend) {
	fb := flow.New("mapper")
	list := flow.Step(fb, "list", func(ctx context.Context, n int) ([]int, error) {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	})
	square := flow.Map(fb, "square", func(ctx context.Context, x int) (int, error) { return x * x, nil }, flow.DependsOn("list"))
	// total reads the map step's array through its handle ([]int) and
	// list, two hops back, through its own.
	flow.Step(fb, "total", func(ctx context.Context, n int) (map[string]int, error) {
		sq, err := square.Output(ctx)
		if err != nil {
			return nil, err
		}
		l, err := list.Output(ctx)
		if err != nil {
			return nil, err
		}
		sum := 0
		for _, x := range sq {
			sum += x
		}
		return map[string]int{"sum": sum, "count": len(l)}, nil
	}, flow.DependsOn("square"))
	e := newEnv(t, b, nil, fb.MustBuild())
	r := e.run("mapper", 10, nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"total":{"count":10,"sum":285}}`)
	// Compared as JSON: PostgreSQL's jsonb hands the array back spaced
	// ([0, 1, …]) when the run is read from the database, which a wait
	// does or not depending on timing.
	st, _ := r.Step("square")
	wantJSON(t, st.Output, `[0,1,4,9,16,25,36,49,64,81]`)
	if n := count(e.history(r.ID), hephtype.EventItemCompleted, "square"); n != 10 {
		t.Errorf("%d elements completed, want 10", n)
	}
	if st, _ := r.Step("total"); st.Attempt != 1 {
		t.Errorf("total took %d attempts, want 1", st.Attempt)
	}
	r = e.run("mapper", 0, nil)
	wantJSON(t, r.Output, `{"total":{"count":0,"sum":0}}`)
}

// testReadNotAncestor: a step that reads a sibling's output fails for good
// on its first attempt, with an error naming both steps, on the durable
// runtime as in memory.
func testReadNotAncestor(t *testing.T, b Backend) {
	fb := flow.New("siblings")
	flow.Step(fb, "root", func(ctx context.Context, n int) (int, error) { return n, nil })
	left := flow.Step(fb, "left", func(ctx context.Context, n int) (int, error) { return 1, nil }, flow.DependsOn("root"))
	flow.Step(fb, "right", func(ctx context.Context, n int) (int, error) {
		return left.Output(ctx)
	}, flow.DependsOn("root"), flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond}))
	e := newEnv(t, b, nil, fb.MustBuild())
	r := e.run("siblings", 1, nil)
	wantStatus(t, r, heph.StatusFailed)
	for _, want := range []string{`step "right" reads the output of step "left"`, "not an ancestor"} {
		if !strings.Contains(r.Error, want) {
			t.Errorf("run error %q does not say %q", r.Error, want)
		}
	}
	if n := count(e.history(r.ID), hephtype.EventStepFailed, "right"); n != 1 {
		t.Errorf("right failed %d times, want 1: the error is not retried", n)
	}
}

func approvalFlow(name string, timeout time.Duration) *flow.Flow {
	fb := flow.New(name)
	flow.EventStep(fb, "approve", func(ctx context.Context, in string) (flow.Result[string], error) {
		return flow.Wait[string](), nil
	}, flow.Events("approved", "rejected"), flow.Waits(timeout))
	flow.Step(fb, "publish", func(ctx context.Context, in string) (string, error) {
		who, err := flow.Output[map[string]string](ctx, "approve")
		if err != nil {
			return "", err
		}
		return "published by " + who["by"], nil
	})
	fb.Start("approve").Edge("approve", "approved", "publish").Edge("approve", "rejected", flow.Done).Edge("publish", "ok", flow.Done)
	if timeout > 0 {
		flow.Step(fb, "expire", func(ctx context.Context, in string) (string, error) { return "expired", nil })
		fb.Edge("approve", flow.EventTimeout, "expire").Edge("expire", "ok", flow.Done)
	}
	return fb.MustBuild()
}

func testWaitThenResume(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, approvalFlow("approval", 0))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "approval", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	if err := e.c.ResumeRun(ctx, r.ID, "maybe", nil); !errors.Is(err, heph.ErrUnknownEvent) {
		t.Fatalf("resume with undeclared event: %v, want ErrUnknownEvent", err)
	}
	if err := e.c.ResumeRun(ctx, r.ID, "approved", &heph.ResumeOptions{Step: "publish"}); !errors.Is(err, heph.ErrNotWaiting) {
		t.Fatalf("resume of a step that is not waiting: %v, want ErrNotWaiting", err)
	}
	if err := e.c.ResumeRun(ctx, r.ID, "approved", &heph.ResumeOptions{Payload: map[string]string{"by": "ann"}}); err != nil {
		t.Fatal(err)
	}
	done, err := e.c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"publish":"published by ann"}`)
	if err := e.c.ResumeRun(ctx, r.ID, "approved", nil); !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("resume of a finished run: %v, want ErrRunFinished", err)
	}
	h := e.history(r.ID)
	if count(h, hephtype.EventStepWaiting, "approve") != 1 || count(h, hephtype.EventStepResumed, "approve") != 1 {
		t.Errorf("history lacks waiting/resumed entries: %v", h)
	}
}

func testWaitThenTimeout(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, approvalFlow("expiring", 150*time.Millisecond))
	r := e.run("expiring", "doc", nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"expire":"expired"}`)
	h := e.history(r.ID)
	if count(h, hephtype.EventTimerFired, "approve") != 1 {
		t.Errorf("no timer_fired in history")
	}
	st, _ := r.Step("approve")
	if st.Event != flow.EventTimeout {
		t.Errorf("approve ended with %q, want timeout", st.Event)
	}
}

var fastRetry = flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

func flakyFlow(name string, failures int, policy flow.RetryPolicy, calls *atomic.Int32) *flow.Flow {
	fb := flow.New(name)
	flow.Step(fb, "flaky", func(ctx context.Context, in any) (int32, error) {
		n := calls.Add(1)
		if int(n) <= failures {
			return 0, fmt.Errorf("transient failure %d", n)
		}
		return n, nil
	}, flow.Retry(policy))
	return fb.MustBuild()
}

func testRetriesThenSuccess(t *testing.T, b Backend) {
	var calls atomic.Int32
	e := newEnv(t, b, nil, flakyFlow("flaky", 2, fastRetry, &calls))
	r := e.run("flaky", nil, nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"flaky":3}`)
	h := e.history(r.ID)
	if n := count(h, hephtype.EventStepFailed, "flaky"); n != 2 {
		t.Errorf("%d failed attempts in history, want 2", n)
	}
	if st, _ := r.Step("flaky"); st.Attempt != 3 {
		t.Errorf("attempt %d, want 3", st.Attempt)
	}
}

func testRetriesExhausted(t *testing.T, b Backend) {
	var calls, permCalls atomic.Int32
	fb := flow.New("permanent")
	flow.Step(fb, "bad", func(ctx context.Context, in any) (int, error) {
		permCalls.Add(1)
		return 0, flow.NonRetryable(errors.New("card declined"))
	}, flow.Retry(fastRetry))
	e := newEnv(t, b, nil, flakyFlow("doomed", 100, fastRetry, &calls), fb.MustBuild())
	r := e.run("doomed", nil, nil)
	wantStatus(t, r, heph.StatusFailed)
	if calls.Load() != 3 {
		t.Errorf("%d attempts, want 3", calls.Load())
	}
	if want := `step "flaky" failed: transient failure 3`; r.Error != want {
		t.Errorf("error %q, want %q", r.Error, want)
	}
	r = e.run("permanent", nil, nil)
	wantStatus(t, r, heph.StatusFailed)
	if permCalls.Load() != 1 {
		t.Errorf("non-retryable error was attempted %d times", permCalls.Load())
	}
}

func testFailureRoute(t *testing.T, b Backend) {
	fb := flow.New("compensate")
	flow.Step(fb, "charge", func(ctx context.Context, in any) (int, error) {
		return 0, flow.NonRetryable(errors.New("declined"))
	})
	flow.Step(fb, "refund", func(ctx context.Context, in any) (string, error) {
		f, err := flow.Output[map[string]string](ctx, "charge")
		return "refunded after " + f["error"], err
	})
	fb.Edge("charge", flow.EventFailed, "refund")
	e := newEnv(t, b, nil, fb.MustBuild())
	r := e.run("compensate", nil, nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"refund":"refunded after declined"}`)
}

func testStepTimeoutThenRetry(t *testing.T, b Backend) {
	var calls atomic.Int32
	fb := flow.New("slow")
	flow.Step(fb, "slow", func(ctx context.Context, in any) (string, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // the first attempt hangs until its timeout
			return "", ctx.Err()
		}
		return "fast", nil
	}, flow.Timeout(time.Second), flow.Retry(fastRetry)) // the second attempt returns at once: far within it
	e := newEnv(t, b, nil, fb.MustBuild())
	r := e.run("slow", nil, nil)
	wantStatus(t, r, heph.StatusCompleted)
	h := e.history(r.ID)
	var failed []string
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepFailed {
			failed = append(failed, ev.Error)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "timed out after 1s") {
		t.Errorf("failures %q, want one timeout", failed)
	}
}

func testCancelWhileStepRuns(t *testing.T, b Backend) {
	started := make(chan struct{})
	observed := make(chan error, 1)
	fb := flow.New("long")
	flow.Step(fb, "long", func(ctx context.Context, in any) (string, error) {
		close(started)
		<-ctx.Done()
		observed <- ctx.Err()
		return "", ctx.Err()
	}, flow.Timeout(time.Minute))
	flow.Step(fb, "after", func(ctx context.Context, in any) (string, error) { return "", nil }, flow.DependsOn("long"))
	e := newEnv(t, b, nil, fb.MustBuild())
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "long", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if err := e.c.CancelRun(ctx, r.ID, "operator said so"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-observed:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("step saw %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("the running step never saw the cancellation")
	}
	got, err := e.c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, got, heph.StatusCancelled)
	if got.Error != "operator said so" {
		t.Errorf("error %q", got.Error)
	}
	if err := e.c.CancelRun(ctx, r.ID, ""); !errors.Is(err, heph.ErrRunFinished) {
		t.Errorf("cancel of a cancelled run: %v, want ErrRunFinished", err)
	}
	if st, _ := got.Step("after"); st.Status != hephtype.StepPending {
		t.Errorf("after is %s; nothing should have run after the cancel", st.Status)
	}
}

func keyedFlow(name string, scope flow.KeyScope) *flow.Flow {
	fb := flow.New(name).BusinessKey("orderid", scope)
	flow.EventStep(fb, "hold", func(ctx context.Context, in any) (flow.Result[string], error) {
		return flow.Wait[string](), nil
	}, flow.Waits(0))
	return fb.MustBuild()
}

func testBusinessKeyScopes(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, keyedFlow("active", flow.ScopeActive), keyedFlow("forever", flow.ScopeForever), keyedFlow("none", flow.ScopeNone))
	ctx := ctxT(t)
	opts := &heph.StartOptions{BusinessValue: "1234"}

	first, err := e.c.StartRun(ctx, "active", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.BusinessID != "orderid::1234" {
		t.Errorf("business id %q", first.BusinessID)
	}
	var dup *store.DuplicateRunError
	if _, err := e.c.StartRun(ctx, "active", nil, opts); !errors.Is(err, heph.ErrDuplicateRun) || !errors.As(err, &dup) || dup.ExistingRunID != first.ID {
		t.Fatalf("second active start: %v, want ErrDuplicateRun held by %s", err, first.ID)
	}
	e.waitStatus(first.ID, heph.StatusWaiting)
	if err := e.c.ResumeRun(ctx, first.ID, "ok", nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(first.ID, heph.StatusCompleted)
	if _, err := e.c.StartRun(ctx, "active", nil, opts); err != nil {
		t.Fatalf("start after the first run finished: %v", err)
	}

	f1, err := e.c.StartRun(ctx, "forever", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.CancelRun(ctx, f1.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.StartRun(ctx, "forever", nil, opts); !errors.Is(err, heph.ErrDuplicateRun) {
		t.Fatalf("forever scope after the run finished: %v, want ErrDuplicateRun", err)
	}

	n1, err := e.c.StartRun(ctx, "none", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := e.c.StartRun(ctx, "none", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n1.BusinessID == n2.BusinessID {
		t.Errorf("scope none gave equal business ids %q", n1.BusinessID)
	}
	if _, err := e.c.StartRun(ctx, "active", nil, &heph.StartOptions{BusinessValue: "Bad Value"}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("bad business value: %v, want ErrInvalidInput", err)
	}
	if _, err := e.c.StartRun(ctx, "active", nil, nil); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("missing business value: %v, want ErrInvalidInput", err)
	}
}

func testFacade(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, approvalFlow("doc", 0), keyedFlowApproval())
	ctx := ctxT(t)
	if _, err := e.c.Facade("doc"); err == nil {
		t.Error("facade of a flow without business key")
	}
	fc, err := e.c.Facade("review")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Start(ctx, "42", "text"); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Start(ctx, "42", "text"); !errors.Is(err, heph.ErrDuplicateRun) {
		t.Fatalf("second start: %v", err)
	}
	r, err := fc.Get(ctx, "42")
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	if err := fc.Resume(ctx, "42", "approved", &heph.ResumeOptions{Payload: map[string]string{"by": "bo"}}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"publish":"published by bo"}`)
	if _, err := fc.Start(ctx, "43", "x"); err != nil {
		t.Fatal(err)
	}
	if err := fc.Cancel(ctx, "43", "no"); err != nil {
		t.Fatal(err)
	}
	l, err := fc.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 2 {
		t.Errorf("facade lists %d runs, want 2", len(l.Runs))
	}
	if _, err := fc.Get(ctx, "999"); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("get unknown value: %v", err)
	}
}

func keyedFlowApproval() *flow.Flow {
	fb := flow.New("review").BusinessKey("docid", flow.ScopeActive)
	flow.EventStep(fb, "approve", func(ctx context.Context, in string) (flow.Result[string], error) {
		return flow.Wait[string](), nil
	}, flow.Events("approved", "rejected"), flow.Waits(0))
	flow.Step(fb, "publish", func(ctx context.Context, in string) (string, error) {
		who, err := flow.Output[map[string]string](ctx, "approve")
		return "published by " + who["by"], err
	})
	return fb.Start("approve").Edge("approve", "approved", "publish").Edge("approve", "rejected", flow.Done).Edge("publish", "ok", flow.Done).MustBuild()
}

func versioned(v int) *flow.Flow {
	fb := flow.New("versioned").Version(v)
	flow.EventStep(fb, "gate", func(ctx context.Context, in any) (flow.Result[int], error) {
		return flow.Wait[int](), nil
	}, flow.Waits(0))
	flow.Step(fb, "finish", func(ctx context.Context, in any) (string, error) {
		return fmt.Sprintf("v%d", v), nil
	}, flow.DependsOn("gate"), flow.Key(fmt.Sprintf("finish_v%d", v)))
	return fb.MustBuild()
}

func testVersionedFlows(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, versioned(1))
	ctx := ctxT(t)
	old, err := e.c.StartRun(ctx, "versioned", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(old.ID, heph.StatusWaiting)
	if err := e.c.Register(versioned(2)); err != nil {
		t.Fatal(err)
	}
	cur, err := e.c.StartRun(ctx, "versioned", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if old.Version != 1 || cur.Version != 2 {
		t.Fatalf("versions %d and %d, want 1 and 2", old.Version, cur.Version)
	}
	e.waitStatus(cur.ID, heph.StatusWaiting)
	for _, id := range []string{old.ID, cur.ID} {
		if err := e.c.ResumeRun(ctx, id, "ok", nil); err != nil {
			t.Fatal(err)
		}
	}
	wantJSON(t, e.waitStatus(old.ID, heph.StatusCompleted).Output, `{"finish_v1":"v1"}`)
	wantJSON(t, e.waitStatus(cur.ID, heph.StatusCompleted).Output, `{"finish_v2":"v2"}`)
	// Same version, different shape.
	other := flow.New("versioned").Version(2)
	flow.Step(other, "other", func(ctx context.Context, in any) (int, error) { return 0, nil })
	if err := e.c.Register(other.MustBuild()); !errors.Is(err, heph.ErrFlowConflict) {
		t.Errorf("conflicting registration: %v, want ErrFlowConflict", err)
	}
}

func testReopenMidRun(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	var firstCalls atomic.Int32
	build := func() *flow.Flow {
		fb := flow.New("reopen")
		flow.Step(fb, "one", func(ctx context.Context, in any) (string, error) { return "1", nil })
		flow.Step(fb, "two", func(ctx context.Context, in any) (string, error) {
			if firstCalls.Add(1) == 1 {
				<-ctx.Done() // the first attempt runs until shutdown cancels it
				return "", ctx.Err()
			}
			return "2", nil
		}, flow.DependsOn("one"))
		flow.EventStep(fb, "three", func(ctx context.Context, in any) (flow.Result[string], error) {
			return flow.Wait[string](), nil
		}, flow.DependsOn("two"), flow.Waits(0))
		return fb.MustBuild()
	}
	c1 := startClient(t, st, func(c *heph.Config) { c.ShutdownTimeout = 10 * time.Millisecond }, build())
	ctx := ctxT(t)
	r, err := c1.StartRun(ctx, "reopen", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for firstCalls.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("step two never started")
		case <-time.After(time.Millisecond):
		}
	}
	// Stop while "two" runs: it is cancelled and its task released.
	if err := c1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := reopen(t)
	c2 := startClient(t, st2, nil, build())
	e := &env{t: t, c: c2, st: st2}
	e.waitStatus(r.ID, heph.StatusWaiting)
	if err := c2.ResumeRun(ctx, r.ID, "ok", &heph.ResumeOptions{Payload: "3"}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"three":"3"}`)
	if n := count(e.history(r.ID), hephtype.EventStepCompleted, "two"); n != 1 {
		t.Errorf("two completed %d times", n)
	}
}

func testBadInput(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, orderFlow())
	ctx := ctxT(t)
	before, err := e.c.ListRuns(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.StartRun(ctx, "order", json.RawMessage(`{"id": 5}`), nil); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("typed input mismatch: %v, want ErrInvalidInput", err)
	}
	if _, err := e.c.StartRun(ctx, "order", json.RawMessage(`{"id":`), nil); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("broken JSON: %v, want ErrInvalidInput", err)
	}
	if _, err := e.c.StartRun(ctx, "nope", nil, nil); !errors.Is(err, heph.ErrFlowNotFound) {
		t.Errorf("unknown flow: %v, want ErrFlowNotFound", err)
	}
	if _, err := e.c.StartRun(ctx, "order", order{}, &heph.StartOptions{Version: 9}); !errors.Is(err, heph.ErrFlowNotFound) {
		t.Errorf("unknown version: %v, want ErrFlowNotFound", err)
	}
	if _, err := e.c.GetRun(ctx, "no-such-run"); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("unknown run: %v, want ErrRunNotFound", err)
	}
	if err := e.c.ResumeRun(ctx, "no-such-run", "ok", nil); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("resume unknown run: %v, want ErrRunNotFound", err)
	}
	if err := e.c.CancelRun(ctx, "no-such-run", ""); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("cancel unknown run: %v, want ErrRunNotFound", err)
	}
	r := e.run("order", order{ID: "1", Amount: 1}, nil)
	if err := e.c.ResumeRun(ctx, r.ID, "ok", nil); !errors.Is(err, heph.ErrRunFinished) {
		t.Errorf("resume finished run: %v, want ErrRunFinished", err)
	}
	if err := e.c.CancelRun(ctx, r.ID, ""); !errors.Is(err, heph.ErrRunFinished) {
		t.Errorf("cancel finished run: %v, want ErrRunFinished", err)
	}
	changed := flow.New("order").Tags("changed")
	flow.Step(changed, "only", func(ctx context.Context, in any) (int, error) { return 1, nil })
	if err := e.c.Register(changed.MustBuild()); !errors.Is(err, heph.ErrFlowConflict) {
		t.Errorf("same version, other shape: %v, want ErrFlowConflict", err)
	}
	after, err := e.c.ListRuns(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Runs) != len(before.Runs)+1 {
		t.Errorf("%d runs stored, want %d: bad input must store nothing", len(after.Runs), len(before.Runs)+1)
	}
	h := e.history(r.ID)
	if h[len(h)-1].Kind != hephtype.EventRunCompleted {
		t.Errorf("refused calls changed the history: last entry %s", h[len(h)-1].Kind)
	}
}

func testTelemetry(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, orderFlow())
	events := make(chan heph.Event, 1000)
	unsub := e.c.Subscribe(func(ev heph.Event) { events <- ev })
	defer unsub()
	r := e.run("order", order{ID: "1", Amount: 1}, nil)
	want := map[heph.EventKind]int{heph.RunStarted: 1, heph.RunCompleted: 1, heph.StepStarted: 4, heph.StepCompleted: 4, heph.TaskCompleted: 4}
	seen := map[heph.EventKind]int{}
	ctx := ctxT(t)
	// Task events of the last step may trail the run's completion.
	for !maps.Equal(seen, want) {
		select {
		case ev := <-events:
			if ev.RunID == r.ID {
				if _, ok := want[ev.Kind]; ok {
					seen[ev.Kind]++
				}
			}
		case <-ctx.Done():
			t.Fatalf("telemetry seen %v, want %v", seen, want)
		}
	}
}

// laterClock is the system clock shifted forward.
type laterClock struct{ shift atomic.Int64 }

func (c *laterClock) Now() time.Time { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c *laterClock) After(d time.Duration) <-chan time.Time {
	return time.After(d)
}

func testRetention(t *testing.T, b Backend) {
	clk := &laterClock{}
	e := newEnv(t, b, func(c *heph.Config) { c.Retention = time.Hour; c.Clock = clk }, orderFlow(), approvalFlow("approval", 0))
	ctx := ctxT(t)
	done := e.run("order", order{ID: "1", Amount: 1}, nil)
	waiting, err := e.c.StartRun(ctx, "approval", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(waiting.ID, heph.StatusWaiting)
	if n, err := e.c.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("prune now: %d, %v; want nothing pruned", n, err)
	}
	clk.shift.Store(int64(2 * time.Hour))
	if n, err := e.c.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("prune 2h later: %d, %v; want 1", n, err)
	}
	if _, err := e.c.GetRun(ctx, done.ID); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("finished run still there: %v", err)
	}
	if _, err := e.c.GetRun(ctx, waiting.ID); err != nil {
		t.Errorf("waiting run was pruned: %v", err)
	}
}

// testRetentionPolicies: policies keep a queue's completed runs an hour
// and its failures a week, and one flow's runs forever, while Retention
// covers the rest.
func testRetentionPolicies(t *testing.T, b Backend) {
	clk := &laterClock{}
	jobs := flow.New("mail")
	flow.Input[bool](jobs)
	flow.Step(jobs, "send", func(ctx context.Context, ok bool) (string, error) {
		if !ok {
			return "", flow.NonRetryable(errors.New("bounced"))
		}
		return "sent", nil
	}, flow.Queue("jobs"))
	mail := jobs.MustBuild()
	e := newEnv(t, b, func(c *heph.Config) {
		c.Clock = clk
		c.Queues = map[string]int{"default": 4, "jobs": 4}
		c.Retention = 30 * 24 * time.Hour
		c.RetentionPolicies = []heph.RetentionPolicy{
			{Queue: "jobs", Completed: time.Hour, Failed: 7 * 24 * time.Hour},
			{Workflows: []string{"order"}, Completed: -1},
		}
	}, orderFlow(), mail)
	ctx := ctxT(t)
	sent := e.run("mail", true, nil)
	bounced := e.run("mail", false, nil)
	if bounced.Status != heph.StatusFailed {
		t.Fatalf("bounced mail is %s, want failed", bounced.Status)
	}
	order := e.run("order", order{ID: "1", Amount: 1}, nil)
	prune := func(after time.Duration, want int) {
		t.Helper()
		clk.shift.Store(int64(after))
		if n, err := e.c.Prune(ctx); err != nil || n != want {
			t.Fatalf("prune %s later: %d, %v; want %d", after, n, err, want)
		}
	}
	exists := func(id string, want bool) {
		t.Helper()
		_, err := e.c.GetRun(ctx, id)
		if got := err == nil; got != want || (err != nil && !errors.Is(err, heph.ErrRunNotFound)) {
			t.Fatalf("run %s exists: %v (%v), want %v", id, got, err, want)
		}
	}
	prune(30*time.Minute, 0)
	prune(2*time.Hour, 1)
	exists(sent.ID, false)
	exists(bounced.ID, true)
	prune(8*24*time.Hour, 1)
	exists(bounced.ID, false)
	prune(365*24*time.Hour, 0)
	exists(order.ID, true)
}

func testListAndHistory(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, orderFlow())
	ctx := ctxT(t)
	var ids []string
	for i := range 5 {
		r := e.run("order", order{ID: fmt.Sprint(i), Amount: i}, &heph.StartOptions{Tags: []string{fmt.Sprintf("batch%d", i%2)}})
		ids = append(ids, r.ID)
	}
	var got []string
	cursor := ""
	for {
		l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "order", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.Runs {
			got = append(got, r.ID)
		}
		if l.Next == "" {
			break
		}
		cursor = l.Next
	}
	slices.Reverse(got)
	if !slices.Equal(got, ids) {
		t.Errorf("paged list %v, want newest first of %v", got, ids)
	}
	l, err := e.c.ListRuns(ctx, &heph.ListOptions{Tags: []string{"batch0"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 3 {
		t.Errorf("tag filter: %d runs, want 3", len(l.Runs))
	}
	h := e.history(ids[1])
	if h[0].Kind != hephtype.EventRunStarted || h[len(h)-1].Kind != hephtype.EventRunCompleted {
		t.Errorf("history from %s to %s", h[0].Kind, h[len(h)-1].Kind)
	}
	for i, ev := range h {
		if ev.Seq != int64(i+1) {
			t.Fatalf("history seq %d at position %d", ev.Seq, i)
		}
	}
}

func testManyConcurrentRuns(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, orderFlow())
	ctx := ctxT(t)
	errs := make(chan error, 100)
	for i := range 100 {
		go func() {
			r, err := e.c.Run(ctx, "order", order{ID: fmt.Sprint(i), Amount: 1 + i}, nil)
			if err == nil && r.Status != heph.StatusCompleted {
				err = fmt.Errorf("run %s: %s %s", r.ID, r.Status, r.Error)
			}
			errs <- err
		}()
	}
	for range 100 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A step that runs for several lease periods keeps its lease by
// heartbeats, and runs once. Time is a fake clock, moved by the test one
// heartbeat interval at a time, each time once the store confirmed the
// heartbeat before: no wall-clock margin is involved.
func testHeartbeat(t *testing.T, b Backend) {
	var calls atomic.Int32
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	fb := flow.New("long")
	flow.Step(fb, "long", func(ctx context.Context, in any) (int32, error) {
		n := calls.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return n, nil
	}, flow.Timeout(time.Hour))
	st, reopen := b.New(t)
	beats := make(chan int, 100)
	fs := &faultStore{Store: st, heartbeat: func(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
		lost, err := st.Heartbeat(ctx, p)
		if err == nil {
			beats <- len(p.Leases)
		}
		return lost, err
	}}
	fc := clock.NewFake(time.Now())
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startClient(t, fs, func(c *heph.Config) {
		c.Clock, c.LeaseDuration, c.HeartbeatInterval = fc, 3*time.Second, time.Second
	}, fb.MustBuild())
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before Stop, should the test fail
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "long", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// Ten heartbeat intervals: over three lease periods.
	for i := range 10 {
		fc.Advance(time.Second)
		select {
		case <-beats:
		case <-ctx.Done():
			t.Fatalf("heartbeat %d never came", i+1)
		}
	}
	releaseOnce.Do(func() { close(release) })
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"long":1}`)
	if calls.Load() != 1 {
		t.Errorf("the step ran %d times; heartbeats should have kept its lease", calls.Load())
	}
}

func testTimerAfterRestart(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	// The first process's clock stands still, so that its timer cannot
	// fire before it stops however slow the machine is; the second's is
	// the real one, past the timer's due time within 300 ms.
	c1 := startClient(t, st, func(c *heph.Config) { c.Clock = clock.NewFake(time.Now()) }, approvalFlow("expiring", 300*time.Millisecond))
	ctx := ctxT(t)
	r, err := c1.StartRun(ctx, "expiring", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e1 := &env{t: t, c: c1, st: st}
	e1.waitStatus(r.ID, heph.StatusWaiting)
	if err := c1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// The timer lives in the store: a new process delivers it.
	st2 := reopen(t)
	c2 := startClient(t, st2, nil, approvalFlow("expiring", 300*time.Millisecond))
	got, err := c2.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, got.Output, `{"expire":"expired"}`)
	h, err := c2.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The timer fired at its time or after. (Entries are stamped with
	// their commit's time, which comes after the decision that set the
	// timer: compare with the time the timer was due, not with when its
	// entry was committed.)
	var due struct {
		After  string    `json:"after"`
		FireAt time.Time `json:"fire_at"`
	}
	var fired time.Time
	for _, ev := range h {
		switch ev.Kind {
		case hephtype.EventTimerStarted:
			if err := json.Unmarshal(ev.Data, &due); err != nil {
				t.Fatalf("timer_started data %s: %v", ev.Data, err)
			}
		case hephtype.EventTimerFired:
			fired = ev.At
		}
	}
	if due.After != "300ms" || due.FireAt.IsZero() {
		t.Fatalf("timer_started says %+v", due)
	}
	if fired.Before(due.FireAt) {
		t.Errorf("timer fired at %v, before it was due at %v", fired, due.FireAt)
	}
}

func testGracefulShutdown(t *testing.T, b Backend) {
	started := make(chan struct{})
	release := make(chan struct{})
	fb := flow.New("drain")
	flow.Step(fb, "work", func(ctx context.Context, in any) (string, error) {
		close(started)
		<-release
		return "done", nil
	})
	st, _ := b.New(t)
	c := startClient(t, st, func(c *heph.Config) { c.ShutdownTimeout = time.Minute }, fb.MustBuild())
	ctx := ctxT(t)
	r, err := c.StartRun(ctx, "drain", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(ctx) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a step was still running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	got, err := st.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != heph.StatusCompleted {
		t.Errorf("after a graceful stop the run is %s; the drained step's result was lost", got.Status)
	}
}

func testWakeUpsWithoutPolling(t *testing.T, b Backend) {
	// With polling all but off, only in-process wake-ups move the runs.
	e := newEnv(t, b, func(c *heph.Config) { c.MinPollInterval, c.PollInterval = time.Hour, time.Hour }, orderFlow())
	for i := range 20 {
		r := e.run("order", order{ID: fmt.Sprint(i), Amount: 1}, nil)
		wantStatus(t, r, heph.StatusCompleted)
	}
}

func testIdempotencyKey(t *testing.T, b Backend) {
	var mu sync.Mutex
	keys := map[string][]string{}
	fb := flow.New("keys")
	record := func(ctx context.Context) {
		info, _ := flow.CallInfo(ctx)
		mu.Lock()
		defer mu.Unlock()
		name := fmt.Sprintf("%s/%d", info.Step, info.Index)
		keys[name] = append(keys[name], info.IdempotencyKey)
	}
	flow.Step(fb, "flaky", func(ctx context.Context, in []int) ([]int, error) {
		record(ctx)
		if info, _ := flow.CallInfo(ctx); info.Attempt < 3 {
			return nil, errors.New("not yet")
		}
		return in, nil
	}, flow.Retry(fastRetry))
	flow.Map(fb, "each", func(ctx context.Context, x int) (int, error) {
		record(ctx)
		if info, _ := flow.CallInfo(ctx); info.Attempt < 2 {
			return 0, errors.New("not yet")
		}
		return x, nil
	}, flow.DependsOn("flaky"), flow.Retry(fastRetry))
	e := newEnv(t, b, nil, fb.MustBuild())
	r := e.run("keys", []int{1, 2}, nil)
	wantStatus(t, r, heph.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for name, ks := range keys {
		if len(ks) < 2 {
			t.Errorf("%s ran %d times, want retries", name, len(ks))
		}
		for _, k := range ks {
			if k != ks[0] {
				t.Errorf("%s: idempotency keys differ across attempts: %q", name, ks)
			}
		}
		if seen[ks[0]] {
			t.Errorf("%s shares its idempotency key %q", name, ks[0])
		}
		seen[ks[0]] = true
	}
	if len(keys) != 3 {
		t.Errorf("keys for %d steps/elements, want 3", len(keys))
	}
}

func testBulkStart(t *testing.T, b Backend) {
	job := flow.New("job")
	flow.Step(job, "deliver", func(ctx context.Context, n int) (int, error) { return n * 2, nil })
	e := newEnv(t, b, func(c *heph.Config) { c.MaxCommitBatch = 64 }, job.MustBuild(), keyedFlow("keyed", flow.ScopeActive))
	ctx := ctxT(t)
	done := make(chan string, 1000)
	e.c.Subscribe(func(ev heph.Event) {
		if ev.Kind == heph.RunCompleted && ev.Workflow == "job" {
			done <- ev.RunID
		}
	})
	reqs := make([]heph.StartRequest, 500)
	for i := range reqs {
		reqs[i] = heph.StartRequest{Input: i}
	}
	runs, err := e.c.StartRuns(ctx, "job", reqs)
	if err != nil {
		t.Fatal(err)
	}
	for range runs {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("not every job completed")
		}
	}
	r, err := e.c.GetRun(ctx, runs[7].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, r.Output, `{"deliver":14}`)

	// One invalid request: nothing is started.
	before, _ := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "keyed"})
	_, err = e.c.StartRuns(ctx, "keyed", []heph.StartRequest{
		{Options: &heph.StartOptions{BusinessValue: "1"}},
		{Options: &heph.StartOptions{BusinessValue: "NOT VALID"}},
	})
	if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "request 1") {
		t.Fatalf("invalid request: %v", err)
	}
	after, _ := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "keyed"})
	if len(after.Runs) != len(before.Runs) {
		t.Fatalf("an invalid batch started %d runs", len(after.Runs)-len(before.Runs))
	}
	// A conflict refuses only its own run.
	runs, err = e.c.StartRuns(ctx, "keyed", []heph.StartRequest{
		{Options: &heph.StartOptions{BusinessValue: "1"}},
		{Options: &heph.StartOptions{BusinessValue: "1"}},
		{Options: &heph.StartOptions{BusinessValue: "2"}},
	})
	if !errors.Is(err, heph.ErrDuplicateRun) || !strings.Contains(err.Error(), "request 1") {
		t.Fatalf("conflict in a batch: %v", err)
	}
	if runs[0] == nil || runs[1] != nil || runs[2] == nil {
		t.Fatalf("runs %v: want the first and third started", runs)
	}
}

// wantCompletedWith waits for run id and fails unless it completed with
// the output want (JSON); it returns the run.
func wantCompletedWith(ctx context.Context, t *testing.T, c *heph.Client, id, want string) *heph.Run {
	t.Helper()
	done, err := c.WaitRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, heph.StatusCompleted)
	wantJSON(t, done.Output, want)
	return done
}
