// Package flowgraph hands the runtimes of this module (internal/flowrt,
// hephtest, the root package) the engine graph compiled from a flow, which
// package flow keeps out of its public API.
//
// Package flow registers the accessor in its init; the runtimes call Of.
package flowgraph

import (
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/engine"
)

var of func(f any) (*engine.Graph, bool)

// Register installs the accessor; package flow calls it once, in init.
func Register(fn func(f any) (*engine.Graph, bool)) { of = fn }

// Of returns the compiled graph of f, a *flow.Flow built by Build. It
// panics when f is anything else: callers in this module pass only built
// flows, so that is a bug here, never bad user input.
func Of(f any) *engine.Graph {
	if of == nil {
		panic("flowgraph: package flow is not linked")
	}
	g, ok := of(f)
	if !ok {
		panic(fmt.Sprintf("flowgraph: %T is not a built *flow.Flow", f))
	}
	return g
}
