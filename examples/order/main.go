// Command order runs the seed's OrderFlow on an SQLite file and prints the
// finished runs and their history.
//
//	go run ./examples/order [-db order.db]
//
// ValidateOrder fans out to ChargePayment and ReserveInventory, which fan
// in to ShipOrder; an invalid order ends at once. Run it twice: the runs
// of the first invocation are still in the file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// Order is the run input.
type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	Item   string `json:"item"`
}

// Payment is ChargePayment's output.
type Payment struct {
	ChargeID string `json:"charge_id"`
	Amount   int    `json:"amount"`
}

// Reservation is ReserveInventory's output.
type Reservation struct {
	Warehouse string `json:"warehouse"`
}

// Shipment is ShipOrder's output.
type Shipment struct {
	Tracking string `json:"tracking"`
}

func orderFlow() *flow.Flow {
	b := flow.New("order").Version(1).BusinessKey("orderid", flow.ScopeActive).Tags("example")
	flow.Input[Order](b)
	flow.EventStep(b, "validate_order", func(ctx context.Context, o Order) (flow.Result[Order], error) {
		if o.Amount <= 0 || o.Item == "" {
			return flow.Emit("invalid", o), nil
		}
		return flow.Emit("valid", o), nil
	}, flow.Events("valid", "invalid"))
	charge := flow.Step(b, "charge_payment", func(ctx context.Context, o Order) (Payment, error) {
		info, _ := flow.CallInfo(ctx) // the idempotency key is stable across retries
		return Payment{ChargeID: "ch_" + strings.ReplaceAll(info.IdempotencyKey, "/", "_")[:12], Amount: o.Amount}, nil
	}, flow.Retry(flow.RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond}))
	reserve := flow.Step(b, "reserve_inventory", func(ctx context.Context, o Order) (Reservation, error) {
		return Reservation{Warehouse: "north"}, nil
	})
	flow.Step(b, "ship_order", func(ctx context.Context, o Order) (Shipment, error) {
		p, err := charge.Output(ctx)
		if err != nil {
			return Shipment{}, err
		}
		r, err := reserve.Output(ctx)
		if err != nil {
			return Shipment{}, err
		}
		return Shipment{Tracking: fmt.Sprintf("%s-%s-%d", r.Warehouse, o.ID, p.Amount)}, nil
	})
	return b.Start("validate_order").
		Edge("validate_order", "valid", "charge_payment", "reserve_inventory").
		Edge("validate_order", "invalid", flow.Done).
		Edge("charge_payment", flow.EventOK, "ship_order").
		Edge("reserve_inventory", flow.EventOK, "ship_order").
		Edge("ship_order", flow.EventOK, flow.Done).
		MustBuild()
}

func main() {
	db := flag.String("db", "order.db", "SQLite file")
	flag.Parse()
	if err := run(*db); err != nil {
		log.Fatal(err)
	}
}

func run(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		return err
	}
	f := orderFlow()
	if err := c.Register(f); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = c.Stop(context.Background()) }()

	fmt.Printf("flow %q version %d:\n%s\n", f.Name(), f.Version(), f.Mermaid())
	orders := []Order{
		{ID: fmt.Sprint(time.Now().Unix() % 100000), Amount: 4999, Item: "book"},
		{ID: fmt.Sprint(time.Now().Unix()%100000 + 1), Amount: 0, Item: "book"},
	}
	for _, o := range orders {
		r, err := c.Run(ctx, "order", o, &heph.StartOptions{BusinessValue: o.ID})
		if errors.Is(err, heph.ErrDuplicateRun) {
			fmt.Printf("order %s is already running\n", o.ID)
			continue
		}
		if err != nil {
			return err
		}
		fmt.Printf("run %s (%s): %s, output %s\n", r.ID, r.BusinessID, r.Status, r.Output)
		for _, s := range r.Steps {
			fmt.Printf("  step %-18s %-9s event=%s\n", s.Name, s.Status, s.Event)
		}
		h, err := c.History(ctx, r.ID)
		if err != nil {
			return err
		}
		fmt.Println("  history:")
		for _, ev := range h {
			line := fmt.Sprintf("    %2d %s %-19s", ev.Seq, ev.At.Format("15:04:05.000"), ev.Kind)
			if ev.Step != "" {
				line += " " + ev.Step
			}
			if ev.Name != "" {
				line += " -> " + ev.Name
			}
			fmt.Println(line)
		}
	}
	l, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "order", Limit: 1000})
	if err != nil {
		return err
	}
	fmt.Printf("%d order runs in %s\n", len(l.Runs), path)
	if len(l.Runs) == 0 {
		os.Exit(1)
	}
	return nil
}
