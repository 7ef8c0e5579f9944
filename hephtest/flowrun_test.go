package hephtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

type Request struct {
	Amount int `json:"amount"`
}

type Decision struct {
	By string `json:"by"`
}

// approvalFlow: submit, then wait for an approval (or time out after a
// day), then book or escalate.
func approvalFlow(t *testing.T) *flow.Flow {
	t.Helper()
	b := flow.New("approval")
	flow.Step(b, "submit", func(ctx context.Context, r Request) (Request, error) { return r, nil })
	flow.EventStep(b, "approve", func(ctx context.Context, r Request) (flow.Result[Decision], error) {
		if r.Amount < 100 {
			return flow.Emit("approved", Decision{By: "auto"}), nil
		}
		return flow.Wait[Decision](), nil
	}, flow.Events("approved", "rejected"), flow.Waits(24*time.Hour))
	flow.Step(b, "book", func(ctx context.Context, r Request) (string, error) {
		d, err := flow.Output[Decision](ctx, "approve")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("booked %d, approved by %s", r.Amount, d.By), nil
	})
	flow.Step(b, "escalate", func(ctx context.Context, r Request) (string, error) { return "escalated", nil })
	f, err := b.Start("submit").
		Edge("submit", flow.EventOK, "approve").
		Edge("approve", "approved", "book").
		Edge("approve", "rejected", flow.Done).
		Edge("approve", flow.EventTimeout, "escalate").
		Edge("book", flow.EventOK, flow.Done).
		Edge("escalate", flow.EventOK, flow.Done).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func kinds(run *hephtest.FlowRun) []hephtype.EventKind {
	var out []hephtype.EventKind
	for _, h := range run.History() {
		out = append(out, h.Kind)
	}
	return out
}

func stepStatus(t *testing.T, run *hephtest.FlowRun, name string) hephtype.StepStatus {
	t.Helper()
	st, ok := run.Step(name)
	if !ok {
		t.Fatalf("no step %q", name)
	}
	return st.Status
}

func TestNoWait(t *testing.T) {
	run, err := hephtest.RunFlow(context.Background(), approvalFlow(t), Request{Amount: 5})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || string(run.Output()) != `{"book":"booked 5, approved by auto"}` {
		t.Fatalf("status %s, output %s", run.Status(), run.Output())
	}
	if stepStatus(t, run, "escalate") != hephtype.StepSkipped {
		t.Errorf("escalate is %s, want skipped", stepStatus(t, run, "escalate"))
	}
}

func TestWaitThenResume(t *testing.T) {
	ctx := context.Background()
	run, err := hephtest.RunFlow(ctx, approvalFlow(t), Request{Amount: 500})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusWaiting || stepStatus(t, run, "approve") != hephtype.StepWaiting {
		t.Fatalf("status %s, approve %s; want waiting", run.Status(), stepStatus(t, run, "approve"))
	}
	if !run.TimerArmed("approve") {
		t.Fatal("the approval timeout is not armed")
	}
	if run.Calls["book"] != 0 {
		t.Fatal("book ran before the approval")
	}

	// Refused resumes change nothing.
	if err := run.Resume(ctx, "approve", "maybe", nil); err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("resume with an undeclared event: err = %v", err)
	}
	if err := run.Resume(ctx, "submit", flow.EventOK, nil); err == nil {
		t.Error("resumed a step that is not waiting")
	}
	if err := run.Resume(ctx, "approve", "approved", make(chan int)); err == nil {
		t.Error("resumed with a payload that does not encode")
	}
	if err := run.FireTimer(ctx, "submit"); err == nil || !strings.Contains(err.Error(), "no armed timer") {
		t.Errorf("FireTimer on a step without a timer: err = %v", err)
	}
	if run.Status() != hephtype.StatusWaiting {
		t.Fatalf("a refused resume changed the status to %s", run.Status())
	}

	if err := run.Resume(ctx, "approve", "approved", Decision{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || string(run.Output()) != `{"book":"booked 500, approved by alice"}` {
		t.Fatalf("status %s, output %s", run.Status(), run.Output())
	}
	if run.TimerArmed("approve") {
		t.Error("the timer is still armed after the resume")
	}
	if st, _ := run.Step("approve"); st.Event != "approved" || string(st.Output) != `{"by":"alice"}` {
		t.Errorf("approve: %+v", st)
	}
	want := []hephtype.EventKind{hephtype.EventStepWaiting, hephtype.EventTimerStarted, hephtype.EventTimerCancelled, hephtype.EventStepResumed, hephtype.EventRunCompleted}
	if got := kinds(run); !isSubsequence(want, got) {
		t.Errorf("history %v lacks %v in order", got, want)
	}
	if err := run.Resume(ctx, "approve", "approved", nil); err == nil {
		t.Error("resumed a finished run")
	}
}

func TestWaitThenTimeout(t *testing.T) {
	ctx := context.Background()
	run, err := hephtest.RunFlow(ctx, approvalFlow(t), Request{Amount: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.FireTimer(ctx, "approve"); err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || string(run.Output()) != `{"escalate":"escalated"}` {
		t.Fatalf("status %s, output %s", run.Status(), run.Output())
	}
	if st, _ := run.Step("approve"); st.Event != flow.EventTimeout {
		t.Errorf("approve ended with %q, want timeout", st.Event)
	}
	if stepStatus(t, run, "book") != hephtype.StepSkipped {
		t.Errorf("book is %s, want skipped", stepStatus(t, run, "book"))
	}
	if run.TimerArmed("approve") {
		t.Error("timer still armed")
	}
	if err := run.FireTimer(ctx, "approve"); err == nil {
		t.Error("fired a timer twice")
	}
	if got := kinds(run); !slices.Contains(got, hephtype.EventTimerFired) {
		t.Errorf("history %v has no timer_fired", got)
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	run, err := hephtest.RunFlow(ctx, approvalFlow(t), Request{Amount: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Cancel("customer changed their mind"); err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCancelled || run.Err() != "customer changed their mind" {
		t.Fatalf("status %s, err %q", run.Status(), run.Err())
	}
	if stepStatus(t, run, "approve") != hephtype.StepCancelled || run.TimerArmed("approve") {
		t.Errorf("approve is %s, timer armed %v", stepStatus(t, run, "approve"), run.TimerArmed("approve"))
	}
	if err := run.Cancel("again"); err == nil {
		t.Error("canceled a canceled run")
	}
	if err := run.Resume(ctx, "approve", "approved", nil); err == nil {
		t.Error("resumed a canceled run")
	}
	if got := kinds(run); got[len(got)-1] != hephtype.EventRunCancelled {
		t.Errorf("history ends with %v", got)
	}
}

// flaky fails its first n calls.
func flaky(n int, calls *int, err error) func(ctx context.Context, in any) (string, error) {
	return func(ctx context.Context, in any) (string, error) {
		*calls++
		info, _ := flow.CallInfo(ctx)
		if info.Attempt != *calls {
			return "", fmt.Errorf("attempt %d on call %d", info.Attempt, *calls)
		}
		if *calls <= n {
			return "", fmt.Errorf("call %d: %w", *calls, err)
		}
		return "charged", nil
	}
}

var errDown = errors.New("payment service down")

func TestRetriesThenSuccess(t *testing.T) {
	var calls int
	b := flow.New("retry")
	flow.Step(b, "charge", flaky(2, &calls, errDown), flow.Retry(flow.RetryPolicy{MaxAttempts: 3}))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || run.Calls["charge"] != 3 || calls != 3 {
		t.Fatalf("status %s (%s), Calls %v", run.Status(), run.Err(), run.Calls)
	}
	if st, _ := run.Step("charge"); st.Attempt != 3 || string(st.Output) != `"charged"` {
		t.Errorf("charge: %+v", st)
	}
	var failed, retrying int
	for _, h := range run.History() {
		switch h.Kind {
		case hephtype.EventStepFailed:
			failed++
			if !strings.Contains(h.Error, errDown.Error()) || !strings.Contains(h.String(), "charge") {
				t.Errorf("history entry %v lacks the error", h)
			}
		case hephtype.EventStepRetrying:
			retrying++
		}
	}
	if failed != 2 || retrying != 2 {
		t.Errorf("history has %d failures and %d retries, want 2 and 2: %v", failed, retrying, run.History())
	}
}

func TestRetriesExhausted(t *testing.T) {
	var calls int
	b := flow.New("retry")
	flow.Step(b, "charge", flaky(100, &calls, errDown), flow.Retry(flow.RetryPolicy{MaxAttempts: 4}))
	flow.Step(b, "ship", func(ctx context.Context, in any) (any, error) { return nil, nil }, flow.DependsOn("charge"))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusFailed || run.Calls["charge"] != 4 {
		t.Fatalf("status %s, Calls %v", run.Status(), run.Calls)
	}
	if !strings.Contains(run.Err(), `"charge"`) || !strings.Contains(run.Err(), errDown.Error()) {
		t.Errorf("run error %q does not name the step and its error", run.Err())
	}
	if stepStatus(t, run, "charge") != hephtype.StepFailed || run.Calls["ship"] != 0 {
		t.Errorf("charge is %s, ship called %d times", stepStatus(t, run, "charge"), run.Calls["ship"])
	}
	if got := kinds(run); got[len(got)-1] != hephtype.EventRunFailed {
		t.Errorf("history ends with %v", got)
	}
}

func TestNonRetryableFailsAtOnce(t *testing.T) {
	var calls int
	b := flow.New("retry")
	flow.Step(b, "charge", flaky(100, &calls, flow.NonRetryable(errDown)), flow.Retry(flow.RetryPolicy{MaxAttempts: 5}))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusFailed || run.Calls["charge"] != 1 {
		t.Fatalf("status %s, Calls %v", run.Status(), run.Calls)
	}
}

func TestFailureRouting(t *testing.T) {
	var calls int
	b := flow.New("compensate")
	flow.Step(b, "charge", flaky(100, &calls, errDown), flow.Retry(flow.RetryPolicy{MaxAttempts: 2}))
	flow.Step(b, "ship", func(ctx context.Context, in any) (string, error) { return "shipped", nil })
	flow.Step(b, "refund", func(ctx context.Context, in any) (string, error) {
		failure, err := flow.Output[map[string]string](ctx, "charge")
		if err != nil {
			return "", err
		}
		return "refunded after: " + failure["error"], nil
	})
	f := b.Start("charge").
		Edge("charge", flow.EventOK, "ship").
		Edge("charge", flow.EventFailed, "refund").
		Edge("ship", flow.EventOK, flow.Done).
		Edge("refund", flow.EventOK, flow.Done).
		MustBuild()
	run, err := hephtest.RunFlow(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted {
		t.Fatalf("status %s (%s): a routed failure must not fail the run", run.Status(), run.Err())
	}
	if run.Calls["charge"] != 2 || run.Calls["refund"] != 1 || run.Calls["ship"] != 0 {
		t.Errorf("Calls %v", run.Calls)
	}
	if st, _ := run.Step("charge"); st.Event != flow.EventFailed {
		t.Errorf("charge ended with %q", st.Event)
	}
	var out map[string]string
	if err := json.Unmarshal(run.Output(), &out); err != nil || !strings.Contains(out["refund"], errDown.Error()) {
		t.Errorf("output %s, want the refund to see the charge's error", run.Output())
	}
	if stepStatus(t, run, "ship") != hephtype.StepSkipped {
		t.Errorf("ship is %s", stepStatus(t, run, "ship"))
	}
}

func TestMapStepRetriesElements(t *testing.T) {
	failed := map[int]bool{}
	b := flow.New("map")
	flow.Map(b, "double", func(ctx context.Context, n int) (int, error) {
		info, _ := flow.CallInfo(ctx)
		if n == 2 && !failed[n] {
			failed[n] = true
			return 0, errors.New("flaky element")
		}
		if info.Index < 0 || info.IdempotencyKey != fmt.Sprintf("double/%d", info.Index) {
			return 0, fmt.Errorf("bad call info %+v", info)
		}
		return n * 2, nil
	})
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), []int{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || string(run.Output()) != `{"double":[2,4,6]}` || run.Calls["double"] != 4 {
		t.Fatalf("status %s (%s), output %s, Calls %v", run.Status(), run.Err(), run.Output(), run.Calls)
	}

	empty, err := hephtest.RunFlow(context.Background(), b.MustBuild(), []int{})
	if err != nil || empty.Status() != hephtype.StatusCompleted || string(empty.Output()) != `{"double":[]}` || empty.Calls["double"] != 0 {
		t.Fatalf("empty array: %v, status %s, output %s, Calls %v", err, empty.Status(), empty.Output(), empty.Calls)
	}

	notArray, err := hephtest.RunFlow(context.Background(), b.MustBuild(), map[string]int{"n": 1})
	if err != nil || notArray.Status() != hephtype.StatusFailed || !strings.Contains(notArray.Err(), "not a JSON array") {
		t.Fatalf("object input: %v, status %s, err %q", err, notArray.Status(), notArray.Err())
	}
}

func TestRunFlowErrors(t *testing.T) {
	b := flow.New("f")
	flow.Step(b, "a", func(ctx context.Context, in any) (any, error) { return nil, nil })
	f := b.MustBuild()
	if _, err := hephtest.RunFlow(context.Background(), f, make(chan int)); err == nil {
		t.Error("RunFlow accepted input that does not encode")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	run, err := hephtest.RunFlow(ctx, f, nil)
	if !errors.Is(err, context.Canceled) || run.Calls["a"] != 0 {
		t.Errorf("canceled context: err %v, Calls %v", err, run.Calls)
	}
	if _, ok := run.Step("nope"); ok {
		t.Error("Step found a step that does not exist")
	}
}

func TestHistoryString(t *testing.T) {
	h := hephtest.HistoryEntry{Kind: hephtype.EventStepFailed, Step: "charge", Event: "ok", Error: "boom"}
	if got := h.String(); got != "step_failed charge -> ok (boom)" {
		t.Errorf("String() = %q", got)
	}
	if got := (hephtest.HistoryEntry{Kind: hephtype.EventRunStarted}).String(); got != "run_started" {
		t.Errorf("String() = %q", got)
	}
	// History returns a copy.
	run, _ := hephtest.RunFlow(context.Background(), approvalFlow(t), Request{Amount: 1})
	hist := run.History()
	hist[0].Kind = "tampered"
	if run.History()[0].Kind != hephtype.EventRunStarted {
		t.Error("History exposes the run's own slice")
	}
}

// isSubsequence reports whether want appears in got in order.
func isSubsequence[T comparable](want, got []T) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// Heartbeat details a failed attempt recorded reach the next attempt of the
// same step (or element), as in the durable runtime.
func TestRunFlowHeartbeatDetails(t *testing.T) {
	b := flow.New("resume")
	var seen []string
	flow.Map(b, "each", func(ctx context.Context, x int) (int, error) {
		info, _ := flow.CallInfo(ctx)
		done, ok, err := flow.HeartbeatDetails[int](ctx)
		if err != nil {
			return 0, err
		}
		seen = append(seen, fmt.Sprintf("%d/%d:%v:%d", x, info.Attempt, ok, done))
		if info.Attempt == 1 {
			if err := flow.RecordHeartbeat(ctx, x*10); err != nil {
				return 0, err
			}
			return 0, errors.New("crash after progress")
		}
		return done + 1, nil
	}, flow.Retry(flow.RetryPolicy{MaxAttempts: 2}))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if string(run.Output()) != `{"each":[11,21]}` {
		t.Fatalf("output %s (%s)", run.Output(), run.Err())
	}
	want := []string{"1/1:false:0", "2/1:false:0", "1/2:true:10", "2/2:true:20"}
	if !slices.Equal(seen, want) {
		t.Errorf("attempts saw %v, want %v", seen, want)
	}
}
