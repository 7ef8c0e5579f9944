package graphtext_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/puritytest"
)

// TestPurity: the renderers do no I/O and read no clock.
func TestPurity(t *testing.T) { puritytest.Check(t, "internal/graphtext") }
