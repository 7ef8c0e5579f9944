package e2e

// The examples of the Temporalex programming model (seed 003), written in
// Go, as the end-to-end suite runs them on real stores.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// --- Onboarding: a sequential workflow ---------------------------------------

type OnboardingInput struct {
	UserID string `json:"user_id"`
}

type Account struct{ ID string }

type OnboardingStatus struct{ Step string }

var (
	CreateAccount = workflow.NewActivity("accounts.create", func(ctx context.Context, userID string) (Account, error) {
		return Account{ID: "acct-" + userID}, nil
	})
	SendWelcome = workflow.NewActivity("email.send_welcome", func(ctx context.Context, a Account) (string, error) {
		return "sent to " + a.ID, nil
	})
)

// Onboarding publishes its step, creates an account and sends a welcome.
var Onboarding = workflow.New("onboarding", func(ctx workflow.Context, in OnboardingInput) (map[string]string, error) {
	workflow.Publish(ctx, OnboardingStatus{Step: "creating_account"})
	account, err := CreateAccount.Execute(ctx, in.UserID)
	if err != nil {
		return nil, err
	}
	workflow.Publish(ctx, OnboardingStatus{Step: "sending_welcome"})
	if _, err := SendWelcome.Execute(ctx, account); err != nil {
		return nil, err
	}
	workflow.Publish(ctx, OnboardingStatus{Step: "done"})
	return map[string]string{"account_id": account.ID}, nil
})

// --- Counter: an entity workflow ----------------------------------------------

// Counter counts increment and decrement signals until done.
var Counter = workflow.New("counter", func(ctx workflow.Context, _ struct{}) (int, error) {
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
	Charge = workflow.NewActivity("payment.charge", func(ctx context.Context, items []Item) (int, error) {
		total := 0
		for _, it := range items {
			total += it.Price
		}
		return total, nil
	})
	Refund = workflow.NewActivity("payment.refund", func(ctx context.Context, total int) (string, error) {
		return fmt.Sprintf("refunded %d", total), nil
	})
	SendReceipt = workflow.NewActivity("email.send_receipt", func(ctx context.Context, total int) (string, error) {
		return fmt.Sprintf("receipt for %d", total), nil
	})
)

// ShoppingCart collects items (updates with a validator), charges, and
// waits for a confirmation or a cancellation.
var ShoppingCart = workflow.New("shopping_cart", func(ctx workflow.Context, _ struct{}) (CartResult, error) {
	workflow.Publish(ctx, CartStatus{Phase: "open"})
	cart, err := workflow.Phase(ctx, Cart{},
		workflow.OnUpdate("add_item", addItem).Validate(validateSKU),
		workflow.OnUpdate("remove_item", removeItem),
		workflow.OnSignal("checkout", func(ctx workflow.Context, _ struct{}, c Cart) workflow.Next[Cart] {
			return workflow.Stop(c)
		}),
	)
	if err != nil {
		return CartResult{}, err
	}

	workflow.Publish(ctx, CartStatus{Phase: "charging", ItemCount: len(cart.Items)})
	total, err := Charge.Execute(ctx, cart.Items)
	if err != nil {
		return CartResult{}, err
	}

	workflow.Publish(ctx, CartStatus{Phase: "confirming", Total: total})
	confirmed, err := workflow.Phase(ctx, false,
		workflow.OnUpdate("confirm", func(ctx workflow.Context, _ struct{}, _ bool) (workflow.Reply[bool, string], error) {
			return workflow.RespondAndStop(true, "ok"), nil
		}),
		workflow.OnUpdate("cancel", func(ctx workflow.Context, _ struct{}, _ bool) (workflow.Reply[bool, string], error) {
			return workflow.RespondAndStop(false, "ok"), nil
		}),
	)
	if err != nil {
		return CartResult{}, err
	}

	if confirmed {
		workflow.Publish(ctx, CartStatus{Phase: "done", Total: total})
		if _, err := SendReceipt.Execute(ctx, total); err != nil {
			return CartResult{}, err
		}
		return CartResult{Total: total}, nil
	}
	workflow.Publish(ctx, CartStatus{Phase: "refunded"})
	if _, err := Refund.Execute(ctx, total); err != nil {
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

// --- BatchProcess: fan-out with Parallel ---------------------------------------

type BatchInput struct{ Items []string }

type BatchResult struct{ Processed int }

var ProcessItem = workflow.NewActivity("processor.run", func(ctx context.Context, item string) (string, error) {
	if strings.HasPrefix(item, "bad") {
		return "", flow.NonRetryable(fmt.Errorf("cannot process %q", item))
	}
	return strings.ToUpper(item), nil
})

// BatchProcess processes its items in parallel branches.
var BatchProcess = workflow.New("batch_process", func(ctx workflow.Context, in BatchInput) (BatchResult, error) {
	branches := make([]func(workflow.Context) (string, error), len(in.Items))
	for i, item := range in.Items {
		branches[i] = func(ctx workflow.Context) (string, error) { return ProcessItem.Execute(ctx, item) }
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

// InventoryWorkflow restocks items with async update handlers, each of
// which looks up a price with the price activity.
func InventoryWorkflow(price *workflow.Activity[string, int]) *workflow.Definition[struct{}, map[string]StockEntry] {
	return workflow.New("inventory", func(ctx workflow.Context, _ struct{}) (map[string]StockEntry, error) {
		workflow.Publish(ctx, map[string]StockEntry{})
		result, err := workflow.Phase(ctx, Inventory{Stock: map[string]StockEntry{}},
			workflow.OnUpdate("restock", func(ctx workflow.Context, item Restock, s Inventory) (workflow.Reply[Inventory, StockEntry], error) {
				return workflow.RespondAsync(s, func(ctx workflow.Context) (StockEntry, error) {
					p, err := price.Execute(ctx, item.SKU)
					if err != nil {
						return StockEntry{}, err
					}
					stock := workflow.UpdateState(ctx, func(s Inventory) (map[string]StockEntry, Inventory) {
						stock := maps.Clone(s.Stock)
						stock[item.SKU] = StockEntry{Quantity: stock[item.SKU].Quantity + item.Quantity, Price: p}
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
}

// PriceOf is the price the pricing activities return for a SKU.
func PriceOf(sku string) int { return len(sku) * 10 }

// --- EventCollector: continue-as-new after a phase timeout ---------------------

type CollectorState struct {
	Events     []string
	Generation int
}

type CollectorInput struct {
	State *CollectorState `json:",omitempty"`
	// Timeout of the collecting phase (the seed's 24 hours, shortened).
	Timeout time.Duration
	// Generations ends the chain after that many runs (the seed's runs
	// forever).
	Generations int
	// Inserted counts the events inserted by earlier generations.
	Inserted int
}

type CollectorResult struct {
	Generations int
	Inserted    int
}

var BatchInsert = workflow.NewActivity("event_store.batch_insert", func(ctx context.Context, events []string) (int, error) {
	return len(events), nil
})

// EventCollector collects events until a flush or a timeout, inserts them
// and continues as new.
var EventCollector = workflow.New("event_collector", func(ctx workflow.Context, in CollectorInput) (CollectorResult, error) {
	state := CollectorState{}
	if in.State != nil {
		state = *in.State
	}
	workflow.Publish(ctx, len(state.Events))
	state, _, err := workflow.PhaseWithTimeout(ctx, state, in.Timeout,
		workflow.OnSignal("event", func(ctx workflow.Context, event string, s CollectorState) workflow.Next[CollectorState] {
			s.Events = append(slices.Clip(s.Events), event)
			return workflow.Continue(s)
		}),
		workflow.OnSignal("flush", func(ctx workflow.Context, _ struct{}, s CollectorState) workflow.Next[CollectorState] {
			return workflow.Stop(s)
		}),
	)
	if err != nil {
		return CollectorResult{}, err
	}
	n, err := BatchInsert.Execute(ctx, state.Events)
	if err != nil {
		return CollectorResult{}, err
	}
	if state.Generation+1 >= in.Generations {
		return CollectorResult{Generations: state.Generation + 1, Inserted: in.Inserted + n}, nil
	}
	next := in
	next.State = &CollectorState{Generation: state.Generation + 1}
	next.Inserted += n
	return CollectorResult{}, workflow.ContinueAsNew(ctx, next)
})
