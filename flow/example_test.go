package flow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtest"
)

type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	SKU    string `json:"sku"`
}

type Charge struct {
	ChargeID string `json:"charge_id"`
}

type Reservation struct {
	Warehouse string `json:"warehouse"`
}

type Shipment struct {
	Tracking string `json:"tracking"`
}

// orderFlow is the seed's OrderFlow: validate the order, then charge the
// payment and reserve the inventory in parallel, then ship once both are
// done. An invalid order ends the run at once.
func orderFlow() *flow.Flow {
	b := flow.New("order").Version(1).BusinessKey("orderid", flow.ScopeActive)
	flow.Input[Order](b)

	flow.EventStep(b, "validate", func(ctx context.Context, o Order) (flow.Result[Order], error) {
		if o.Amount <= 0 {
			return flow.Emit("invalid", o), nil
		}
		return flow.Emit("valid", o), nil
	}, flow.Events("valid", "invalid"))

	charge := flow.Step(b, "charge", func(ctx context.Context, o Order) (Charge, error) {
		return Charge{ChargeID: "ch_" + o.ID}, nil
	})
	reserve := flow.Step(b, "reserve", func(ctx context.Context, o Order) (Reservation, error) {
		return Reservation{Warehouse: "north"}, nil
	})
	flow.Step(b, "ship", func(ctx context.Context, o Order) (Shipment, error) {
		c, err := charge.Output(ctx) // typed: Charge
		if err != nil {
			return Shipment{}, err
		}
		r, err := reserve.Output(ctx) // typed: Reservation
		if err != nil {
			return Shipment{}, err
		}
		return Shipment{Tracking: r.Warehouse + "/" + c.ChargeID}, nil
	})

	return b.Start("validate").
		Edge("validate", "valid", "charge", "reserve"). // fan-out
		Edge("validate", "invalid", flow.Done).
		Edge("charge", flow.EventOK, "ship"). // fan-in: ship waits for both
		Edge("reserve", flow.EventOK, "ship").
		Edge("ship", flow.EventOK, flow.Done).
		MustBuild()
}

// The seed's OrderFlow, Hephaestus style: explicit start, events, fan-out,
// fan-in and Done, driven through the pure engine in memory.
func Example_orderFlow() {
	ctx := context.Background()
	f := orderFlow()

	run, err := hephtest.RunFlow(ctx, f, Order{ID: "42", Amount: 4999, SKU: "book"})
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status(), string(run.Output()))

	bad, _ := hephtest.RunFlow(ctx, f, Order{ID: "43"})
	ship, _ := bad.Step("ship")
	fmt.Println(bad.Status(), "ship:", ship.Status)
	// Output:
	// completed {"ship":{"tracking":"north/ch_42"}}
	// completed ship: skipped
}

type Payment struct {
	Charged bool     `json:"charged"`
	Parties []string `json:"parties"`
}

// PgFlow's ProcessOrder, PgFlow style: depends_on lists and a map step that
// notifies every party named in the charge step's output.
func Example_processOrder() {
	b := flow.New("process_order").Defaults(flow.Retry(flow.RetryPolicy{MaxAttempts: 3}))
	flow.Step(b, "validate", func(ctx context.Context, in map[string]any) (map[string]bool, error) {
		return map[string]bool{"valid": true}, nil
	})
	flow.Step(b, "charge", func(ctx context.Context, in map[string]any) (Payment, error) {
		return Payment{Charged: true, Parties: []string{"customer", "warehouse", "accounting"}}, nil
	}, flow.DependsOn("validate"))
	flow.Map(b, "notify_parties", func(ctx context.Context, party string) (string, error) {
		return "notified " + party, nil
	}, flow.DependsOn("charge"), flow.Over("charge", "parties"))
	f, err := b.Build()
	if err != nil {
		panic(err)
	}

	run, err := hephtest.RunFlow(context.Background(), f, map[string]any{"order_id": 123})
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status(), string(run.Output()))
	// Output:
	// completed {"notify_parties":["notified customer","notified warehouse","notified accounting"]}
}

// Build reports every problem at once, each naming the steps at fault.
func ExampleBuilder_Build() {
	b := flow.New("broken")
	flow.Step(b, "a", func(ctx context.Context, in any) (any, error) { return nil, nil }, flow.DependsOn("c"))
	flow.Step(b, "b", func(ctx context.Context, in any) (any, error) { return nil, nil }, flow.DependsOn("a"))
	flow.Step(b, "c", func(ctx context.Context, in any) (any, error) { return nil, nil }, flow.DependsOn("b", "nope"))
	_, err := b.Build()
	for _, e := range flow.ValidationErrors(err) {
		fmt.Printf("[%s] %s\n", e.Rule, e.Message)
	}
	// Output:
	// [missing-dependency] step "c" depends on "nope", which is not a step of the flow; declare the step or fix the name
	// [start] every step has an incoming edge, so no step can start the run; name the first step with Start
	// [cycle] cycle: a -> b -> c -> a; flows must be acyclic: remove one of these edges
}

// ValidationErrors lists every problem Build found, with its rule and the
// steps at fault, so code can branch on them. A waiting step's "timeout"
// is built in: declaring it is a build error, not a panic.
func ExampleValidationErrors() {
	b := flow.New("approval").Start("approve")
	flow.EventStep(b, "approve", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("approved", flow.EventTimeout), flow.Waits(time.Hour))
	b.Edge("approve", "approved", flow.Done).Edge("approve", flow.EventTimeout, flow.Done)
	_, err := b.Build()
	for _, e := range flow.ValidationErrors(err) {
		fmt.Printf("[%s] %v: %s\n", e.Rule, e.Steps, e.Message)
	}
	// Output:
	// [invalid-name] [approve]: step "approve": event "timeout" is built in and must not be declared: route it with an edge ("timeout" comes from flow.Waits with a timeout)
}
