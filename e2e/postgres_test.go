package e2e_test

import (
	"context"
	"testing"

	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// postgresBackend gives each test a database of its own (see pgtest).
func postgresBackend() e2e.Backend {
	return e2e.Backend{
		Name: "postgres",
		New: func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
			dsn := pgtest.DSN(t)
			open := func(t *testing.T) store.Store {
				st, err := postgres.Open(context.Background(), &postgres.Config{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
			return open(t), open
		},
	}
}

func TestPostgres(t *testing.T) { e2e.Run(t, postgresBackend()) }
