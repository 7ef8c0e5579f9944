package flow_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/apitest"
)

// No exported identifier of package flow mentions a type users cannot
// import (one of an internal package), so go doc shows none.
func TestNoInternalTypes(t *testing.T) { apitest.NoInternalTypes(t, ".") }
