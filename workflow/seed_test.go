package workflow_test

// The examples of the Temporalex programming model, written in Go and run
// to completion in memory.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// --- Onboarding: a sequential workflow --------------------------------------

type OnboardingInput struct {
	UserID string `json:"user_id"`
}

type Account struct{ ID string }

type OnboardingStatus struct{ Step string }

var createAccount = workflow.NewActivity("accounts.create", func(ctx context.Context, userID string) (Account, error) {
	return Account{ID: "acct-" + userID}, nil
})

var sendWelcome = workflow.NewActivity("email.send_welcome", func(ctx context.Context, a Account) (string, error) {
	return "sent to " + a.ID, nil
})

var onboarding = workflow.New("onboarding", func(ctx workflow.Context, in OnboardingInput) (map[string]string, error) {
	workflow.Publish(ctx, OnboardingStatus{Step: "creating_account"})
	account, err := createAccount.Execute(ctx, in.UserID)
	if err != nil {
		return nil, err
	}

	workflow.Publish(ctx, OnboardingStatus{Step: "sending_welcome"})
	if _, err := sendWelcome.Execute(ctx, account); err != nil {
		return nil, err
	}

	workflow.Publish(ctx, OnboardingStatus{Step: "done"})
	return map[string]string{"account_id": account.ID}, nil
})

func TestOnboarding(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(onboarding), createAccount, sendWelcome)
		r := e.start(onboarding, OnboardingInput{UserID: "u1"})
		if got := query[OnboardingStatus](t, r); got.Step != "creating_account" {
			t.Fatalf("status = %+v, want creating_account", got)
		}
		wantStatus(t, r, hephtype.StatusRunning)
		e.settle()
		if got := output[map[string]string](t, r); got["account_id"] != "acct-u1" {
			t.Fatalf("output = %v", got)
		}
		if got := query[OnboardingStatus](t, r); got.Step != "done" {
			t.Fatalf("status = %+v, want done", got)
		}
		want := []string{"run_started", "decision", "step_scheduled", "step_completed", "decision", "step_scheduled",
			"step_completed", "decision", "run_completed"}
		if diff := cmp.Diff(want, kinds(r.History())); diff != "" {
			t.Fatalf("history (-want +got):\n%s", diff)
		}
	})
}

// --- Counter: an entity workflow ----------------------------------------------

var counter = workflow.New("counter", func(ctx workflow.Context, _ struct{}) (int, error) {
	workflow.Publish(ctx, 0)

	result, err := workflow.Phase(ctx, 0,
		workflow.OnSignal("increment", func(ctx workflow.Context, _ struct{}, count int) workflow.Next[int] {
			return workflow.Continue(count + 1)
		}),
		workflow.OnSignal("decrement", func(ctx workflow.Context, _ struct{}, count int) workflow.Next[int] {
			return workflow.Continue(count - 1)
		}),
		workflow.OnSignal("done", func(ctx workflow.Context, _ struct{}, count int) workflow.Next[int] {
			return workflow.Stop(count)
		}),
	)
	if err != nil {
		return 0, err
	}

	workflow.Publish(ctx, result)
	return result, nil
})

func TestCounter(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(counter))
		r := e.start(counter, struct{}{})
		for _, s := range []string{"increment", "increment", "decrement", "increment"} {
			e.signal(r, s, nil)
		}
		wantStatus(t, r, hephtype.StatusWaiting)
		if got := query[int](t, r); got != 0 {
			t.Fatalf("value = %d before done: the phase state is not published", got)
		}
		e.signal(r, "done", nil)
		if got := output[int](t, r); got != 2 {
			t.Fatalf("output = %d, want 2", got)
		}
		if got := query[int](t, r); got != 2 {
			t.Fatalf("value = %d, want 2", got)
		}
	})
}

// --- ShoppingCart: a multi-phase workflow -------------------------------------

type Item struct {
	SKU   string
	Price int
}

type Cart struct{ Items []Item }

type CartStatus struct {
	Phase     string
	ItemCount int `json:",omitempty"`
	Total     int `json:",omitempty"`
}

type CartResult struct {
	Total     int
	Cancelled bool
}

var (
	charge = workflow.NewActivity("payment.charge", func(ctx context.Context, items []Item) (int, error) {
		total := 0
		for _, it := range items {
			total += it.Price
		}
		return total, nil
	})
	refund = workflow.NewActivity("payment.refund", func(ctx context.Context, total int) (string, error) {
		return fmt.Sprintf("refunded %d", total), nil
	})
	sendReceipt = workflow.NewActivity("email.send_receipt", func(ctx context.Context, total int) (string, error) {
		return fmt.Sprintf("receipt for %d", total), nil
	})
)

// The shopping cart's messages, declared once with their types: the
// workflow handles them and the test sends them through the same
// definitions.
var (
	addItemUpdate    = workflow.NewUpdate[Item, int]("add_item")
	removeItemUpdate = workflow.NewUpdate[string, int]("remove_item")
	confirmUpdate    = workflow.NewUpdate[struct{}, string]("confirm")
	cancelUpdate     = workflow.NewUpdate[struct{}, string]("cancel")
	checkoutSignal   = workflow.NewSignal[struct{}]("checkout")
)

var shoppingCart = workflow.New("shopping_cart", func(ctx workflow.Context, _ struct{}) (CartResult, error) {
	workflow.Publish(ctx, CartStatus{Phase: "open"})

	// Phase 1: collect items.
	cart, err := workflow.Phase(ctx, Cart{},
		workflow.HandleUpdate(addItemUpdate, addItem).Validate(validateSKU),
		workflow.HandleUpdate(removeItemUpdate, removeItem),
		workflow.HandleSignal(checkoutSignal, func(ctx workflow.Context, _ struct{}, c Cart) workflow.Next[Cart] {
			return workflow.Stop(c)
		}),
	)
	if err != nil {
		return CartResult{}, err
	}

	// Phase 2: charge.
	workflow.Publish(ctx, CartStatus{Phase: "charging", ItemCount: len(cart.Items)})
	total, err := charge.Execute(ctx, cart.Items)
	if err != nil {
		return CartResult{}, err
	}

	// Phase 3: confirm or cancel.
	workflow.Publish(ctx, CartStatus{Phase: "confirming", Total: total})
	confirmed, err := workflow.Phase(ctx, false,
		workflow.HandleUpdate(confirmUpdate, func(ctx workflow.Context, _ struct{}, _ bool) (workflow.Reply[bool, string], error) {
			return workflow.RespondAndStop(true, "ok"), nil
		}),
		workflow.HandleUpdate(cancelUpdate, func(ctx workflow.Context, _ struct{}, _ bool) (workflow.Reply[bool, string], error) {
			return workflow.RespondAndStop(false, "ok"), nil
		}),
	)
	if err != nil {
		return CartResult{}, err
	}

	// Phase 4: finalize.
	if confirmed {
		workflow.Publish(ctx, CartStatus{Phase: "done", Total: total})
		if _, err := sendReceipt.Execute(ctx, total); err != nil {
			return CartResult{}, err
		}
		return CartResult{Total: total}, nil
	}
	workflow.Publish(ctx, CartStatus{Phase: "refunded"})
	if _, err := refund.Execute(ctx, total); err != nil {
		return CartResult{}, err
	}
	return CartResult{Cancelled: true}, nil
})

func addItem(ctx workflow.Context, item Item, c Cart) (workflow.Reply[Cart, int], error) {
	c.Items = append(slices.Clip(c.Items), item)
	workflow.Publish(ctx, CartStatus{Phase: "open", ItemCount: len(c.Items)})
	return workflow.Respond(c, len(c.Items)), nil
}

var skuPattern = regexp.MustCompile(`^[A-Z]{3}-\d{3}$`)

func validateSKU(item Item, _ Cart) error {
	if !skuPattern.MatchString(item.SKU) {
		return errors.New("invalid SKU")
	}
	return nil
}

func removeItem(ctx workflow.Context, sku string, c Cart) (workflow.Reply[Cart, int], error) {
	c.Items = slices.DeleteFunc(slices.Clone(c.Items), func(it Item) bool { return it.SKU == sku })
	return workflow.Respond(c, len(c.Items)), nil
}

func TestShoppingCart(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(shoppingCart), charge, refund, sendReceipt)
		r := e.start(shoppingCart, struct{}{})

		wantAccepted(t, sendUpdate(e, r, "u1", addItemUpdate, Item{SKU: "ABC-123", Price: 30}))
		if n := updateResult[int](t, r, "u1"); n != 1 {
			t.Fatalf("add_item replied %d, want 1", n)
		}
		before := len(r.History())
		wantRejected(t, sendUpdate(e, r, "u2", addItemUpdate, Item{SKU: "bad sku", Price: 1}), "invalid SKU")
		if after := len(r.History()); after != before {
			t.Fatalf("a rejected update wrote %d history events", after-before)
		}
		wantAccepted(t, sendUpdate(e, r, "u3", addItemUpdate, Item{SKU: "XYZ-999", Price: 12}))
		wantAccepted(t, sendUpdate(e, r, "u4", addItemUpdate, Item{SKU: "DEL-000", Price: 100}))
		wantAccepted(t, sendUpdate(e, r, "u5", removeItemUpdate, "DEL-000"))
		if n := updateResult[int](t, r, "u5"); n != 2 {
			t.Fatalf("remove_item replied %d, want 2", n)
		}
		if got := query[CartStatus](t, r); got != (CartStatus{Phase: "open", ItemCount: 3}) {
			t.Fatalf("status = %+v", got)
		}

		e.signal(r, checkoutSignal.Name(), nil)
		if got := query[CartStatus](t, r); got != (CartStatus{Phase: "charging", ItemCount: 2}) {
			t.Fatalf("status = %+v", got)
		}
		// Charging: no phase accepts add_item any more.
		wantRejected(t, sendUpdate(e, r, "u6", addItemUpdate, Item{SKU: "ABC-123", Price: 30}), "not accepting")
		e.settle()
		if got := query[CartStatus](t, r); got != (CartStatus{Phase: "confirming", Total: 42}) {
			t.Fatalf("status = %+v", got)
		}
		// Confirming: add_item is still rejected; confirm is accepted.
		wantRejected(t, sendUpdate(e, r, "u7", addItemUpdate, Item{SKU: "ABC-123", Price: 30}), "not accepting")
		wantAccepted(t, sendUpdate(e, r, "u8", confirmUpdate, struct{}{}))
		if got := updateResult[string](t, r, "u8"); got != "ok" {
			t.Fatalf("confirm replied %q", got)
		}
		e.settle()
		if got := output[CartResult](t, r); got != (CartResult{Total: 42}) {
			t.Fatalf("output = %+v", got)
		}
		if got := query[CartStatus](t, r); got.Phase != "done" {
			t.Fatalf("status = %+v", got)
		}
		h := r.History()
		if n := countKind(h, hephtype.EventUpdateAccepted); n != 5 {
			t.Fatalf("%d update_accepted events, want 5 (rejections write nothing)", n)
		}
		if n := countKind(h, hephtype.EventUpdateRejected); n != 0 {
			t.Fatalf("%d update_rejected events, want none", n)
		}
		// Accepted comes before the handler's commands and completed after.
		acc := slices.IndexFunc(h, func(e eventT) bool { return e.Kind == hephtype.EventUpdateAccepted && e.Ref == "u8" })
		done := slices.IndexFunc(h, func(e eventT) bool { return e.Kind == hephtype.EventUpdateDone && e.Ref == "u8" })
		if acc < 0 || done < acc {
			t.Fatalf("update u8: accepted at %d, completed at %d", acc, done)
		}
	})
}

func TestShoppingCartCancel(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(shoppingCart), charge, refund, sendReceipt)
		r := e.start(shoppingCart, struct{}{})
		wantAccepted(t, sendUpdate(e, r, "u1", addItemUpdate, Item{SKU: "ABC-123", Price: 30}))
		e.signal(r, checkoutSignal.Name(), nil)
		e.settle()
		wantAccepted(t, sendUpdate(e, r, "u2", cancelUpdate, struct{}{}))
		e.settle()
		if got := output[CartResult](t, r); !got.Cancelled {
			t.Fatalf("output = %+v", got)
		}
		if got := query[CartStatus](t, r); got.Phase != "refunded" {
			t.Fatalf("status = %+v", got)
		}
	})
}

// --- BatchProcess: fan-out with Parallel ---------------------------------------

type BatchInput struct{ Items []string }

type BatchResult struct{ Processed int }

var processItem = workflow.NewActivity("processor.run", func(ctx context.Context, item string) (string, error) {
	if strings.HasPrefix(item, "bad") {
		return "", flow.NonRetryable(fmt.Errorf("cannot process %q", item))
	}
	return strings.ToUpper(item), nil
})

var batchProcess = workflow.New("batch_process", func(ctx workflow.Context, in BatchInput) (BatchResult, error) {
	branches := make([]func(workflow.Context) (string, error), len(in.Items))
	for i, item := range in.Items {
		branches[i] = func(ctx workflow.Context) (string, error) { return processItem.Execute(ctx, item) }
	}
	results := workflow.Parallel(ctx, branches...)

	failures := 0
	for _, r := range results {
		if r.Err != nil {
			failures++
		}
	}
	if failures > 0 {
		return BatchResult{}, fmt.Errorf("%d of %d items failed", failures, len(results))
	}
	return BatchResult{Processed: len(results)}, nil
})

func TestBatchProcess(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(batchProcess), processItem)
		ok := e.start(batchProcess, BatchInput{Items: []string{"a", "b", "c"}})
		// The three activity waits overlap: one decision schedules them all.
		want := []string{"run_started", "decision", "step_scheduled", "step_scheduled", "step_scheduled"}
		if diff := cmp.Diff(want, kinds(ok.History())); diff != "" {
			t.Fatalf("history (-want +got):\n%s", diff)
		}
		e.settle()
		if got := output[BatchResult](t, ok); got.Processed != 3 {
			t.Fatalf("output = %+v", got)
		}

		bad := e.start(batchProcess, BatchInput{Items: []string{"a", "bad", "c"}})
		e.settle()
		wantStatus(t, bad, hephtype.StatusFailed)
		if bad.Err() != "1 of 3 items failed" {
			t.Fatalf("error = %q", bad.Err())
		}
		// Every branch ran to completion.
		if n := countKind(bad.History(), hephtype.EventStepCompleted); n != 2 {
			t.Fatalf("%d activities completed, want 2", n)
		}
	})
}

// --- Inventory: async update handlers ----------------------------------------

type Restock struct {
	SKU      string
	Quantity int
}

type StockEntry struct {
	Quantity int
	Price    int
}

type Inventory struct{ Stock map[string]StockEntry }

var currentPrice = workflow.NewActivity("pricing.current_price", func(ctx context.Context, sku string) (int, error) {
	return len(sku) * 10, nil
})

var restockUpdate = workflow.NewUpdate[Restock, StockEntry]("restock")

var inventory = workflow.New("inventory", func(ctx workflow.Context, _ struct{}) (map[string]StockEntry, error) {
	workflow.Publish(ctx, map[string]StockEntry{})

	result, err := workflow.Phase(ctx, Inventory{Stock: map[string]StockEntry{}},
		workflow.HandleUpdate(restockUpdate, func(ctx workflow.Context, item Restock, s Inventory) (workflow.Reply[Inventory, StockEntry], error) {
			// Async: it needs an activity to get the price.
			return workflow.RespondAsync(s, func(ctx workflow.Context) (StockEntry, error) {
				price, err := currentPrice.Execute(ctx, item.SKU)
				if err != nil {
					return StockEntry{}, err
				}
				stock := workflow.UpdateState(ctx, func(s Inventory) (map[string]StockEntry, Inventory) {
					stock := maps.Clone(s.Stock)
					stock[item.SKU] = StockEntry{Quantity: stock[item.SKU].Quantity + item.Quantity, Price: price}
					return stock, Inventory{Stock: stock}
				})
				workflow.Publish(ctx, stock)
				return stock[item.SKU], nil
			}), nil
		}),
		workflow.OnSignal("close", func(ctx workflow.Context, _ struct{}, s Inventory) workflow.Next[Inventory] {
			return workflow.Stop(s)
		}),
	)
	if err != nil {
		return nil, err
	}
	return result.Stock, nil
})

func TestInventory(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(inventory), currentPrice)
		r := e.start(inventory, struct{}{})
		wantAccepted(t, sendUpdate(e, r, "r1", restockUpdate, Restock{SKU: "bolt", Quantity: 5}))
		wantAccepted(t, sendUpdate(e, r, "r2", restockUpdate, Restock{SKU: "nut", Quantity: 7}))
		wantAccepted(t, sendUpdate(e, r, "r3", restockUpdate, Restock{SKU: "bolt", Quantity: 1}))
		// The three handlers run concurrently: three price lookups pending.
		if n := len(e.sim.Pending()); n != 3 {
			t.Fatalf("%d actions pending, want 3 concurrent price lookups", n)
		}
		// close stops dispatching, but the phase waits for its handlers.
		e.signal(r, "close", nil)
		wantStatus(t, r, hephtype.StatusRunning)
		wantRejected(t, sendUpdate(e, r, "r4", restockUpdate, Restock{SKU: "gear", Quantity: 1}), "not accepting")
		e.settle()
		want := map[string]StockEntry{"bolt": {Quantity: 6, Price: 40}, "nut": {Quantity: 7, Price: 30}}
		if diff := cmp.Diff(want, output[map[string]StockEntry](t, r)); diff != "" {
			t.Fatalf("output (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, query[map[string]StockEntry](t, r)); diff != "" {
			t.Fatalf("published (-want +got):\n%s", diff)
		}
		if got := updateResult[StockEntry](t, r, "r3"); got != (StockEntry{Quantity: 6, Price: 40}) {
			t.Fatalf("r3 replied %+v", got)
		}
		if got := updateResult[StockEntry](t, r, "r2"); got != (StockEntry{Quantity: 7, Price: 30}) {
			t.Fatalf("r2 replied %+v", got)
		}
	})
}

// --- EventCollector: continue-as-new after a phase timeout ---------------------

type CollectorState struct {
	Events     []string
	Generation int
}

type CollectorInput struct {
	State *CollectorState `json:",omitempty"`
}

var batchInsert = workflow.NewActivity("event_store.batch_insert", func(ctx context.Context, events []string) (int, error) {
	return len(events), nil
})

var eventCollector = workflow.New("event_collector", func(ctx workflow.Context, in CollectorInput) (struct{}, error) {
	state := CollectorState{}
	if in.State != nil {
		state = *in.State
	}
	workflow.Publish(ctx, len(state.Events))

	state, _, err := workflow.PhaseWithTimeout(ctx, state, 24*time.Hour,
		workflow.OnSignal("event", func(ctx workflow.Context, event string, s CollectorState) workflow.Next[CollectorState] {
			s.Events = append(slices.Clip(s.Events), event)
			return workflow.Continue(s)
		}),
		workflow.OnSignal("flush", func(ctx workflow.Context, _ struct{}, s CollectorState) workflow.Next[CollectorState] {
			return workflow.Stop(s)
		}),
	)
	if err != nil {
		return struct{}{}, err
	}

	// Process the accumulated events, then continue with a fresh state.
	if _, err := batchInsert.Execute(ctx, state.Events); err != nil {
		return struct{}{}, err
	}
	return struct{}{}, workflow.ContinueAsNew(ctx, CollectorInput{State: &CollectorState{Generation: state.Generation + 1}})
})

func TestEventCollector(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(eventCollector), batchInsert)
		start := e.sim.Now()
		r := e.start(eventCollector, CollectorInput{})
		e.signal(r, "event", "e1")
		e.signal(r, "event", "e2")
		// Nothing stops the phase: the 24-hour timeout fires (at once, on
		// the virtual clock), the events are inserted and the run continues
		// as new. (Drive would go on forever: each generation waits 24 hours
		// for the next.)
		e.advance(24 * time.Hour)
		wantStatus(t, r, hephtype.StatusContinued)
		if got := e.sim.Now().Sub(start); got != 24*time.Hour {
			t.Fatalf("the clock moved %s, want 24h", got)
		}
		ins := find(r.History(), hephtype.EventStepScheduled)
		if len(ins) != 1 || string(ins[0].Data) != `["e1","e2"]` {
			t.Fatalf("batch_insert scheduled as %v", ins)
		}
		if n := countKind(r.History(), hephtype.EventTimerFired); n != 1 {
			t.Fatalf("%d timer_fired events, want 1", n)
		}
		next := r.Next()
		if next == nil {
			t.Fatal("no run continued the first")
		}
		if got := decodeAs[CollectorInput](t, r.Output()); got.State == nil || got.State.Generation != 1 || len(got.State.Events) != 0 {
			t.Fatalf("continued with %s", r.Output())
		}
		// The second generation is stopped by flush: its timer is cancelled.
		e.signal(next, "event", "e3")
		e.signal(next, "flush", nil)
		e.settle()
		wantStatus(t, next, hephtype.StatusContinued)
		if n := countKind(next.History(), hephtype.EventTimerCancelled); n != 1 {
			t.Fatalf("%d timer_cancelled events, want 1", n)
		}
		if got := decodeAs[CollectorInput](t, next.Output()); got.State.Generation != 2 {
			t.Fatalf("continued with %s", next.Output())
		}
		if third := next.Next(); third == nil || third.Status() != hephtype.StatusWaiting {
			t.Fatal("the third generation is not waiting in its phase")
		}
	})
}
