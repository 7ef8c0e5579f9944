package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// billCharge is called twice by the billing workflows below.
var billCharge = workflow.NewActivity("charge", func(_ context.Context, amount int) (int, error) { return amount, nil })

// billing charges an amount and then sleeps; the other versions change it.
var (
	billing = workflow.New("billing", func(ctx workflow.Context, amount int) (int, error) {
		n, err := billCharge.Execute(ctx, amount)
		if err != nil {
			return 0, err
		}
		return n, workflow.Sleep(ctx, time.Hour)
	})
	// A billCharge inserted before the original one, with another amount.
	billingDeposit = workflow.New("billing", func(ctx workflow.Context, amount int) (int, error) {
		here("billingDeposit", 1)
		if _, err := billCharge.Execute(ctx, amount/10); err != nil {
			return 0, err
		}
		n, err := billCharge.Execute(ctx, amount)
		if err != nil {
			return 0, err
		}
		return n, workflow.Sleep(ctx, time.Hour)
	})
	// The same billCharge, of another amount.
	billingDouble = workflow.New("billing", func(ctx workflow.Context, amount int) (int, error) {
		here("billingDouble", 1)
		n, err := billCharge.Execute(ctx, 2*amount)
		if err != nil {
			return 0, err
		}
		return n, workflow.Sleep(ctx, time.Hour)
	})
	// The same billCharge, on another queue.
	billingQueue = workflow.New("billing", func(ctx workflow.Context, amount int) (int, error) {
		here("billingQueue", 1)
		n, err := billCharge.WithOptions(workflow.ActivityOptions{Queue: "payments"}).Execute(ctx, amount)
		if err != nil {
			return 0, err
		}
		return n, workflow.Sleep(ctx, time.Hour)
	})
)

// billingHistory runs billing until it sleeps and returns its history.
func billingHistory(t *testing.T) []replay.Event {
	t.Helper()
	e := newEnv(t, modes[0], wfs(billing), billCharge)
	r := e.start(billing, 100)
	e.settle()
	if got := r.Status(); got != hephtype.StatusWaiting {
		t.Fatalf("billing is %s, want waiting on its timer", got)
	}
	return r.History()
}

// replayWith replays history with w and returns its non-determinism error.
func replayWith(t *testing.T, w registered, history []replay.Event) *replay.NonDeterminismError {
	t.Helper()
	in, err := replay.New(&replay.Config{Workflow: wfdef.Of(w), RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	err = in.Replay(history)
	var nde *replay.NonDeterminismError
	if !errors.As(err, &nde) {
		t.Fatalf("replay: %v, want a *NonDeterminismError", err)
	}
	t.Log(err)
	return nde
}

func siteOf(name string) string {
	siteMu.Lock()
	defer siteMu.Unlock()
	return callSite[name]
}

// A changed activity input is non-deterministic: the history records the
// hash of each input.
func TestNonDeterminismChangedInput(t *testing.T) {
	h := billingHistory(t)
	nde := replayWith(t, billingDouble, h)
	if nde.Changed != "input" || !strings.HasPrefix(nde.Old, "sha256:") || !strings.HasPrefix(nde.New, "sha256:") || nde.Old == nde.New {
		t.Fatalf("changed %q from %q to %q, want the input's hash", nde.Changed, nde.Old, nde.New)
	}
	if nde.CommandAt != siteOf("billingDouble") || nde.Recorded != `step_scheduled #1 "charge"` || nde.RunID != "run-1" {
		t.Fatalf("error fields %+v", nde)
	}
	for _, want := range []string{"the input changed", `Execute activity "charge"`, `(run run-1)`, "workflow.Patched"} {
		if !strings.Contains(nde.Error(), want) {
			t.Errorf("the error does not say %q: %s", want, nde.Error())
		}
	}
}

// A changed task queue is non-deterministic.
func TestNonDeterminismChangedQueue(t *testing.T) {
	h := billingHistory(t)
	nde := replayWith(t, billingQueue, h)
	if nde.Changed != "queue" || nde.Old != "the run's queue" || nde.New != `queue "payments"` {
		t.Fatalf("changed %q from %q to %q, want the queue", nde.Changed, nde.Old, nde.New)
	}
	if nde.CommandAt != siteOf("billingQueue") {
		t.Fatalf("located at %q, want %q", nde.CommandAt, siteOf("billingQueue"))
	}
}

// When a call of an activity is inserted before an existing call of the
// same activity, the error points at the inserted call: it is the one
// whose input does not match (the original call, further down, would
// otherwise be blamed for the timer it now stands in front of).
func TestNonDeterminismInsertedCall(t *testing.T) {
	h := billingHistory(t)
	nde := replayWith(t, billingDeposit, h)
	if nde.CommandAt != siteOf("billingDeposit") {
		t.Fatalf("the error points at %q, want the inserted call at %q: %v", nde.CommandAt, siteOf("billingDeposit"), nde)
	}
	if nde.Changed != "input" || nde.Command != `Execute activity "charge" (step_scheduled #1)` {
		t.Fatalf("error fields %+v", nde)
	}
	// And it names the recorded call, in the original workflow.
	if !strings.HasPrefix(nde.RecordedAt, "workflow/nondeterminism_test.go:") {
		t.Fatalf("recorded at %q", nde.RecordedAt)
	}
}

// A history written before entries recorded their call (no call record on
// step_scheduled, no call site on timer_started) still replays: the input
// and the queue are not compared, the name and the duration still are.
func TestNonDeterminismOldHistory(t *testing.T) {
	h := billingHistory(t)
	old := make([]replay.Event, len(h))
	for i, e := range h {
		switch e.Kind {
		case hephtype.EventStepScheduled:
			if !strings.Contains(e.Ref, `"input":"`) {
				t.Fatalf("step_scheduled records no call: %+v", e)
			}
			e.Ref = ""
		case hephtype.EventTimerStarted:
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil || d["at"] == nil {
				t.Fatalf("timer_started records no call site: %s", e.Data)
			}
			delete(d, "at")
			e.Data = mustJSON(t, d)
		}
		old[i] = e
	}
	for _, w := range []registered{billing, billingDouble, billingQueue} {
		in, err := replay.New(&replay.Config{Workflow: wfdef.Of(w)})
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Replay(old); err != nil {
			t.Errorf("an old history does not replay: %v", err)
		}
		in.Close()
	}
	nde := replayWith(t, billingDeposit, old)
	if nde.Changed != "" || nde.RecordedAt != "" || strings.Contains(nde.Error(), "issued at") {
		t.Fatalf("error fields %+v", nde)
	}
	longer := workflow.New("billing", func(ctx workflow.Context, amount int) (int, error) {
		n, err := billCharge.Execute(ctx, amount)
		if err != nil {
			return 0, err
		}
		return n, workflow.Sleep(ctx, 2*time.Hour)
	})
	if nde := replayWith(t, longer, old); nde.Changed != "timer duration" || nde.RecordedAt != "" {
		t.Fatalf("error fields %+v", nde)
	}
}

var (
	kidA     = workflow.New("kid_a", func(ctx workflow.Context, n int) (int, error) { return n, nil })
	kidB     = workflow.New("kid_b", func(ctx workflow.Context, n int) (int, error) { return -n, nil })
	parentV1 = workflow.New("parent", func(ctx workflow.Context, n int) (int, error) {
		m, err := kidA.ExecuteChild(ctx, n)
		if err != nil {
			return 0, err
		}
		return m, workflow.Sleep(ctx, time.Hour)
	})
	parentV2 = workflow.New("parent", func(ctx workflow.Context, n int) (int, error) {
		here("parentV2", 1)
		m, err := kidB.ExecuteChild(ctx, n)
		if err != nil {
			return 0, err
		}
		return m, workflow.Sleep(ctx, time.Hour)
	})
)

// Another child workflow is non-deterministic; both calls are located.
func TestNonDeterminismChangedChild(t *testing.T) {
	e := newEnv(t, modes[0], wfs(parentV1, kidA, kidB))
	r := e.start(parentV1, 7)
	e.settle()
	if got := r.Status(); got != hephtype.StatusWaiting {
		t.Fatalf("parent is %s, want waiting on its timer", got)
	}
	nde := replayWith(t, parentV2, r.History())
	if nde.Changed != "child workflow" || nde.Old != `"kid_a"` || nde.New != `"kid_b"` || nde.RecordedKind != hephtype.EventChildStarted {
		t.Fatalf("error fields %+v", nde)
	}
	if nde.CommandAt != siteOf("parentV2") || !strings.HasPrefix(nde.RecordedAt, "workflow/nondeterminism_test.go:") {
		t.Fatalf("located at %q, recorded at %q", nde.CommandAt, nde.RecordedAt)
	}
	if !strings.Contains(nde.Command, `child workflow "kid_b"`) {
		t.Fatalf("command %q", nde.Command)
	}
}
