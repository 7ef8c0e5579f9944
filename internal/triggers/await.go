package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// AwaitRequest is a document step's wait for an event (flowdoc's wait:
// with event:), made from the step's code.
type AwaitRequest struct {
	Event    string
	Match    string
	Input    json.RawMessage
	LookBack time.Duration
}

// AwaitFunc registers a step's wait for an event; the root package
// installs one in the context of step code (WithAwaiter).
type AwaitFunc func(ctx context.Context, r *AwaitRequest) error

type awaiterKey struct{}

// WithAwaiter returns ctx carrying fn for Await.
func WithAwaiter(ctx context.Context, fn AwaitFunc) context.Context {
	return context.WithValue(ctx, awaiterKey{}, fn)
}

// Await registers, from step code, a wait for an event through the
// AwaitFunc ctx carries; without one (a process that runs steps outside
// a client) it fails.
func Await(ctx context.Context, r *AwaitRequest) error {
	fn, ok := ctx.Value(awaiterKey{}).(AwaitFunc)
	if !ok {
		return errors.New("waiting for an event needs a client: the step's context carries none")
	}
	return fn(ctx, r)
}
