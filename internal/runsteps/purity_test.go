package runsteps_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/puritytest"
)

// TestPurity: the derivation does no I/O and reads no clock.
func TestPurity(t *testing.T) { puritytest.Check(t, "internal/runsteps") }
