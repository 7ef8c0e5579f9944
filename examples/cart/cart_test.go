package main

import (
	"context"
	"errors"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// The cart in memory, on a virtual clock: hephtest runs the workflow as
// the runtime does (replaying it over its history at each decision) and
// moves time only when told.
func TestCartCheckout(t *testing.T) {
	ctx := context.Background()
	env := hephtest.NewWorkflowEnv(nil, CartWorkflow)
	env.RegisterActivities(ChargeCard, SendReceipt)
	run, err := hephtest.StartWorkflow(env, CartWorkflow, "ada")
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range []Item{{SKU: "ABC-123", Price: 1250}, {SKU: "XYZ-001", Price: 4999}} {
		if n, err := hephtest.RunUpdate(ctx, run, AddItem, it); err != nil || n != i+1 {
			t.Fatalf("add_item %s: %d, %v; want %d", it.SKU, n, err, i+1)
		}
	}
	before := len(run.History())
	if _, err := hephtest.RunUpdate(ctx, run, AddItem, Item{SKU: "nope"}); !errors.Is(err, heph.ErrUpdateInvalid) {
		t.Fatalf("add_item nope: %v; want the validator's refusal", err)
	}
	if after := len(run.History()); after != before {
		t.Fatalf("a refused update wrote to the history (%d bytes -> %d)", before, after)
	}
	if total, err := hephtest.RunQuery(run, Total, "ABC"); err != nil || total != 1250 {
		t.Fatalf("total(ABC) = %d, %v; want 1250", total, err)
	}
	if err := hephtest.SendSignal(run, Checkout, struct{}{}); err != nil {
		t.Fatal(err)
	}
	// The cooling-off sleep holds the charge until the clock passes it.
	if err := env.Advance(ctx, CoolingOff/2); err != nil {
		t.Fatal(err)
	}
	if run.Status() == hephtype.StatusCompleted {
		t.Fatal("the cart was charged before its cooling-off period ended")
	}
	if err := env.Advance(ctx, CoolingOff); err != nil {
		t.Fatal(err)
	}
	got, err := run.Result()
	if err != nil || got != (Receipt{Total: 6249, Charge: "ch_6249"}) {
		t.Fatalf("result %+v, %v", got, err)
	}
}

// A cart nobody touches for AbandonAfter ends without a charge.
func TestCartAbandoned(t *testing.T) {
	ctx := context.Background()
	env := hephtest.NewWorkflowEnv(nil, CartWorkflow)
	env.RegisterActivities(ChargeCard, SendReceipt)
	run, err := hephtest.StartWorkflow(env, CartWorkflow, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hephtest.RunUpdate(ctx, run, AddItem, Item{SKU: "ABC-123", Price: 1}); err != nil {
		t.Fatal(err)
	}
	if err := env.Advance(ctx, AbandonAfter); err != nil {
		t.Fatal(err)
	}
	if got, err := run.Result(); err != nil || !got.Abandoned {
		t.Fatalf("result %+v, %v; want an abandoned cart", got, err)
	}
}

// The example program itself, on a fresh SQLite file.
func TestCartProgram(t *testing.T) {
	if err := run(t.TempDir() + "/cart.db"); err != nil {
		t.Fatal(err)
	}
}
