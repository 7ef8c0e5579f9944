package hephaestus_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/apitest"
)

// No exported identifier of a public package mentions a type its users
// cannot import (one of an internal package): go doc shows none. (Package
// flow checks itself more strictly, in flow/api_test.go.)
func TestNoInternalTypes(t *testing.T) {
	for _, dir := range []string{".", "workflow", "hephtest", "hephtype", "businesskey", "clock",
		"store", "store/sqlite", "store/postgres", "store/storetest"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			apitest.NoInternalTypes(t, dir)
		})
	}
}
