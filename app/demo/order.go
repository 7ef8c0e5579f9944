package demo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
)

// Order is the input of example.order.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Region   string `json:"region"`
	Items    []Line `json:"items"`
}

// Line is an item of an order.
type Line struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Price int    `json:"price"` // cents
}

// Payment is charge_payment's output.
type Payment struct {
	ChargeID string `json:"charge_id"`
	Amount   int    `json:"amount"`
}

// Reservation is the output of reserve_inventory for one line.
type Reservation struct {
	SKU       string `json:"sku"`
	Warehouse string `json:"warehouse"`
}

// Shipment is ship_order's output.
type Shipment struct {
	Tracking string `json:"tracking"`
	Parcels  int    `json:"parcels"`
}

// ChargeLimit is the largest total, in cents, the card accepts: a larger
// charge fails on every attempt, so its order fails after the retries.
const ChargeLimit = 100000

// chargeRetry retries a refused charge twice, a second and then two
// seconds later, so a run's timeline shows the attempts.
var chargeRetry = flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, Multiplier: 2}

var errInvalid = errors.New("an order needs items, each with a positive quantity")

func (o Order) total() int {
	t := 0
	for _, l := range o.Items {
		t += l.Qty * l.Price
	}
	return t
}

func (o Order) check() error {
	if len(o.Items) == 0 {
		return errInvalid
	}
	for _, l := range o.Items {
		if l.Qty <= 0 || l.SKU == "" {
			return errInvalid
		}
	}
	return nil
}

// orderFlow validates an order, then charges it and reserves each of its
// lines (a map step) at once, then ships it: validate_order fans out to
// charge_payment and reserve_inventory, which fan in to ship_order. An
// invalid order ends at validate_order and the other steps are skipped.
func orderFlow() *flow.Flow {
	b := flow.New(OrderFlow).Version(1).BusinessKey("order", flow.ScopeActive).
		Metadata(map[string]any{"owner": "shop"})
	flow.Input[Order](b)
	flow.EventStep(b, "validate_order", func(ctx context.Context, o Order) (flow.Result[Order], error) {
		if o.check() != nil {
			return flow.Emit("invalid", o), nil
		}
		return flow.Emit("valid", o), nil
	}, flow.Events("valid", "invalid"))
	charge := flow.Step(b, "charge_payment", func(ctx context.Context, o Order) (Payment, error) {
		total := o.total()
		if total > ChargeLimit {
			return Payment{}, fmt.Errorf("card declined: %d.%02d is over the card's limit of %d.00", total/100, total%100, ChargeLimit/100)
		}
		return Payment{ChargeID: "ch_" + o.ID, Amount: total}, nil
	}, flow.Retry(chargeRetry))
	reserve := flow.Map(b, "reserve_inventory", func(ctx context.Context, l Line) (Reservation, error) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(l.SKU))
		return Reservation{SKU: l.SKU, Warehouse: []string{"north", "south", "east"}[h.Sum32()%3]}, nil
	}, flow.Over("", "items"))
	flow.Step(b, "ship_order", func(ctx context.Context, o Order) (Shipment, error) {
		p, err := charge.Output(ctx)
		if err != nil {
			return Shipment{}, err
		}
		rs, err := reserve.Output(ctx)
		if err != nil {
			return Shipment{}, err
		}
		houses := map[string]bool{}
		for _, r := range rs {
			houses[r.Warehouse] = true
		}
		return Shipment{Tracking: fmt.Sprintf("TRK-%s-%s", o.ID, p.ChargeID), Parcels: len(houses)}, nil
	})
	return b.Start("validate_order").
		Edge("validate_order", "valid", "charge_payment", "reserve_inventory").
		Edge("validate_order", "invalid", flow.Done).
		Edge("charge_payment", flow.EventOK, "ship_order").
		Edge("reserve_inventory", flow.EventOK, "ship_order").
		Edge("ship_order", flow.EventOK, flow.Done).
		MustBuild()
}
