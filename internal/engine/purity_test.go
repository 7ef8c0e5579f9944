package engine_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/puritytest"
)

// TestPurity fails if the engine core, or anything of this module it
// imports, does I/O or reads the wall clock.
func TestPurity(t *testing.T) { puritytest.Check(t, "internal/engine") }

// TestPurityDetector makes sure the check catches what it is meant to.
func TestPurityDetector(t *testing.T) { puritytest.CheckDetector(t) }
