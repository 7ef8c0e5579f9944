// Command go-client is a Go program that steers a remote heph server
// through the public client package, without embedding the engine: it
// starts the example order flow (heph server --examples) with a typed
// handle, waits for its result, shows that a retried start with the same
// idempotency key names the same run, and prints the run's history.
//
//	heph server --sqlite heph.db &            # prints an admin token once
//	heph tokens create shop --service --role operator
//	HEPH_ADDR=http://127.0.0.1:7070 HEPH_TOKEN=<that secret> go run ./examples/go-client
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/hephaestus-go/hephaestus/client"
)

// Order is example.order's input; the program keeps its own types of the
// JSON the flow reads and writes.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Region   string `json:"region"`
	Items    []Line `json:"items"`
}

// Line is one line of an order; Price is in cents.
type Line struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Price int    `json:"price"`
}

// Shipped is the flow's output: the output of its last step, ship_order,
// by step name.
type Shipped struct {
	ShipOrder struct {
		Tracking string `json:"tracking"`
		Parcels  int    `json:"parcels"`
	} `json:"ship_order"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	addr := os.Getenv("HEPH_ADDR")
	if addr == "" {
		addr = "http://127.0.0.1:7070"
	}
	id := fmt.Sprintf("go-client-%d", time.Now().Unix())
	if err := run(ctx, addr, os.Getenv("HEPH_TOKEN"), id, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "go-client:", err)
		os.Exit(1)
	}
}

// run starts order id on the server at addr and reports to out.
func run(ctx context.Context, addr, token, id string, out io.Writer) error {
	c, err := client.New(&client.Config{Addr: addr, Token: token, UserAgent: "heph-example-go-client"})
	if err != nil {
		return err
	}
	me, _, err := c.Whoami(ctx)
	if err != nil {
		return fmt.Errorf("whoami: %w", err)
	}
	fmt.Fprintf(out, "calling as %s (role %s)\n", me.Actor, me.Role)

	orders := client.Flow[Order, Shipped](c, "example.order")
	o := Order{ID: id, Customer: "ada", Region: "eu", Items: []Line{{SKU: "kettle", Qty: 1, Price: 3999}, {SKU: "mug", Qty: 4, Price: 899}}}
	// The idempotency key makes the start safe to retry: a lost answer,
	// a restarted program. The order id is also the flow's business key.
	opts := &client.StartOptions{IdempotencyKey: "order-" + id, BusinessValue: id, Tags: []string{"example"}}
	r, err := orders.Start(ctx, o, opts)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Fprintf(out, "started run %s (created %v)\n", r.ID, r.Created)

	shipped, err := r.Result(ctx)
	var failed *client.RunError
	if errors.As(err, &failed) {
		return fmt.Errorf("the order did not ship: run %s ended %s: %s", failed.RunID, failed.Status, failed.Message)
	} else if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	fmt.Fprintf(out, "shipped in %d parcels, tracking %s\n", shipped.ShipOrder.Parcels, shipped.ShipOrder.Tracking)

	again, err := orders.Start(ctx, o, opts)
	if err != nil {
		return fmt.Errorf("start again: %w", err)
	}
	fmt.Fprintf(out, "the same start again: run %s (created %v)\n", again.ID, again.Created)

	h, _, err := c.History(ctx, r.ID, 0, 0)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	for _, e := range h.Events {
		fmt.Fprintf(out, "  %3d %-16s %s\n", e.Seq, e.Kind, e.Step)
	}
	return nil
}
