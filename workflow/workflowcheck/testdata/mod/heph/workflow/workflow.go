// Package workflow is a stand-in for the real package, with the
// signatures the analyzer's tests use.
package workflow

import (
	"context"
	"time"
)

type Context interface{ unit() }

type Definition[In, Out any] struct{}

func New[In, Out any](name string, fn func(ctx Context, in In) (Out, error)) *Definition[In, Out] {
	return &Definition[In, Out]{}
}

type Activity[In, Out any] struct{}

func NewActivity[In, Out any](name string, fn func(ctx context.Context, in In) (Out, error)) *Activity[In, Out] {
	return &Activity[In, Out]{}
}

func (a *Activity[In, Out]) Execute(ctx Context, in In) (Out, error) {
	var out Out
	return out, nil
}

type Result[T any] struct {
	Value T
	Err   error
}

func Parallel[T any](ctx Context, branches ...func(ctx Context) (T, error)) []Result[T] { return nil }

func Sleep(ctx Context, d time.Duration) error { return nil }
func Now(ctx Context) time.Time                { return time.Time{} }
func Random(ctx Context) float64               { return 0 }
