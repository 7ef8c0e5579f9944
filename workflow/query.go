package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownQuery: the workflow declares no query of that name.
var ErrUnknownQuery = errors.New("the workflow declares no query of this name")

// Query is a named query of a workflow, with arguments of type A and a
// result of type R. Declare it once and use it on both sides: the
// workflow answers it (HandleQuery), callers ask it
// (hephaestus.QueryWorkflowAs). Queries are answered over the state the
// workflow published last (Publish), without replaying the workflow, by
// any process that has the workflow registered.
type Query[A, R any] struct{ name string }

// NewQuery declares a query. It panics on an empty name: declarations are
// made at program start.
func NewQuery[A, R any](name string) *Query[A, R] {
	if name == "" {
		panic("workflow.NewQuery: a query needs a name")
	}
	return &Query[A, R]{name: name}
}

// Name returns the query's name.
func (q *Query[A, R]) Name() string { return q.name }

// queryFunc answers a query over a published state.
type queryFunc func(published, args json.RawMessage) (json.RawMessage, error)

// HandleQuery declares the handler of query q for the workflow def: fn
// gets the state the run published last, decoded into an S (its zero
// value when the run published none), and the query's arguments, and
// returns the answer. fn must not change anything: it may run in any
// process, any number of times. Declaring a query twice replaces its
// handler. It panics on a nil argument.
func HandleQuery[In, Out, S, A, R any](def *Definition[In, Out], q *Query[A, R], fn func(state S, args A) (R, error)) {
	if def == nil || q == nil || fn == nil {
		panic("workflow.HandleQuery: nil definition, query or handler")
	}
	if def.queries == nil {
		def.queries = map[string]queryFunc{}
	}
	def.queries[q.name] = func(published, args json.RawMessage) (json.RawMessage, error) {
		state, err := decode[S](published)
		if err != nil {
			return nil, fmt.Errorf("query %q: the published state does not decode into a %s: %w", q.name, typeName[S](), err)
		}
		a, err := decode[A](args)
		if err != nil {
			return nil, fmt.Errorf("query %q: arguments do not decode into a %s: %w", q.name, typeName[A](), err)
		}
		r, err := fn(state, a)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("query %q: the answer does not encode: %w", q.name, err)
		}
		return raw, nil
	}
}

// AnswerQuery answers the query name over a published state (JSON, empty
// when the run published none) with JSON arguments: what the runtime
// calls. ErrUnknownQuery when the workflow declares no such query.
func (d *Definition[In, Out]) AnswerQuery(name string, published, args json.RawMessage) (json.RawMessage, error) {
	fn, ok := d.queries[name]
	if !ok {
		return nil, fmt.Errorf("workflow %q, query %q: %w (it declares %v)", d.name, name, ErrUnknownQuery, d.QueryNames())
	}
	return fn(published, args)
}

// QueryNames returns the names of the queries the workflow declares, in
// order.
func (d *Definition[In, Out]) QueryNames() []string {
	names := make([]string, 0, len(d.queries))
	for n := range d.queries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
