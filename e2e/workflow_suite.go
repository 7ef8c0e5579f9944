package e2e

// The code-first workflow part of the suite: its table, helpers, and the
// examples of seed 003 (workflow_defs.go) run on a real store.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// testWorkflows runs the code-first workflow tests.
func testWorkflows(t *testing.T, b Backend) {
	runAll(t, b, []subtest{
		{"Onboarding", testWfOnboarding},
		{"Counter", testWfCounter},
		{"ShoppingCart", testWfShoppingCart},
		{"ShoppingCartCancel", testWfShoppingCartCancel},
		{"BatchProcess", testWfBatchProcess},
		{"Inventory", testWfInventory},
		{"EventCollector", testWfEventCollector},
		{"SignalsBufferedInOrder", testWfSignalOrder},
		{"SignalWithStart", testWfSignalWithStart},
		{"SignalWithStartID", testWfSignalWithStartID},
		{"SignalStorm", testWfSignalStorm},
		{"UpdateRejectionWritesNothing", testWfUpdateRejection},
		{"UpdateIdempotent", testWfUpdateIdempotent},
		{"UpdateHandlerFails", testWfUpdateFails},
		{"MessagesFromAnotherClient", testWfRemoteMessages},
		{"ApplicationError", testWfApplicationError},
		{"UpdateWithStart", testWfUpdateWithStart},
		{"UpdateFollowsContinueAsNew", testWfUpdateFollowsContinueAsNew},
		{"QueryDuringLongActivity", testWfQueryDuringActivity},
		{"Patched", testWfPatched},
		{"NonDeterminism", testWfNonDeterminism},
		{"Children", testWfChildren},
		{"CancelCancelsChildren", testWfCancelChildren},
		{"CancelDuringActivity", testWfCancelDuringActivity},
		{"DurableSleep", testWfSleep},
		{"ActivityRetries", testWfActivityRetries},
		{"HeartbeatTimeout", testWfHeartbeatTimeout},
		{"StickyCacheEviction", testWfStickyEviction},
		{"ExportAndReplay", testWfExportAndReplay},
		{"DecisionInAnotherProcess", testWfOtherProcess},
		{"TwoWorkerClients", testWfTwoWorkers},
		{"ChildContinuesAndOrphans", testWfChildChain},
	})
}

// newWfEnv is newEnv for workflows: a client with workers that has ws and
// as registered.
func newWfEnv(t *testing.T, b Backend, mod func(*heph.Config), ws []heph.Workflow, as ...heph.Activity) *env {
	t.Helper()
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, st, mod, ws, as...)
	return e
}

func startWfClient(t *testing.T, st store.Store, mod func(*heph.Config), ws []heph.Workflow, as ...heph.Activity) *heph.Client {
	t.Helper()
	cfg := &heph.Config{Store: st, Queues: map[string]int{"default": 16}, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()}
	if mod != nil {
		mod(cfg)
	}
	c, err := heph.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(ws...); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterActivities(as...); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c) })
	return c
}

func wfs(ws ...heph.Workflow) []heph.Workflow { return ws }

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := ctxT(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitQuery polls a run's published state until want says it is right.
func waitQuery[T any](t *testing.T, c *heph.Client, runID string, want func(T) bool) T {
	t.Helper()
	var got T
	waitFor(t, fmt.Sprintf("the published state of run %s", runID), func() bool {
		var err error
		got, err = heph.Query[T](ctxT(t), c, runID)
		if err != nil {
			t.Fatal(err)
		}
		return want(got)
	})
	return got
}

func kinds(h []heph.HistoryEvent) []string {
	var ks []string
	for _, e := range h {
		if e.Kind != hephtype.EventStepRetrying {
			ks = append(ks, string(e.Kind))
		}
	}
	return ks
}

// gate blocks activity code until opened, and counts who waits on it.
type gate struct {
	ch      chan struct{}
	once    sync.Once
	waiting atomic.Int32
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) wait(ctx context.Context) error {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func testWfOnboarding(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Onboarding), CreateAccount, SendWelcome)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, Onboarding, OnboardingInput{UserID: "u1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out["account_id"] != "acct-u1" {
		t.Fatalf("output %v", out)
	}
	if got, _ := heph.Query[OnboardingStatus](ctx, e.c, r.ID); got.Step != "done" {
		t.Fatalf("status %+v, want done", got)
	}
	want := []string{"run_started", "decision", "step_scheduled", "step_started", "step_completed", "decision", "step_scheduled",
		"step_started", "step_completed", "decision", "run_completed"}
	if diff := cmp.Diff(want, kinds(e.history(r.ID))); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
	run, err := e.c.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, run, heph.StatusCompleted)
}

func testWfCounter(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Counter))
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, Counter, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"increment", "increment", "decrement", "increment"} {
		if err := r.Signal(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	if got, _ := heph.Query[int](ctx, e.c, r.ID); got != 0 {
		t.Fatalf("value %d before done: the phase state is not published", got)
	}
	if err := r.Signal(ctx, "done", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Get(ctx); err != nil || got != 2 {
		t.Fatalf("output %d, %v; want 2", got, err)
	}
	if got, _ := heph.Query[int](ctx, e.c, r.ID); got != 2 {
		t.Fatalf("value %d, want 2", got)
	}
	if err := r.Signal(ctx, "increment", nil); !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("signal to a finished run: %v, want ErrRunFinished", err)
	}
}

func testWfShoppingCart(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(ShoppingCart), Charge, Refund, SendReceipt)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, ShoppingCart, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	add := func(it Item) (int, error) { return heph.Update[int](ctx, e.c, r.ID, "add_item", it, nil) }
	if n, err := add(Item{SKU: "ABC-123", Price: 30}); err != nil || n != 1 {
		t.Fatalf("add_item: %d, %v", n, err)
	}
	before := len(e.history(r.ID))
	_, err = add(Item{SKU: "bad sku", Price: 1})
	var rej *heph.UpdateRejectedError
	if !errors.As(err, &rej) || rej.Err == nil || rej.Err.Error() != "invalid SKU" {
		t.Fatalf("add_item with a bad SKU: %v, want an *UpdateRejectedError with the validator's error", err)
	}
	if after := len(e.history(r.ID)); after != before {
		t.Fatalf("a rejected update wrote %d history events", after-before)
	}
	for _, it := range []Item{{SKU: "XYZ-999", Price: 12}, {SKU: "DEL-000", Price: 100}} {
		if _, err := add(it); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := heph.Update[int](ctx, e.c, r.ID, "remove_item", "DEL-000", nil); err != nil || n != 2 {
		t.Fatalf("remove_item: %d, %v", n, err)
	}
	if got, _ := heph.Query[CartStatus](ctx, e.c, r.ID); got != (CartStatus{Phase: "open", ItemCount: 3}) {
		t.Fatalf("status %+v", got)
	}
	if err := r.Signal(ctx, "checkout", nil); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, e.c, r.ID, func(s CartStatus) bool { return s.Phase == "confirming" })
	if got, _ := heph.Query[CartStatus](ctx, e.c, r.ID); got != (CartStatus{Phase: "confirming", Total: 42}) {
		t.Fatalf("status %+v", got)
	}
	// No phase accepts add_item any more.
	if _, err := add(Item{SKU: "ABC-123", Price: 30}); !errors.Is(err, heph.ErrUpdateNotAccepted) {
		t.Fatalf("add_item while confirming: %v, want ErrUpdateNotAccepted", err)
	}
	if got, err := heph.Update[string](ctx, e.c, r.ID, "confirm", nil, nil); err != nil || got != "ok" {
		t.Fatalf("confirm: %q, %v", got, err)
	}
	out, err := r.Get(ctx)
	if err != nil || out != (CartResult{Total: 42}) {
		t.Fatalf("output %+v, %v", out, err)
	}
	if got, _ := heph.Query[CartStatus](ctx, e.c, r.ID); got.Phase != "done" {
		t.Fatalf("status %+v", got)
	}
	h := e.history(r.ID)
	if n := count(h, hephtype.EventUpdateAccepted, ""); n != 5 {
		t.Fatalf("%d update_accepted events, want 5 (rejections write nothing)", n)
	}
	if n := count(h, hephtype.EventUpdateRejected, ""); n != 0 {
		t.Fatalf("%d update_rejected events, want none", n)
	}
}

func testWfShoppingCartCancel(t *testing.T, b Backend) {
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
	if _, err := heph.Update[string](ctx, e.c, r.ID, "cancel", nil, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Get(ctx); err != nil || !out.Cancelled {
		t.Fatalf("output %+v, %v", out, err)
	}
	if got, _ := heph.Query[CartStatus](ctx, e.c, r.ID); got.Phase != "refunded" {
		t.Fatalf("status %+v", got)
	}
}

func testWfBatchProcess(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(BatchProcess), ProcessItem)
	ctx := ctxT(t)
	out, err := heph.ExecuteWorkflow(ctx, e.c, BatchProcess, BatchInput{Items: []string{"a", "b", "c", "d", "e"}}, nil)
	if err != nil || out.Processed != 5 {
		t.Fatalf("output %+v, %v", out, err)
	}
	bad, err := heph.StartWorkflow(ctx, e.c, BatchProcess, BatchInput{Items: []string{"a", "bad", "c"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Get(ctx)
	var we *heph.WorkflowError
	if !errors.As(err, &we) || we.Message != "1 of 3 items failed" {
		t.Fatalf("error %v, want the workflow's error", err)
	}
	h := e.history(bad.ID)
	// Every branch ran to completion; the three were scheduled at once.
	if n := count(h, hephtype.EventStepCompleted, ""); n != 2 {
		t.Fatalf("%d activities completed, want 2", n)
	}
	if n := count(h, hephtype.EventStepFailed, ""); n != 1 {
		t.Fatalf("%d activities failed, want 1", n)
	}
	if diff := cmp.Diff([]string{"run_started", "decision", "step_scheduled", "step_scheduled", "step_scheduled"}, kinds(h)[:5]); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
}

func testWfInventory(t *testing.T, b Backend) {
	g := newGate()
	price := workflow.NewActivity("pricing.current_price", func(ctx context.Context, sku string) (int, error) {
		if err := g.wait(ctx); err != nil {
			return 0, err
		}
		return PriceOf(sku), nil
	})
	inv := InventoryWorkflow(price)
	e := newWfEnv(t, b, nil, wfs(inv), price)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, inv, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	restocks := []Restock{{"bolt", 5}, {"nut", 7}, {"bolt", 1}}
	replies := make([]StockEntry, len(restocks))
	errs := make([]error, len(restocks))
	var wg sync.WaitGroup
	for i, rs := range restocks {
		wg.Go(func() {
			replies[i], errs[i] = heph.Update[StockEntry](ctx, e.c, r.ID, "restock", rs, &heph.UpdateOptions{ID: fmt.Sprint("r", i)})
		})
	}
	// The three async handlers run concurrently: three price lookups at once.
	waitFor(t, "three concurrent price lookups", func() bool { return g.waiting.Load() == 3 })
	// close stops dispatching, but the phase waits for its handlers.
	if err := r.Signal(ctx, "close", nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusRunning)
	if _, err := heph.Update[StockEntry](ctx, e.c, r.ID, "restock", Restock{"gear", 1}, nil); !errors.Is(err, heph.ErrUpdateNotAccepted) {
		t.Fatalf("restock after close: %v, want ErrUpdateNotAccepted", err)
	}
	g.open()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("restock %d: %v", i, err)
		}
	}
	out, err := heph.GetWorkflow(e.c, inv, r.ID).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]StockEntry{"bolt": {Quantity: 6, Price: 40}, "nut": {Quantity: 7, Price: 30}}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Fatalf("output (-want +got):\n%s", diff)
	}
	if got, _ := heph.Query[map[string]StockEntry](ctx, e.c, r.ID); !cmp.Equal(want, got) {
		t.Fatalf("published %v", got)
	}
	if replies[1] != (StockEntry{Quantity: 7, Price: 30}) {
		t.Fatalf("reply to r1: %+v", replies[1])
	}
	// The bolts: whichever handler ran second saw the first's quantity.
	if q := replies[0].Quantity + replies[2].Quantity; q != 6+5 && q != 6+1 {
		t.Fatalf("bolt replies %+v and %+v", replies[0], replies[2])
	}
}

func testWfEventCollector(t *testing.T, b Backend) {
	// Time is a fake clock: a phase times out when the test says so, never
	// before its signals arrive, however busy the machine.
	fc := clock.NewFake(time.Now())
	e := newWfEnv(t, b, func(c *heph.Config) { c.Clock = fc }, wfs(EventCollector), BatchInsert)
	ctx := ctxT(t)
	in := CollectorInput{Timeout: 300 * time.Millisecond, Generations: 3}
	r, err := heph.StartWorkflow(ctx, e.c, EventCollector, in, &heph.WorkflowOptions{ID: "collector1"})
	if err != nil {
		t.Fatal(err)
	}
	first := r.ID
	for _, ev := range []string{"e1", "e2"} {
		if err := r.Signal(ctx, "event", ev); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both events in the history", func() bool {
		return count(e.history(first), hephtype.EventSignalReceived, "") == 2
	})
	// Nothing stops the first phase: its timeout fires, the events are
	// inserted and the run continues as new with the same workflow id.
	fc.Advance(in.Timeout + time.Millisecond) // past the timer, which the store keeps to the microsecond
	e.waitStatus(first, hephtype.StatusContinued)
	// The run that carries it on is created by a task of its own; the
	// runtime's wait for it polls on the (fake) clock, so wait here.
	waitFor(t, "the second run", func() bool {
		l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: EventCollector.Name()})
		return err == nil && len(l.Runs) == 2
	})
	h := e.history(first)
	if n := count(h, hephtype.EventTimerFired, ""); n != 1 {
		t.Fatalf("%d timer_fired events, want 1", n)
	}
	second, err := e.c.FindWorkflow(ctx, EventCollector.Name(), "collector1")
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first || second.BusinessID != "id::collector1" {
		t.Fatalf("the current run is %s (%s)", second.ID, second.BusinessID)
	}
	// Signals to the first run go to the run that carries it on.
	if err := r.Signal(ctx, "event", "e3"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.SignalWorkflow(ctx, second.ID, "flush", nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(second.ID, hephtype.StatusContinued)
	if n := count(e.history(second.ID), hephtype.EventTimerCancelled, ""); n != 1 {
		t.Fatalf("%d timer_cancelled events in the second run, want 1", n)
	}
	waitFor(t, "the third run", func() bool {
		l, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: EventCollector.Name()})
		return err == nil && len(l.Runs) == 3
	})
	third, err := e.c.FindWorkflow(ctx, EventCollector.Name(), "collector1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.SignalWorkflow(ctx, third.ID, "flush", nil); err != nil {
		t.Fatal(err)
	}
	out, err := r.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out != (CollectorResult{Generations: 3, Inserted: 3}) {
		t.Fatalf("result %+v", out)
	}
}
