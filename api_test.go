package hephaestus_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/apitest"
)

// No exported identifier of a public package mentions a type its users
// cannot import (one of an internal package), nor is declared with such a
// package's name (a re-exported sentinel error, say): go doc shows none.
// Package flow checks itself the same way, in flow/api_test.go.
func TestNoInternalTypes(t *testing.T) {
	for _, dir := range []string{".", "workflow", "hephtest", "hephtype", "businesskey", "clock",
		"store", "store/sqlite", "store/postgres", "store/storetest", "job"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			apitest.NoInternalNames(t, dir)
		})
	}
}
