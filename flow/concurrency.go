package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// concurrency is how a flow computes its runs' concurrency key.
type concurrency struct {
	path string // a dotted path into the input, or ""
	fn   func(input json.RawMessage) (string, error)
}

// ConcurrencyKeyFrom declares that a run's concurrency key is the value
// at path in its input, a dotted path of object fields ("tenant",
// "account.id"). A string is taken as it is, a number as its JSON text; a
// path that is missing or null gives no key (""); any other value fails
// the start with ErrInvalidInput. The key groups the run's steps for flow
// control: a queue's per-key limits and its rotation between keys
// (docs/flow-control.md). StartOptions.ConcurrencyKey, when set,
// overrides it.
func (b *Builder) ConcurrencyKeyFrom(path string) *Builder {
	if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
		b.errs = append(b.errs, &ValidationError{Flow: b.name, Rule: RuleInvalidOption, Message: fmt.Sprintf("ConcurrencyKeyFrom: %q is not a dotted path of field names (\"tenant\", \"account.id\")", path)})
		return b
	}
	b.concurrency = &concurrency{path: path}
	return b
}

// ConcurrencyKey declares that a run's concurrency key is computed from
// its input by fn, which gets the input decoded as In (as a step's input
// is). fn must be deterministic; an error fails the start with
// ErrInvalidInput. See Builder.ConcurrencyKeyFrom.
func ConcurrencyKey[In any](b *Builder, fn func(in In) (string, error)) *Builder {
	if fn == nil {
		b.errs = append(b.errs, &ValidationError{Flow: b.name, Rule: RuleInvalidOption, Message: "ConcurrencyKey: the function is nil"})
		return b
	}
	b.concurrency = &concurrency{fn: func(raw json.RawMessage) (string, error) {
		var in In
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", fmt.Errorf("input does not decode: %w", err)
		}
		return fn(in)
	}}
	return b
}

// ConcurrencyKey returns the concurrency key the flow computes for a run
// with this input (JSON): "" when it declares none.
func (f *Flow) ConcurrencyKey(input json.RawMessage) (string, error) {
	c := f.concurrency
	switch {
	case c == nil:
		return "", nil
	case c.fn != nil:
		return c.fn(input)
	}
	v := input
	for _, field := range strings.Split(c.path, ".") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil || obj == nil {
			return "", nil // not an object: the path is missing
		}
		var ok bool
		if v, ok = obj[field]; !ok {
			return "", nil
		}
	}
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return "", nil
	case v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", err
		}
		return s, nil
	case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
		return string(v), nil
	}
	return "", errors.New("the value at " + c.path + " is neither a string nor a number")
}
