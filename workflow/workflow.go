// Package workflow is the code-first way to write durable workflows: a
// workflow is a Go function that reads top to bottom, calls activities,
// sleeps, waits for signals, handles updates in phases, fans out in
// parallel, and returns.
//
// The engine runs a workflow by replaying it over its history: every
// result the function received (activity outcomes, fired timers, signals,
// updates, the time, random numbers) is recorded the first time and handed
// back on replay, so the function reaches the same point again without
// redoing anything. Workflow code must therefore be deterministic: take
// time from Now, randomness from Random and UUID, and everything else
// from its input, activities and messages; never start goroutines, read
// clocks, files, the network or the environment, or depend on map order.
// A change that breaks replay of runs in flight is reported as a
// non-determinism error naming the recorded event, the new command and
// the line of code; guard such changes with Patched.
//
// Concurrency is scoped and explicit. Phase dispatches signals and updates
// to handlers until one stops it; Parallel runs branches and waits for all
// of them. Both are cooperative: exactly one piece of workflow code runs
// at a time, in an order fixed by the history.
//
// The primitives and where they may be called:
//
//	workflow function   activities, Sleep, WaitSignal, Publish, Now, Random,
//	                    UUID, Patched, UpsertSearchAttributes, Logger,
//	                    Parallel, children, Phase
//	phase handlers      the same but Phase; they return Continue/Stop/Async
//	                    (signals) or Respond/RespondAndStop/RespondAsync (updates)
//	async handlers      the same but Phase, plus UpdateState
//	parallel branches   the same but Phase
//
// Messages are declared once, with their types, and used by both the
// workflow and its callers: NewUpdate, NewSignal and NewQuery declare
// them; HandleUpdate and HandleSignal handle them in a phase, Signal.Wait
// waits for a signal, HandleQuery answers a named query over the state the
// workflow published last (without replaying it); Definition.Declare
// records the workflow's update and signal names, so that a misspelt name
// is told apart (ErrUnknownUpdate, ErrUnknownSignal) from a message that
// no phase accepts now. Callers send them from any process through package
// hephaestus (RunUpdate, SendSignal, RunQuery).
//
// Activities are ordinary Go functions with a context.Context; they run
// outside the workflow (at least once, retried by the runtime, as their
// RetryPolicy says) and may do anything. An *ApplicationError they return
// keeps its type, details and non-retryable flag on its way to the
// workflow and, returned by the workflow, to its caller.
package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
)

// Context is what workflow code receives: the workflow function, each
// parallel branch and each phase handler gets its own, and must use it
// (not a Context captured from an enclosing function) for every call it
// makes. It is not a context.Context: workflow code has no deadline and
// no cancellation of its own; activities get a context.Context.
type Context interface {
	unit() *replay.Unit
}

type wctx struct{ u *replay.Unit }

func (c wctx) unit() *replay.Unit { return c.u }

func unitOf(ctx Context) *replay.Unit {
	if ctx == nil {
		panic("workflow: nil Context")
	}
	return ctx.unit()
}

// Definition is a workflow: a name and a function.
type Definition[In, Out any] struct {
	name    string
	fn      func(ctx Context, in In) (Out, error)
	queries map[string]queryFunc
	// updates and signals are the declared names (Declare).
	updates, signals []string
	// schedules are declared with Schedule (schedule.go).
	schedules []Schedule
	// key computes a run's concurrency key (ConcurrencyKey).
	key func(in In) (string, error)
	// versioning: see Versioning (versioning.go).
	versioning Versioning
	// attrs are the declared search attributes (SearchAttribute).
	attrs map[string]flow.AttrType
}

// New defines a workflow. The name identifies it in histories and must
// stay the same across versions of the code. New panics on an empty name
// or a nil function: definitions are made at program start.
func New[In, Out any](name string, fn func(ctx Context, in In) (Out, error)) *Definition[In, Out] {
	if name == "" || fn == nil {
		panic("workflow.New: a workflow needs a name and a function")
	}
	return &Definition[In, Out]{name: name, fn: fn}
}

// Name returns the workflow's name.
func (d *Definition[In, Out]) Name() string { return d.name }

// Workflow is a workflow definition whatever its input and output types:
// what a client registers (hephaestus.Client.RegisterWorkflows). Only a
// *Definition is one.
type Workflow interface {
	// Name returns the workflow's name.
	Name() string
	definition() *definition
}

// definition is what the runtime needs of a Definition beyond its name.
type definition struct {
	fn replay.Func
}

func (d *Definition[In, Out]) definition() *definition { return &definition{fn: d.replayFunc()} }

func init() {
	wfdef.Register(func(w any) (replay.Func, bool) {
		if d, ok := w.(Workflow); ok && d != nil {
			return d.definition().fn, true
		}
		return nil, false
	})
}

// replayFunc returns the workflow function as the runtime's replay core
// calls it: JSON input, JSON output.
func (d *Definition[In, Out]) replayFunc() replay.Func {
	return func(u *replay.Unit, input json.RawMessage) (json.RawMessage, error) {
		in, err := decode[In](input)
		if err != nil {
			return nil, fmt.Errorf("workflow %q: input does not decode: %w", d.name, err)
		}
		u.DeclareAttributes(d.attrs)
		out, err := d.fn(wctx{u}, in)
		if err != nil {
			var can *ContinueAsNewError
			if !errors.As(err, &can) {
				return nil, err
			}
			if _, ok := can.Input.(In); !ok && can.Input != nil {
				return nil, fmt.Errorf("workflow %q: ContinueAsNew input is a %T, not the workflow's input type %s", d.name, can.Input, typeName[In]())
			}
			raw, err := json.Marshal(can.Input)
			if err != nil {
				return nil, fmt.Errorf("workflow %q: ContinueAsNew input does not encode: %w", d.name, err)
			}
			return nil, &replay.ContinueAsNewError{Input: raw}
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("workflow %q: output does not encode: %w", d.name, err)
		}
		return raw, nil
	}
}

// ContinueAsNewError is returned by a workflow function to end its run
// and start a new one of the same workflow, with a fresh history, on
// Input (which must be of the workflow's input type). Entity workflows
// use it to keep their histories short.
type ContinueAsNewError struct{ Input any }

func (e *ContinueAsNewError) Error() string { return "continue as new" }

// ContinueAsNew returns the error that continues the workflow as new:
//
//	return Out{}, workflow.ContinueAsNew(ctx, nextInput)
func ContinueAsNew(ctx Context, input any) error {
	unitOf(ctx)
	return &ContinueAsNewError{Input: input}
}

// Info describes the running workflow.
type Info struct {
	Workflow  string
	RunID     string
	StartTime time.Time
}

// GetInfo returns what the running workflow is.
func GetInfo(ctx Context) Info {
	i := unitOf(ctx).Info()
	return Info{Workflow: i.Workflow, RunID: i.RunID, StartTime: i.StartTime}
}

// Logger returns a logger for workflow code: it is silent while the
// workflow replays, so each message is logged once.
func Logger(ctx Context) *slog.Logger { return unitOf(ctx).Logger() }

// PanicError reports a panic of workflow code in a parallel branch or a
// handler (a panic of the workflow function fails the run).
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// userError turns the replay core's errors into this package's.
func userError(err error) error {
	var af *replay.ActivityFailure
	var cf *replay.ChildFailure
	var pe *replay.PanicError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &af):
		ae := &ActivityError{Activity: af.Name, Attempt: af.Attempt, Message: af.Message}
		if app := ApplicationErrorOf(nil, af.Data); app != nil {
			ae.Cause = app
		}
		return ae
	case errors.As(err, &cf):
		return &ChildError{Workflow: cf.Workflow, Message: cf.Message}
	case errors.As(err, &pe):
		return &PanicError{Value: pe.Value, Stack: pe.Stack}
	}
	return err
}

func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 {
		return v, nil
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}

// typeName returns the name of T, interface types included.
func typeName[T any]() string {
	return strings.TrimPrefix(fmt.Sprintf("%T", (*T)(nil)), "*")
}

// Types returns the Go types of the workflow's input and output: the
// catalog derives JSON Schemas from them.
func (d *Definition[In, Out]) Types() (in, out reflect.Type) {
	return reflect.TypeFor[In](), reflect.TypeFor[Out]()
}
