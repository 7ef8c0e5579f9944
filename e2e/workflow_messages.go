package e2e

// Signals, updates and queries of code-first workflows.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// signalWorkflow returns collect_signals, which runs slow_step (blocked
// until the gate opens), then waits for three x signals and a y.
func signalWorkflow(g *gate) (*workflow.Definition[struct{}, []int], *workflow.Activity[struct{}, string]) {
	slow := workflow.NewActivity("slow_step", func(ctx context.Context, _ struct{}) (string, error) {
		return "done", g.wait(ctx)
	})
	return workflow.New("collect_signals", func(ctx workflow.Context, _ struct{}) ([]int, error) {
		if _, err := slow.Execute(ctx, struct{}{}); err != nil {
			return nil, err
		}
		var got []int
		for range 3 {
			v, err := workflow.WaitSignal[int](ctx, "x")
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		y, err := workflow.WaitSignal[int](ctx, "y")
		if err != nil {
			return nil, err
		}
		return append(got, y), nil
	}), slow
}

func testWfSignalOrder(t *testing.T, b Backend) {
	g := newGate()
	wf, slow := signalWorkflow(g)
	e := newWfEnv(t, b, nil, wfs(wf), slow)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Before the wait; then while the activity runs.
	for _, s := range []struct {
		name string
		v    int
	}{{"y", 9}, {"x", 1}} {
		if err := r.Signal(ctx, s.name, s.v); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the activity to run", func() bool { return g.waiting.Load() == 1 })
	if err := r.Signal(ctx, "x", 2); err != nil {
		t.Fatal(err)
	}
	g.open()
	waitFor(t, "the workflow to wait for the third x", func() bool {
		h := e.history(r.ID)
		return count(h, hephtype.EventStepCompleted, "") == 1 && h[len(h)-1].Kind != hephtype.EventStepCompleted
	})
	if err := r.Signal(ctx, "x", 3); err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 9}, out); diff != "" {
		t.Fatalf("output (-want +got):\n%s", diff)
	}
}

func testWfSignalWithStart(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Counter))
	ctx := ctxT(t)
	r1, err := heph.SignalWithStartWorkflow(ctx, e.c, Counter, "c1", "increment", nil, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := heph.SignalWithStartWorkflow(ctx, e.c, Counter, "c1", "increment", nil, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID != r2.ID {
		t.Fatalf("two runs for one workflow id: %s and %s", r1.ID, r2.ID)
	}
	if err := r1.Signal(ctx, "done", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := r1.Get(ctx); err != nil || got != 2 {
		t.Fatalf("output %d, %v; want 2", got, err)
	}
	// The id is free again once the run ended.
	r3, err := heph.SignalWithStartWorkflow(ctx, e.c, Counter, "c1", "done", nil, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r3.Get(ctx); err != nil || got != 0 || r3.ID == r1.ID {
		t.Fatalf("new run %s: %d, %v", r3.ID, got, err)
	}
}

func testWfUpdateRejection(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(ShoppingCart, Counter), Charge, Refund, SendReceipt)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, ShoppingCart, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := e.history(r.ID)
	runBefore, _ := e.st.GetRun(ctx, r.ID)
	for i := range 3 {
		_, err := heph.Update[int](ctx, e.c, r.ID, "add_item", Item{SKU: fmt.Sprint("bad", i)}, nil)
		if !errors.As(err, new(*heph.UpdateRejectedError)) {
			t.Fatalf("rejection %d: %v", i, err)
		}
	}
	// Not accepted in this phase.
	confirm := &heph.UpdateOptions{ID: "confirm-1"}
	if _, err := heph.Update[string](ctx, e.c, r.ID, "confirm", nil, confirm); !errors.Is(err, heph.ErrUpdateNotAccepted) {
		t.Fatalf("confirm while open: %v, want ErrUpdateNotAccepted", err)
	}
	after := e.history(r.ID)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("rejected updates changed the history (-before +after):\n%s", diff)
	}
	if runAfter, _ := e.st.GetRun(ctx, r.ID); runAfter.Seq != runBefore.Seq {
		t.Fatalf("the run moved from event %d to %d", runBefore.Seq, runAfter.Seq)
	}
	// A rejection wrote nothing, so its id may be sent again: once the
	// cart confirms, the same update id is accepted.
	if err := r.Signal(ctx, "checkout", nil); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, e.c, r.ID, func(s CartStatus) bool { return s.Phase == "confirming" })
	if got, err := heph.Update[string](ctx, e.c, r.ID, "confirm", nil, confirm); err != nil || got != "ok" {
		t.Fatalf("confirm-1 sent again while confirming: %q, %v; want ok", got, err)
	}
	// An update outside any phase is rejected too.
	c, err := heph.StartWorkflow(ctx, e.c, Counter, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heph.Update[int](ctx, e.c, c.ID, "add_item", Item{SKU: "ABC-123"}, nil); !errors.Is(err, heph.ErrUpdateNotAccepted) {
		t.Fatalf("update no phase handles: %v, want ErrUpdateNotAccepted", err)
	}
}

func testWfUpdateIdempotent(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(ShoppingCart), Charge, Refund, SendReceipt)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, ShoppingCart, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := &heph.UpdateOptions{ID: "add-once"}
	for range 3 {
		n, err := heph.Update[int](ctx, e.c, r.ID, "add_item", Item{SKU: "ABC-123", Price: 1}, opts)
		if err != nil || n != 1 {
			t.Fatalf("add_item: %d, %v; want 1 each time", n, err)
		}
	}
	if n := count(e.history(r.ID), hephtype.EventUpdateAccepted, ""); n != 1 {
		t.Fatalf("%d update_accepted events, want 1", n)
	}
}

func testWfQueryDuringActivity(t *testing.T, b Backend) {
	g := newGate()
	create := workflow.NewActivity("accounts.create", func(ctx context.Context, userID string) (Account, error) {
		return Account{ID: "acct-" + userID}, g.wait(ctx)
	})
	e := newWfEnv(t, b, nil, wfs(Onboarding), create, SendWelcome)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, Onboarding, OnboardingInput{UserID: "u2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the activity to run", func() bool { return g.waiting.Load() == 1 })
	for range 5 {
		got, err := heph.Query[OnboardingStatus](ctx, e.c, r.ID)
		if err != nil || got.Step != "creating_account" {
			t.Fatalf("query during the activity: %+v, %v", got, err)
		}
	}
	g.open()
	if _, err := r.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := heph.Query[OnboardingStatus](ctx, e.c, r.ID); got.Step != "done" {
		t.Fatalf("status %+v", got)
	}
}

func testWfUpdateFails(t *testing.T, b Backend) {
	check := workflow.NewActivity("check", func(ctx context.Context, n int) (int, error) {
		if n > 100 {
			return 0, flow.NonRetryable(errors.New("too big"))
		}
		return n, nil
	})
	wf := workflow.New("adder", func(ctx workflow.Context, _ struct{}) (int, error) {
		return workflow.Phase(ctx, 0,
			workflow.OnUpdate("add", func(ctx workflow.Context, n int, sum int) (workflow.Reply[int, int], error) {
				if n < 0 {
					return workflow.Reply[int, int]{}, errors.New("negative")
				}
				return workflow.Respond(sum+n, sum+n), nil
			}),
			workflow.OnUpdate("add_checked", func(ctx workflow.Context, n int, sum int) (workflow.Reply[int, int], error) {
				return workflow.RespondAsync(sum, func(ctx workflow.Context) (int, error) {
					v, err := check.Execute(ctx, n)
					if err != nil {
						return 0, err
					}
					return workflow.UpdateState(ctx, func(sum int) (int, int) { return sum + v, sum + v }), nil
				}), nil
			}),
			workflow.OnSignal("stop", func(ctx workflow.Context, _ struct{}, sum int) workflow.Next[int] {
				return workflow.Stop(sum)
			}),
		)
	})
	e := newWfEnv(t, b, nil, wfs(wf), check)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var fe *heph.UpdateFailedError
	if _, err := heph.Update[int](ctx, e.c, r.ID, "add", -1, nil); !errors.As(err, &fe) || fe.Message != "negative" {
		t.Fatalf("a failing sync handler: %v", err)
	}
	if _, err := heph.Update[int](ctx, e.c, r.ID, "add_checked", 1000, nil); !errors.As(err, &fe) || !strings.Contains(fe.Message, "too big") {
		t.Fatalf("a failing async handler: %v", err)
	}
	// The workflow goes on.
	if n, err := heph.Update[int](ctx, e.c, r.ID, "add", 2, nil); err != nil || n != 2 {
		t.Fatalf("add: %d, %v", n, err)
	}
	if n, err := heph.Update[int](ctx, e.c, r.ID, "add_checked", 3, nil); err != nil || n != 5 {
		t.Fatalf("add_checked: %d, %v", n, err)
	}
	if err := r.Signal(ctx, "stop", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Get(ctx); err != nil || n != 5 {
		t.Fatalf("result %d, %v", n, err)
	}
}

// testWfSignalStorm sends many signals at once, from a client that does not
// decide (no cached instance: each signal is appended for a decision task)
// and from the worker client (which decides at once): decisions conflict
// and are made again; no signal is lost.
func testWfSignalStorm(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Counter))
	ctx := ctxT(t)
	front, err := heph.New(&heph.Config{Store: e.st, Queues: map[string]int{"other": 1}, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = front.Stop(ctx) }()
	if err := front.RegisterWorkflows(Counter); err != nil {
		t.Fatal(err)
	}
	r, err := heph.StartWorkflow(ctx, e.c, Counter, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const senders, each = 8, 25
	var wg sync.WaitGroup
	for g := range senders {
		c := []*heph.Client{front, e.c}[g%2]
		wg.Go(func() {
			for range each {
				if err := c.SignalWorkflow(ctx, r.ID, "increment", nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := front.SignalWorkflow(ctx, r.ID, "done", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Get(ctx); err != nil || n != senders*each {
		t.Fatalf("count %d, %v; want %d", n, err, senders*each)
	}
}
