// Command worker is a Go worker process beside `heph server`: it registers
// a flow (shipment) and a job kind (invoice) that the server does not have
// in its own code, publishes them to the store's catalog, and runs their
// steps until interrupted. The server, the CLI and the dashboard then list,
// start and schedule them (docs/deploying.md).
//
//	go run ./cmd/heph server &                   # ./heph.db
//	go run ./examples/worker                     # the same ./heph.db
//	go run ./cmd/heph start shipment --input '{"order": "o-1", "weight_kg": 3}' --wait
//
// With -postgres URL it serves a PostgreSQL store instead (as `heph server
// --postgres URL` does).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/hephaestus-go/hephaestus/examples/worker/shipping"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func main() {
	path := flag.String("sqlite", "heph.db", "the SQLite file `heph server` serves")
	dsn := flag.String("postgres", "", "a PostgreSQL URL instead of -sqlite")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var st store.Store
	var err error
	if *dsn != "" {
		st, err = postgres.Open(ctx, &postgres.Config{DSN: *dsn})
	} else {
		st, err = sqlite.Open(ctx, &sqlite.Config{Path: *path})
	}
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	c, err := shipping.NewClient(st, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("build %s serves flow %q and job kind %q; Ctrl-C stops it\n", c.BuildID(), shipping.Flow.Name(), shipping.Invoice.Name())
	<-ctx.Done()
	if err := c.Stop(context.Background()); err != nil {
		log.Fatal(err)
	}
}
