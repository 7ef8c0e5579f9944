package flow_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/apitest"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// No exported identifier of package flow mentions a type users cannot
// import (one of an internal package), nor is declared with such a
// package's name, so go doc shows none.
func TestNoInternalTypes(t *testing.T) { apitest.NoInternalNames(t, ".") }

// The reserved events are spelt in flow (go doc shows the literal) and
// must stay those of the engine.
func TestEventsMatchEngine(t *testing.T) {
	for _, p := range [][2]string{{flow.EventOK, engine.EventOK}, {flow.EventTimeout, engine.EventTimeout}, {flow.EventFailed, engine.EventFailed}} {
		if p[0] != p[1] {
			t.Errorf("flow event %q is %q in the engine", p[0], p[1])
		}
	}
}
