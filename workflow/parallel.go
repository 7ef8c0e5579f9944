package workflow

import "github.com/hephaestus-go/hephaestus/internal/replay"

// Result is the outcome of one parallel branch: its value, or its error.
type Result[T any] struct {
	Value T
	Err   error
}

// Parallel runs the branches concurrently and waits until every one has
// finished; results come in the order of the branches. Branches are
// scheduled cooperatively, in a fixed order, so their activities and
// timers overlap while their commands stay deterministic. A branch that
// fails (or panics) leaves its error in its slot; the others run to
// completion regardless.
//
// Each branch gets its own Context and must use it. Branches may call
// activities, sleep, wait for signals, publish, and nest Parallel; they
// may not enter a Phase.
func Parallel[T any](ctx Context, branches ...func(ctx Context) (T, error)) []Result[T] {
	fns := make([]func(*replay.Unit) (any, error), len(branches))
	for i, b := range branches {
		fns[i] = func(u *replay.Unit) (any, error) { return b(wctx{u}) }
	}
	rs := unitOf(ctx).Parallel(fns)
	out := make([]Result[T], len(rs))
	for i, r := range rs {
		out[i] = Result[T]{Value: as[T](r.Value), Err: userError(r.Err)}
	}
	return out
}
