package workflow

import (
	"errors"
	"slices"
)

// Typed message definitions: an update, a signal or a query is declared
// once, with the types of its arguments and result, and used by both the
// workflow (HandleUpdate, HandleSignal, Signal.Wait, HandleQuery) and its
// callers (hephaestus.RunUpdate, hephaestus.SendSignal,
// hephaestus.RunQuery), so that both sides agree on the name and the
// types at compile time. A workflow that declares its messages
// (Definition.Declare) also lets the runtime tell a misspelt name
// (ErrUnknownUpdate, ErrUnknownSignal) from a message the workflow does
// not take at the moment (no phase accepts it now).

// Errors of messages to a workflow that callers branch on.
var (
	// ErrUnknownUpdate: the workflow declares its updates, and none of
	// that name.
	ErrUnknownUpdate = errors.New("the workflow declares no update of this name")
	// ErrUnknownSignal: the workflow declares its signals, and none of
	// that name.
	ErrUnknownSignal = errors.New("the workflow declares no signal of this name")
	// ErrUpdateInvalid: the update's validator refused it, or its
	// arguments did not decode into the handler's type.
	ErrUpdateInvalid = errors.New("update refused by its validator")
	// ErrDecisionFailed: the decision that was to take an update failed
	// (the workflow's code does not replay its history, say); the update
	// was not applied and may be sent again.
	ErrDecisionFailed = errors.New("the workflow's decision failed")
)

// Update is a named update with arguments of type A and a reply of type R.
type Update[A, R any] struct{ name string }

// NewUpdate declares an update. It panics on an empty name: declarations
// are made at program start.
func NewUpdate[A, R any](name string) *Update[A, R] {
	if name == "" {
		panic("workflow.NewUpdate: an update needs a name")
	}
	return &Update[A, R]{name: name}
}

// Name returns the update's name.
func (u *Update[A, R]) Name() string { return u.name }

func (u *Update[A, R]) declared() (kind, string) { return kindUpdate, u.name }

// Signal is a named signal whose payload is an A.
type Signal[A any] struct{ name string }

// NewSignal declares a signal. It panics on an empty name.
func NewSignal[A any](name string) *Signal[A] {
	if name == "" {
		panic("workflow.NewSignal: a signal needs a name")
	}
	return &Signal[A]{name: name}
}

// Name returns the signal's name.
func (s *Signal[A]) Name() string { return s.name }

func (s *Signal[A]) declared() (kind, string) { return kindSignal, s.name }

// Wait waits for the signal and returns its payload (see WaitSignal).
func (s *Signal[A]) Wait(ctx Context) (A, error) { return WaitSignal[A](ctx, s.name) }

func (q *Query[A, R]) declared() (kind, string) { return kindQuery, q.name }

// Message is a declared update, signal or query (*Update, *Signal,
// *Query).
type Message interface {
	Name() string
	declared() (kind, string)
}

type kind int

const (
	kindUpdate kind = iota
	kindSignal
	kindQuery
)

// HandleUpdate handles the declared update u in a phase: OnUpdate with the
// update's name and types.
func HandleUpdate[S, A, R any](u *Update[A, R], fn func(ctx Context, args A, state S) (Reply[S, R], error)) *UpdateHandler[S, A, R] {
	return OnUpdate(u.name, fn)
}

// HandleSignal handles the declared signal s in a phase: OnSignal with the
// signal's name and type.
func HandleSignal[S, A any](s *Signal[A], fn func(ctx Context, args A, state S) Next[S]) *SignalHandler[S, A] {
	return OnSignal(s.name, fn)
}

// Declare records the updates and signals the workflow takes, and returns
// d. A workflow that declares updates rejects an update of another name
// with ErrUnknownUpdate (and one it declares but no phase accepts now
// with the runtime's "not accepted"); likewise for signals, which a
// client that has the workflow registered refuses with ErrUnknownSignal.
// A workflow that declares none takes any name, as before. Queries are
// declared by HandleQuery; declaring one here is allowed and changes
// nothing.
func (d *Definition[In, Out]) Declare(msgs ...Message) *Definition[In, Out] {
	for _, m := range msgs {
		if m == nil {
			panic("workflow: Declare: a nil message")
		}
		k, name := m.declared()
		switch k {
		case kindUpdate:
			if !slices.Contains(d.updates, name) {
				d.updates = append(d.updates, name)
			}
		case kindSignal:
			if !slices.Contains(d.signals, name) {
				d.signals = append(d.signals, name)
			}
		}
	}
	return d
}

// Declared returns the names of the updates and signals the workflow
// declares (Declare), sorted; empty when it declares none.
func (d *Definition[In, Out]) Declared() (updates, signals []string) {
	updates, signals = slices.Clone(d.updates), slices.Clone(d.signals)
	slices.Sort(updates)
	slices.Sort(signals)
	return updates, signals
}
