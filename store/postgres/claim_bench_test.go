package postgres_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

// BenchmarkClaimWithHandlers: storetest.BenchClaimWithHandlers.
func BenchmarkClaimWithHandlers(b *testing.B) {
	storetest.BenchClaimWithHandlers(b, func(b *testing.B) store.Store {
		return open(b, &postgres.Config{DSN: pgtest.DSN(b)})
	})
}
