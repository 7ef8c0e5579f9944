package flowctl

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/puritytest"
)

// TestPurity: the picker does no I/O and reads no clock.
func TestPurity(t *testing.T) { puritytest.Check(t, "internal/flowctl") }
