// Package wfdef hands the runtimes of this module (the root package,
// internal/wfrt, hephtest) the replay function of a code-first workflow
// definition, which package workflow keeps out of its public API.
//
// Package workflow registers the accessor in its init; the runtimes call
// Of.
package wfdef

import (
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

var of func(w any) (replay.Func, bool)

// Register installs the accessor; package workflow calls it once, in init.
func Register(fn func(w any) (replay.Func, bool)) { of = fn }

// Of returns the workflow function of w, a *workflow.Definition, as the
// replay core calls it. It panics when w is anything else: callers in
// this module pass only definitions (hephaestus.Workflow admits nothing
// else), so that is a bug here, never bad user input.
func Of(w any) replay.Func {
	if of == nil {
		panic("wfdef: package workflow is not linked")
	}
	fn, ok := of(w)
	if !ok {
		panic(fmt.Sprintf("wfdef: %T is not a *workflow.Definition", w))
	}
	return fn
}
