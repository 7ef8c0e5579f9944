// Command cart runs a code-first workflow on an SQLite file: a shopping
// cart that takes typed updates (validated in the worker), a named query
// and a checkout signal, sleeps durably, charges and mails a receipt.
//
//	go run ./examples/cart [-db cart.db]
//
// Two clients share the file, as two processes would: the worker has the
// workflow registered and runs it; the caller registers nothing and sends
// its messages through the store.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func main() {
	db := flag.String("db", "cart.db", "SQLite file")
	flag.Parse()
	if err := run(*db); err != nil {
		log.Fatal(err)
	}
}

func run(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	// The worker: registers the workflow and its activities, runs them.
	wst, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer wst.Close()
	worker, err := heph.New(&heph.Config{Store: wst, Logger: quiet})
	if err != nil {
		return err
	}
	if err := worker.RegisterWorkflows(CartWorkflow); err != nil {
		return err
	}
	if err := worker.RegisterActivities(ChargeCard, SendReceipt); err != nil {
		return err
	}
	if err := worker.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = worker.Stop(context.Background()) }()

	// The caller: no workflow code, no worker; it only talks to the store.
	cst, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer cst.Close()
	caller, err := heph.New(&heph.Config{Store: cst, Logger: quiet})
	if err != nil {
		return err
	}

	// The worker starts the cart (a start needs the workflow registered);
	// the caller takes a typed handle on it by id.
	started, err := heph.StartWorkflow(ctx, worker, CartWorkflow, "ada", nil)
	if err != nil {
		return err
	}
	run := heph.GetWorkflow(caller, CartWorkflow, started.ID)
	fmt.Printf("started cart %s\n", run.ID)
	for _, it := range []Item{{SKU: "ABC-123", Price: 1250}, {SKU: "ABC-777", Price: 300}, {SKU: "XYZ-001", Price: 4999}} {
		n, err := heph.RunUpdate(ctx, caller, run.ID, AddItem, it, nil)
		if err != nil {
			return err
		}
		fmt.Printf("add_item %s: %d items in the cart\n", it.SKU, n)
	}
	_, err = heph.RunUpdate(ctx, caller, run.ID, AddItem, Item{SKU: "nope", Price: 1}, nil)
	if !errors.Is(err, heph.ErrUpdateInvalid) {
		return fmt.Errorf("a bad SKU was not refused: %v", err)
	}
	fmt.Printf("add_item nope: refused by the validator, nothing written: %v\n", err)
	abc, err := heph.RunQuery(ctx, caller, run.ID, Total, "ABC")
	if err != nil {
		return err
	}
	fmt.Printf("query total(ABC): %d cents\n", abc)
	if err := heph.SendSignal(ctx, caller, run.ID, Checkout, struct{}{}); err != nil {
		return err
	}
	fmt.Printf("checkout sent; the workflow sleeps %v before charging\n", CoolingOff)

	receipt, err := run.Get(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("result: %+v\n", receipt)
	h, err := caller.History(ctx, run.ID)
	if err != nil {
		return err
	}
	fmt.Println("history:")
	for _, ev := range h {
		line := fmt.Sprintf("  %2d %-17s", ev.Seq, ev.Kind)
		if ev.Name != "" {
			line += " " + ev.Name
		}
		fmt.Println(line)
	}
	return nil
}
