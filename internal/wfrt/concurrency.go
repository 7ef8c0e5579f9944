package wfrt

import (
	"encoding/json"
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/store"
)

// KeyFunc computes a run's concurrency key from its input (a
// *workflow.Definition that declares one with ConcurrencyKey).
type KeyFunc interface {
	// HasConcurrencyKey reports whether the workflow declares a key.
	HasConcurrencyKey() bool
	// ConcurrencyKeyOf returns the key for an input.
	ConcurrencyKeyOf(input json.RawMessage) (string, error)
}

// concurrencyKey is the key the registered workflow name computes for
// input: "" when it declares none (or is not registered here). A key that
// cannot be computed, or does not fit (store.CheckConcurrencyKey), is bad
// input.
func (c *Runtime) concurrencyKey(name string, input json.RawMessage) (string, error) {
	c.reg.mu.RLock()
	kf := c.reg.keys[name]
	c.reg.mu.RUnlock()
	if kf == nil {
		return "", nil
	}
	key, err := kf.ConcurrencyKeyOf(input)
	if err != nil {
		return "", fmt.Errorf("%w: concurrency key: %w", limits.ErrInvalidInput, err)
	}
	if err := store.CheckConcurrencyKey(key); err != nil {
		return "", fmt.Errorf("concurrency key computed from the input: %w", err)
	}
	return key, nil
}
