package e2e

// Remote work: steps, document actions and activities that workers
// outside the process run, through Client.ClaimRemote, HeartbeatRemote,
// CompleteRemote and FailRemote. The test goroutine plays the remote
// worker; everything else is a real client on a real store.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// remoteTests are the suite's tests of remote work.
var remoteTests = []subtest{
	{"RemoteDocument", testRemoteDocument},
	{"RemoteDocumentMap", testRemoteDocumentMap},
	{"RemoteGoStep", testRemoteGoStep},
	{"RemoteActivity", testRemoteActivity},
	{"RemoteRetryThenSuccess", testRemoteRetry},
	{"RemoteNonRetryable", testRemoteNonRetryable},
	{"RemoteWorkerDies", testRemoteWorkerDies},
	{"RemoteDeadline", testRemoteDeadline},
	{"RemoteCancel", testRemoteCancel},
	{"RemoteStrictClaim", testRemoteStrictClaim},
	{"RemoteInvalidToken", testRemoteInvalidToken},
	{"RemoteTokens", testRemoteTokens},
	{"RemoteTokenReplay", testRemoteTokenReplay},
	{"RemoteServerDeadline", testRemoteServerDeadline},
	{"RemoteFlowControl", testRemoteFlowControl},
	{"RemoteChaos", testRemoteChaos},
}

// remoteWorker is the test's stand-in for a worker in another language.
type remoteWorker struct {
	t     *testing.T
	c     *heph.Client
	claim heph.RemoteClaim
}

func newRemoteWorker(t *testing.T, c *heph.Client, id string, actions, activities []string) *remoteWorker {
	return &remoteWorker{t: t, c: c, claim: heph.RemoteClaim{WorkerID: id, Actions: actions, Activities: activities, Wait: 30 * time.Second}}
}

// next long-polls until a task comes.
func (w *remoteWorker) next() *heph.RemoteTask {
	w.t.Helper()
	ctx := ctxT(w.t)
	for {
		ts, err := w.c.ClaimRemote(ctx, &w.claim)
		if err != nil {
			w.t.Fatalf("worker %s: claim: %v", w.claim.WorkerID, err)
		}
		if len(ts) > 0 {
			if len(ts) != 1 {
				w.t.Fatalf("worker %s claimed %d tasks, asked for 1", w.claim.WorkerID, len(ts))
			}
			return ts[0]
		}
	}
}

func (w *remoteWorker) complete(tk *heph.RemoteTask, output string) {
	w.t.Helper()
	if err := w.c.CompleteRemote(ctxT(w.t), tk.Token, json.RawMessage(output)); err != nil {
		w.t.Fatalf("worker %s: complete %s of run %s: %v", w.claim.WorkerID, tk.Step, tk.RunID, err)
	}
}

func wantTask(t *testing.T, tk *heph.RemoteTask, kind, name, step string, attempt int) {
	t.Helper()
	if tk.Kind != kind || tk.Name != name || tk.Step != step || tk.Attempt != attempt {
		t.Fatalf("task %s %q step %q attempt %d; want %s %q step %q attempt %d", tk.Kind, tk.Name, tk.Step, tk.Attempt, kind, name, step, attempt)
	}
	if tk.Token == "" || tk.Deadline.IsZero() || tk.LeaseUntil.IsZero() || tk.Lease <= 0 {
		t.Fatalf("task without token, deadline or lease: %+v", tk)
	}
}

const remoteDoc = `
name: remote-doc
steps:
  score:
    action: score
    args: {text: "{{input.text}}", by: "{{run.created_by}}"}
    retry: {max_attempts: 1}
    branch:
      - if: result.score > 5
        then: high
      - else: low
  high:
    action: notify
    args: {level: high, score: "{{steps.score.output.score}}"}
    done: true
  low:
    action: notify
    args: {level: low}
    done: true
`

// A stored document whose actions no Go function implements: the
// server's registry makes them remote, and a worker outside the process
// runs both steps, the branch between them reading the first's output.
func testRemoteDocument(t *testing.T, b Backend) {
	e := newEnv(t, b, nil)
	ctx := ctxT(t)
	reg := flowdoc.NewRegistry()
	reg.SetFallback(flowdoc.RemoteAction)
	if err := e.c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.PutDocument(ctx, "remote-doc", heph.DocumentYAML, []byte(remoteDoc)); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.StartDocument(ctx, "remote-doc", 0, map[string]string{"text": "great"}, &heph.StartOptions{CreatedBy: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "py-1", []string{"score", "notify"}, nil)
	tk := w.next()
	wantTask(t, tk, heph.RemoteStep, "score", "score", 1)
	if tk.RunID != r.ID || tk.Workflow != "remote-doc" || tk.Version != 1 || tk.Index != -1 {
		t.Fatalf("task %+v is not the run's first step", tk)
	}
	wantJSON(t, tk.Input, `{"text":"great","by":"ann"}`)
	w.complete(tk, `{"score":9}`)
	tk = w.next()
	wantTask(t, tk, heph.RemoteStep, "notify", "high", 1)
	wantJSON(t, tk.Input, `{"level":"high","score":9}`)
	w.complete(tk, `"sent"`)
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"high":"sent"}`)
	h := e.history(r.ID)
	if count(h, hephtype.EventStepCompleted, "score") != 1 || count(h, hephtype.EventStepCompleted, "high") != 1 || count(h, hephtype.EventStepSkipped, "low") != 1 {
		t.Fatalf("history does not show score and high completed, low skipped: %v", entries(h))
	}
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepStarted {
			if d := startedOf(t, ev); d.Worker != "py-1" {
				t.Fatalf("step_started names worker %q, want the remote worker", d.Worker)
			}
		}
	}
	// The worker is in the registry, with what it runs.
	ws, err := e.st.ListWorkers(ctx, &store.ListWorkersParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, wk := range ws {
		if wk.ID == "py-1" {
			found = strings.Join(wk.Handlers, ",") == "action:notify,action:score" && strings.Join(wk.Queues, ",") == "default"
		}
	}
	if !found {
		t.Fatalf("the remote worker is not registered with its handlers: %+v", ws)
	}
}

const remoteMapDoc = `
name: remote-map
steps:
  thumbs:
    action: thumb
    map: input.images
    args: {image: "{{item}}", size: "{{input.size}}"}
    done: true
`

// A map step whose action is remote: each element is a task of its own,
// with the element's resolved arguments, and the step's output is the
// workers' outputs in input order, whatever order they finish in.
func testRemoteDocumentMap(t *testing.T, b Backend) {
	e := newEnv(t, b, nil)
	ctx := ctxT(t)
	reg := flowdoc.NewRegistry()
	reg.SetFallback(flowdoc.RemoteAction)
	if err := e.c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.PutDocument(ctx, "remote-map", heph.DocumentYAML, []byte(remoteMapDoc)); err != nil {
		t.Fatal(err)
	}
	r, err := e.c.StartDocument(ctx, "remote-map", 0, map[string]any{"images": []string{"a.png", "b.png", "c.png"}, "size": 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "thumbnailer", []string{"thumb"}, nil)
	var got []*heph.RemoteTask
	for len(got) < 3 {
		got = append(got, w.next())
	}
	seen := map[int]bool{}
	for i := len(got) - 1; i >= 0; i-- { // finish in reverse order
		tk := got[i]
		if tk.Step != "thumbs" || tk.Index < 0 || tk.Index > 2 || seen[tk.Index] {
			t.Fatalf("task %+v is not a new element of the map step", tk)
		}
		seen[tk.Index] = true
		img := []string{"a.png", "b.png", "c.png"}[tk.Index]
		wantJSON(t, tk.Input, `{"image":"`+img+`","size":64}`)
		w.complete(tk, `"small-`+img+`"`)
	}
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"thumbs":["small-a.png","small-b.png","small-c.png"]}`)
}

func entries(h []heph.HistoryEvent) []string {
	var out []string
	for _, ev := range h {
		out = append(out, string(ev.Kind)+":"+ev.Step)
	}
	return out
}

// remoteGoFlow: a Go step, a remote step that reads it, a Go step after.
func remoteGoFlow() *flow.Flow {
	b := flow.New("remote-go")
	prep := flow.Step(b, "prep", func(ctx context.Context, in map[string]int) (int, error) { return in["n"] * 10, nil })
	render := flow.Remote(b, "render", "render", flow.DependsOn(prep.Name()), flow.Timeout(time.Hour),
		flow.RemoteFinish(func(ctx context.Context, in flow.RemoteInput, out json.RawMessage) (flow.Result[json.RawMessage], error) {
			var s string
			if err := json.Unmarshal(out, &s); err != nil {
				return flow.Result[json.RawMessage]{}, flow.NonRetryable(err)
			}
			b, _ := json.Marshal(strings.ToUpper(s))
			return flow.Ok(json.RawMessage(b)), nil
		}))
	flow.Step(b, "finish", func(ctx context.Context, in map[string]int) (string, error) {
		out, err := render.Output(ctx)
		if err != nil {
			return "", err
		}
		var s string
		err = json.Unmarshal(out, &s)
		return "done: " + s, err
	}, flow.DependsOn(render.Name()))
	return b.MustBuild()
}

// A Go flow with a remote step: the worker receives the step's input
// document, and the Go step after it reads its output.
func testRemoteGoStep(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, remoteGoFlow())
	r, err := e.c.StartRun(ctxT(t), "remote-go", map[string]int{"n": 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "render-1", []string{"render"}, nil)
	tk := w.next()
	wantTask(t, tk, heph.RemoteStep, "render", "render", 1)
	wantJSON(t, tk.Input, `{"input":{"n":4},"prep":40}`)
	if d := tk.Deadline.Sub(tk.LeaseUntil.Add(-tk.Lease)); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("deadline %v is not the claim plus the step's timeout of 1h (lease until %v)", tk.Deadline, tk.LeaseUntil)
	}
	if cancelled, err := e.c.HeartbeatRemote(ctxT(t), tk.Token, json.RawMessage(`{"page":1}`)); err != nil || cancelled {
		t.Fatalf("heartbeat: %v, %v", cancelled, err)
	}
	w.complete(tk, `"forty"`)
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"finish":"done: FORTY"}`)
	// A second completion with the same token changes nothing.
	if err := e.c.CompleteRemote(ctxT(t), tk.Token, json.RawMessage(`"again"`)); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("a second completion: %v, want ErrTaskLost", err)
	}
	if n := count(e.history(r.ID), hephtype.EventStepCompleted, "render"); n != 1 {
		t.Fatalf("render completed %d times", n)
	}
}

// RemoteQuote is an activity that only remote workers run: the workflow
// that calls it is registered in the test's client, the activity is not.
var RemoteQuote = workflow.NewActivity("remote_quote", func(ctx context.Context, item string) (int, error) {
	return 0, errors.New("remote_quote runs in remote workers only")
}).WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})

// RemoteQuoting quotes an item with the remote activity.
var RemoteQuoting = workflow.New("remote_quoting", func(ctx workflow.Context, item string) (string, error) {
	n, err := RemoteQuote.Execute(ctx, item)
	if err != nil {
		return "", err
	}
	return item + " costs " + strings.Repeat("$", n), nil
})

// A workflow whose activity runs remotely: the completion goes through
// the activity's commit, and the decision that follows ends the run.
func testRemoteActivity(t *testing.T, b Backend) {
	e := newEnv(t, b, nil)
	if err := e.c.RegisterWorkflows(RemoteQuoting); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	run, err := heph.StartWorkflow(ctx, e.c, RemoteQuoting, "tea", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "quoter", nil, []string{"remote_quote"})
	tk := w.next()
	wantTask(t, tk, heph.RemoteActivity, "remote_quote", "remote_quote", 1)
	wantJSON(t, tk.Input, `"tea"`)
	// A retryable failure, then the second attempt succeeds.
	if err := e.c.FailRemote(ctx, tk.Token, "quote service down", true, json.RawMessage(`{"tried":"a"}`)); err != nil {
		t.Fatal(err)
	}
	tk = w.next()
	wantTask(t, tk, heph.RemoteActivity, "remote_quote", "remote_quote", 2)
	wantJSON(t, tk.Details, `{"tried":"a"}`)
	w.complete(tk, `3`)
	out, err := run.Get(ctx)
	if err != nil || out != "tea costs $$$" {
		t.Fatalf("workflow result %q, %v", out, err)
	}

	// A failure that may not be retried fails the activity, and the
	// workflow with it.
	run, err = heph.StartWorkflow(ctx, e.c, RemoteQuoting, "gold", nil)
	if err != nil {
		t.Fatal(err)
	}
	tk = w.next()
	if err := e.c.FailRemote(ctx, tk.Token, "no price for gold", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Get(ctx); err == nil || !strings.Contains(err.Error(), "no price for gold") {
		t.Fatalf("workflow error %v, want the activity's failure", err)
	}
	h := e.history(run.ID)
	if n := count(h, hephtype.EventStepStarted, ""); n != 1 {
		t.Fatalf("%d attempts recorded, want 1 (no retry)", n)
	}
}

// remoteOnly is a flow of one remote step with retries.
func remoteOnly(name string, opts ...flow.StepOption) *flow.Flow {
	b := flow.New(name)
	flow.Remote(b, "work", "work", append([]flow.StepOption{
		flow.Timeout(time.Hour),
		flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}),
	}, opts...)...)
	return b.MustBuild()
}

// A retryable failure is retried with the details it recorded; the retry
// completes the run.
func testRemoteRetry(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, remoteOnly("remote-retry"))
	ctx := ctxT(t)
	var mu sync.Mutex
	seen := map[heph.EventKind]int{}
	unsub := e.c.Subscribe(func(ev heph.Event) {
		if ev.Step == "work" {
			mu.Lock()
			seen[ev.Kind]++
			mu.Unlock()
		}
	})
	defer unsub()
	r, err := e.c.StartRun(ctx, "remote-retry", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "w1", []string{"work"}, nil)
	tk := w.next()
	if _, err := e.c.HeartbeatRemote(ctx, tk.Token, json.RawMessage(`{"done":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.FailRemote(ctx, tk.Token, "flaky", true, nil); err != nil {
		t.Fatal(err)
	}
	tk = w.next()
	wantTask(t, tk, heph.RemoteStep, "work", "work", 2)
	wantJSON(t, tk.Details, `{"done":1}`)
	w.complete(tk, `{"ok":true}`)
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"work":{"ok":true}}`)
	h := e.history(r.ID)
	if count(h, hephtype.EventStepFailed, "work") != 1 || count(h, hephtype.EventStepRetrying, "work") != 1 || count(h, hephtype.EventStepCompleted, "work") != 1 {
		t.Fatalf("history %v: want one failure, one retry, one completion", entries(h))
	}
	// Telemetry tells the attempts as it does for steps run in process.
	mu.Lock()
	defer mu.Unlock()
	if want := map[heph.EventKind]int{heph.StepStarted: 2, heph.StepFailed: 1, heph.StepCompleted: 1}; !maps.Equal(seen, want) {
		t.Fatalf("telemetry %v, want %v", seen, want)
	}
}

// A failure that may not be retried fails the run at once.
func testRemoteNonRetryable(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, remoteOnly("remote-fatal"))
	r, err := e.c.StartRun(ctxT(t), "remote-fatal", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "w1", []string{"work"}, nil)
	tk := w.next()
	if err := e.c.FailRemote(ctxT(t), tk.Token, "bad input", false, nil); err != nil {
		t.Fatal(err)
	}
	got := e.waitStatus(r.ID, heph.StatusFailed)
	if !strings.Contains(got.Error, "bad input") {
		t.Fatalf("run error %q does not name the failure", got.Error)
	}
	if n := count(e.history(r.ID), hephtype.EventStepStarted, "work"); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

// A worker that stops heartbeating loses its task once the lease expires:
// another worker claims it, the first one's completion is refused and
// writes nothing, and the step's output is the second's, once.
func testRemoteWorkerDies(t *testing.T, b Backend) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, b, func(c *heph.Config) { c.Clock = fc }, remoteOnly("remote-dies"))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "remote-dies", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newRemoteWorker(t, e.c, "a", []string{"work"}, nil)
	a.claim.Lease = time.Minute
	first := a.next()
	// Worker a freezes; its lease runs out.
	fc.Advance(2 * time.Minute)
	bw := newRemoteWorker(t, e.c, "b", []string{"work"}, nil)
	bw.claim.Lease = time.Minute
	second := bw.next()
	wantTask(t, second, heph.RemoteStep, "work", "work", 1)
	if second.Token == first.Token {
		t.Fatal("the second claim got the first one's token")
	}
	// Worker a wakes up: its heartbeat and its completion are refused.
	if cancelled, err := e.c.HeartbeatRemote(ctx, first.Token, nil); !errors.Is(err, heph.ErrTaskLost) || cancelled {
		t.Fatalf("heartbeat of the lost lease: %v, %v; want ErrTaskLost", cancelled, err)
	}
	if err := e.c.CompleteRemote(ctx, first.Token, json.RawMessage(`"from a"`)); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("completion of the lost lease: %v, want ErrTaskLost", err)
	}
	if err := e.c.FailRemote(ctx, first.Token, "a gives up", false, nil); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("failure of the lost lease: %v, want ErrTaskLost", err)
	}
	bw.complete(second, `"from b"`)
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"work":"from b"}`)
	h := e.history(r.ID)
	if count(h, hephtype.EventStepCompleted, "work") != 1 || count(h, hephtype.EventStepStarted, "work") != 1 {
		t.Fatalf("history %v: want the step started and completed once", entries(h))
	}
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepStarted {
			if d := startedOf(t, ev); d.Worker != "b" || !d.Reexecution || d.Claim != 2 {
				t.Fatalf("step_started %s: want worker b's re-execution (claim 2)", ev.Data)
			}
		}
	}
}

// An attempt that runs past the step's timeout is failed as timed out,
// whether its worker heartbeats or completes late, and retried per the
// step's policy; the late output is dropped.
func testRemoteDeadline(t *testing.T, b Backend) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, b, func(c *heph.Config) { c.Clock = fc }, remoteOnly("remote-late", flow.Timeout(time.Minute),
		flow.Retry(flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Jitter: -1})))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "remote-late", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "slow", []string{"work"}, nil)
	w.claim.Lease = time.Hour
	tk := w.next()
	if !tk.Deadline.Equal(tk.LeaseUntil.Add(-time.Hour).Add(time.Minute)) {
		t.Fatalf("deadline %v, want the claim plus 1m (lease until %v)", tk.Deadline, tk.LeaseUntil)
	}
	fc.Advance(2 * time.Minute)
	if cancelled, err := e.c.HeartbeatRemote(ctx, tk.Token, nil); !errors.Is(err, heph.ErrTaskLost) || cancelled {
		t.Fatalf("heartbeat past the deadline: %v, %v; want ErrTaskLost", cancelled, err)
	}
	fc.Advance(time.Second) // the retry's backoff
	tk = w.next()
	wantTask(t, tk, heph.RemoteStep, "work", "work", 2)
	fc.Advance(2 * time.Minute)
	if err := e.c.CompleteRemote(ctx, tk.Token, json.RawMessage(`"late"`)); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("completion past the deadline: %v; want ErrTaskLost", err)
	}
	got := e.waitStatus(r.ID, heph.StatusFailed)
	if !strings.Contains(got.Error, "timed out after 1m0s") {
		t.Fatalf("run error %q does not tell the timeout", got.Error)
	}
	if n := count(e.history(r.ID), hephtype.EventStepFailed, "work"); n != 2 {
		t.Fatalf("%d failed attempts, want 2", n)
	}
}

// Cancelling the run while a worker holds its task: the heartbeat says
// so, and the completion writes nothing.
func testRemoteCancel(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, remoteOnly("remote-cancel"))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "remote-cancel", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "w1", []string{"work"}, nil)
	tk := w.next()
	if cancelled, err := e.c.HeartbeatRemote(ctx, tk.Token, nil); err != nil || cancelled {
		t.Fatalf("heartbeat before the cancel: %v, %v", cancelled, err)
	}
	if err := e.c.CancelRun(ctx, r.ID, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	if cancelled, err := e.c.HeartbeatRemote(ctx, tk.Token, nil); err != nil || !cancelled {
		t.Fatalf("heartbeat after the cancel: %v, %v; want cancelled", cancelled, err)
	}
	if err := e.c.CompleteRemote(ctx, tk.Token, json.RawMessage(`1`)); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("completion after the cancel: %v, want ErrTaskLost", err)
	}
	got := e.waitStatus(r.ID, heph.StatusCancelled)
	if n := count(e.history(r.ID), hephtype.EventStepCompleted, ""); n != 0 {
		t.Fatalf("%d steps completed in a cancelled run", n)
	}
	_ = got
}

// RemoteSleeper sleeps, then quotes remotely.
var RemoteSleeper = workflow.New("remote_sleeper", func(ctx workflow.Context, item string) (int, error) {
	if err := workflow.Sleep(ctx, time.Hour); err != nil {
		return 0, err
	}
	return RemoteQuote.Execute(ctx, item)
})

// A remote worker's claim is strict: a due workflow timer (a task any
// in-process worker runs) is never handed to it.
func testRemoteStrictClaim(t *testing.T, b Backend) {
	fc := clock.NewFake(time.Now())
	st, _ := b.New(t)
	c := startClient(t, st, func(c *heph.Config) { c.Clock = fc })
	if err := c.RegisterWorkflows(RemoteSleeper); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	r, err := c.StartWorkflow(ctx, "remote_sleeper", "tea", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the timer, then stop the client: nobody in the process
	// claims it once it is due.
	for {
		h, err := c.History(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if count(h, hephtype.EventTimerStarted, "") == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the workflow started no timer")
		case <-time.After(5 * time.Millisecond):
		}
	}
	stopClient(c)
	fc.Advance(2 * time.Hour)
	// A server's client, with nothing registered, serves the remote
	// worker.
	server, err := heph.New(&heph.Config{Store: st, Clock: fc, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer stopClient(server)
	ts, err := server.ClaimRemote(ctx, &heph.RemoteClaim{WorkerID: "strict", Activities: []string{"remote_quote"}, Max: 10})
	if err != nil || len(ts) != 0 {
		t.Fatalf("a strict claim got %d tasks, %v; want none (the only ready task is a workflow timer)", len(ts), err)
	}
	// The timer was there to take, for a claim that is not strict.
	lenient, err := st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"default"}, Handlers: []string{"activity:remote_quote"},
		Owner: "lenient", Limit: 10, LeaseFor: time.Minute, Now: fc.Now()})
	if err != nil || len(lenient) != 1 || lenient[0].Kind != store.TaskWorkflowTimer {
		t.Fatalf("a lenient claim got %d tasks, %v; want the timer", len(lenient), err)
	}
}

// Tokens that ClaimRemote did not hand out are refused, writing nothing.
func testRemoteInvalidToken(t *testing.T, b Backend) {
	e := newEnv(t, b, nil)
	ctx := ctxT(t)
	for _, tok := range []string{"", "garbage!", "Z2FyYmFnZQ", strings.Repeat("A", 2000)} {
		if _, err := e.c.HeartbeatRemote(ctx, tok, nil); !errors.Is(err, heph.ErrInvalidToken) {
			t.Errorf("heartbeat with %.20q: %v, want ErrInvalidToken", tok, err)
		}
		if err := e.c.CompleteRemote(ctx, tok, nil); !errors.Is(err, heph.ErrInvalidToken) {
			t.Errorf("complete with %.20q: %v, want ErrInvalidToken", tok, err)
		}
		if err := e.c.FailRemote(ctx, tok, "x", true, nil); !errors.Is(err, heph.ErrInvalidToken) {
			t.Errorf("fail with %.20q: %v, want ErrInvalidToken", tok, err)
		}
	}
	for _, p := range []*heph.RemoteClaim{
		nil, {}, {WorkerID: "w"}, {WorkerID: "w", Actions: []string{""}}, {WorkerID: "w", Actions: []string{"a"}, Max: MaxRemote + 1},
		{WorkerID: "w", Actions: []string{"a"}, Lease: -time.Second}, {WorkerID: "w", Actions: []string{"a"}, Wait: -time.Second},
	} {
		if _, err := e.c.ClaimRemote(ctx, p); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("claim %+v: %v, want ErrInvalidInput", p, err)
		}
	}
}

// MaxRemote is heph.MaxRemoteClaim, for the table above.
const MaxRemote = heph.MaxRemoteClaim

// Flow control holds for remote claims: a queue limited to one running
// task hands one out at a time, however many a worker asks for.
func testRemoteFlowControl(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, remoteOnly("remote-limited", flow.Queue("limited")))
	ctx := ctxT(t)
	if err := e.c.SetQueue(ctx, "limited", heph.QueueOptions{MaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		r, err := e.c.StartRun(ctx, "remote-limited", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	w := newRemoteWorker(t, e.c, "greedy", []string{"work"}, nil)
	w.claim.Queues, w.claim.Max = []string{"limited"}, 10
	for range 3 {
		ts, err := e.c.ClaimRemote(ctx, &w.claim)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 {
			t.Fatalf("claimed %d tasks of a queue limited to 1 running", len(ts))
		}
		again, err := e.c.ClaimRemote(ctx, &heph.RemoteClaim{WorkerID: "greedy", Actions: []string{"work"}, Queues: []string{"limited"}, Max: 10})
		if err != nil || len(again) != 0 {
			t.Fatalf("a second claim while one runs got %d tasks, %v", len(again), err)
		}
		w.complete(ts[0], `1`)
	}
	for _, id := range ids {
		e.waitStatus(id, heph.StatusCompleted)
	}
}
