package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

// BenchmarkClaimWithHandlers: storetest.BenchClaimWithHandlers.
func BenchmarkClaimWithHandlers(b *testing.B) {
	storetest.BenchClaimWithHandlers(b, func(b *testing.B) store.Store {
		return open(b, &Config{Path: filepath.Join(b.TempDir(), "bench.db")})
	})
}
