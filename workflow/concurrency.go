package workflow

import (
	"encoding/json"
	"fmt"
)

// ConcurrencyKey declares how a run's concurrency key is computed from
// its input when the run starts (StartOptions.ConcurrencyKey, when set,
// overrides it). The key groups the run's activities for flow control: a
// queue's per-key limits and its rotation between keys
// (docs/flow-control.md). fn must be deterministic; an error fails the
// start with ErrInvalidInput. A run that continues as new keeps its key; a
// child workflow computes its own (none unless it declares one). It
// returns d, and panics on a nil fn: definitions are made at program
// start.
func (d *Definition[In, Out]) ConcurrencyKey(fn func(in In) (string, error)) *Definition[In, Out] {
	if fn == nil {
		panic("workflow.ConcurrencyKey: nil function")
	}
	d.key = fn
	return d
}

// HasConcurrencyKey reports whether the workflow declares a concurrency
// key (ConcurrencyKey).
func (d *Definition[In, Out]) HasConcurrencyKey() bool { return d.key != nil }

// ConcurrencyKeyOf computes the concurrency key for a JSON input: "" when
// the workflow declares none.
func (d *Definition[In, Out]) ConcurrencyKeyOf(input json.RawMessage) (string, error) {
	if d.key == nil {
		return "", nil
	}
	in, err := decode[In](input)
	if err != nil {
		return "", fmt.Errorf("workflow %q: input does not decode: %w", d.name, err)
	}
	return d.key(in)
}
