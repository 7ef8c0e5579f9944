package postgres_test

import (
	"context"
	"log"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// Open a store (creating or upgrading its schema) and run workers on it;
// any number of processes may do the same on one database.
func ExampleOpen() {
	ctx := context.Background()
	st, err := postgres.Open(ctx, &postgres.Config{
		DSN: "postgres://heph@db.internal:5432/heph?sslmode=verify-full",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st}) // other processes' commits wake its workers
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx) //nolint:errcheck // example
}
