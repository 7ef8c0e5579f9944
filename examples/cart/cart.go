package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

// Item is a line of the cart.
type Item struct {
	SKU   string `json:"sku"`
	Price int    `json:"price"` // cents
}

// Cart is the state the cart's phase keeps.
type Cart struct {
	Items []Item `json:"items"`
}

// Status is what the workflow publishes for queries.
type Status struct {
	Phase string `json:"phase"`
	Items []Item `json:"items"`
}

// Receipt is the workflow's result.
type Receipt struct {
	Total     int    `json:"total"`
	Charge    string `json:"charge"`
	Abandoned bool   `json:"abandoned,omitempty"`
}

// The cart's messages, declared once with their types: the workflow
// handles them, callers (in any process) send them.
var (
	AddItem  = workflow.NewUpdate[Item, int]("add_item") // replies with the number of items
	Checkout = workflow.NewSignal[struct{}]("checkout")
	Total    = workflow.NewQuery[string, int]("total") // the total of the items whose SKU has a prefix
)

// Activities run outside the workflow, at least once, retried as their
// policy says: here they stand for a payment service and a mailer.
var (
	ChargeCard = workflow.NewActivity("payment.charge", func(ctx context.Context, total int) (string, error) {
		return fmt.Sprintf("ch_%d", total), nil
	})
	SendReceipt = workflow.NewActivity("email.receipt", func(ctx context.Context, r Receipt) (string, error) {
		return "sent", nil
	})
)

// CoolingOff is how long the workflow waits between checkout and the
// charge: a durable sleep, which survives restarts of the process.
const CoolingOff = time.Second

// AbandonAfter ends a cart nobody touched for that long.
const AbandonAfter = 24 * time.Hour

var skuPattern = regexp.MustCompile(`^[A-Z]{3}-[0-9]{3}$`)

// CartWorkflow collects items until checkout, waits out a cooling-off
// period, charges the card and mails a receipt.
var CartWorkflow = workflow.New("cart", func(ctx workflow.Context, customer string) (Receipt, error) {
	workflow.Publish(ctx, Status{Phase: "open"})
	cart, timedOut, err := workflow.PhaseWithTimeout(ctx, Cart{}, AbandonAfter,
		workflow.HandleUpdate(AddItem, func(ctx workflow.Context, it Item, c Cart) (workflow.Reply[Cart, int], error) {
			c.Items = append(slices.Clip(c.Items), it)
			workflow.Publish(ctx, Status{Phase: "open", Items: c.Items})
			return workflow.Respond(c, len(c.Items)), nil
		}).Validate(func(it Item, c Cart) error { // runs in a worker, before anything is written
			if !skuPattern.MatchString(it.SKU) {
				return fmt.Errorf("SKU %q is not like ABC-123", it.SKU)
			}
			return nil
		}),
		workflow.HandleSignal(Checkout, func(ctx workflow.Context, _ struct{}, c Cart) workflow.Next[Cart] {
			return workflow.Stop(c)
		}),
	)
	if err != nil {
		return Receipt{}, err
	}
	if timedOut || len(cart.Items) == 0 {
		workflow.Publish(ctx, Status{Phase: "abandoned", Items: cart.Items})
		return Receipt{Abandoned: true}, nil
	}
	workflow.Publish(ctx, Status{Phase: "cooling off", Items: cart.Items})
	if err := workflow.Sleep(ctx, CoolingOff); err != nil {
		return Receipt{}, err
	}
	total := 0
	for _, it := range cart.Items {
		total += it.Price
	}
	charge, err := ChargeCard.Execute(ctx, total)
	if err != nil {
		return Receipt{}, err
	}
	r := Receipt{Total: total, Charge: charge}
	if _, err := SendReceipt.Execute(ctx, r); err != nil {
		return Receipt{}, err
	}
	workflow.Publish(ctx, Status{Phase: "paid", Items: cart.Items})
	return r, nil
}).Declare(AddItem, Checkout)

func init() {
	workflow.HandleQuery(CartWorkflow, Total, func(s Status, prefix string) (int, error) {
		if s.Phase == "" {
			return 0, errors.New("the cart has published nothing yet")
		}
		sum := 0
		for _, it := range s.Items {
			if len(it.SKU) >= len(prefix) && it.SKU[:len(prefix)] == prefix {
				sum += it.Price
			}
		}
		return sum, nil
	})
}
