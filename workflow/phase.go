package workflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// Handler handles a signal or an update inside a phase whose state is an
// S. Make one with OnSignal or OnUpdate.
type Handler[S any] interface {
	register(spec *replay.PhaseSpec)
}

// Next is what a signal handler returns: the phase's new state and what
// the phase does next. Make it with Continue, Stop or Async.
type Next[S any] struct {
	state S
	stop  bool
	async func(ctx Context) error
}

// Continue sets the phase's state and goes on dispatching messages.
func Continue[S any](state S) Next[S] { return Next[S]{state: state} }

// Stop sets the phase's state and ends the phase: it dispatches nothing
// more, waits for its async handlers, and returns.
func Stop[S any](state S) Next[S] { return Next[S]{state: state, stop: true} }

// Async sets the phase's state and runs fn concurrently with the phase,
// which goes on dispatching messages. fn may call activities, Sleep,
// Parallel and UpdateState; the phase waits for it before it returns. An
// error fn returns is logged.
func Async[S any](state S, fn func(ctx Context) error) Next[S] {
	return Next[S]{state: state, async: fn}
}

// Reply is what an update handler returns: the reply to the caller, the
// phase's new state and what the phase does next. Make it with Respond,
// RespondAndStop or RespondAsync.
type Reply[S, R any] struct {
	reply R
	state S
	stop  bool
	async func(ctx Context) (R, error)
}

// Respond sets the state, replies to the caller and goes on. Like every
// handler result (Continue, Stop, Async, RespondAsync), it takes the
// phase's state first.
func Respond[S, R any](state S, reply R) Reply[S, R] { return Reply[S, R]{reply: reply, state: state} }

// RespondAndStop replies to the caller, sets the state and ends the phase.
func RespondAndStop[S, R any](state S, reply R) Reply[S, R] {
	return Reply[S, R]{reply: reply, state: state, stop: true}
}

// RespondAsync sets the state and runs fn concurrently with the phase;
// what fn returns is the reply (an error fails the update, and the
// workflow goes on). The phase waits for fn before it returns.
func RespondAsync[S, R any](state S, fn func(ctx Context) (R, error)) Reply[S, R] {
	return Reply[S, R]{state: state, async: fn}
}

// SignalHandler handles the signal Name, whose payload is an A, in a phase
// whose state is an S.
type SignalHandler[S, A any] struct {
	name string
	fn   func(ctx Context, args A, state S) Next[S]
}

// OnSignal handles a signal in a phase. The handler runs when the phase
// dispatches the signal, one message at a time, and may block (call
// activities, sleep); a signal whose payload does not decode into an A is
// logged and dropped.
func OnSignal[S, A any](name string, fn func(ctx Context, args A, state S) Next[S]) *SignalHandler[S, A] {
	return &SignalHandler[S, A]{name: name, fn: fn}
}

func (h *SignalHandler[S, A]) register(spec *replay.PhaseSpec) {
	spec.Signals = append(spec.Signals, replay.SignalHandler{
		Name:   h.name,
		Decode: func(raw json.RawMessage) (any, error) { return decode[A](raw) },
		Handle: func(u *replay.Unit, args, state any) replay.HandlerResult {
			n := h.fn(wctx{u}, args.(A), as[S](state))
			r := replay.HandlerResult{State: n.state, Stop: n.stop}
			if fn := n.async; fn != nil {
				r.Async = func(u *replay.Unit) (json.RawMessage, error) { return nil, fn(wctx{u}) }
			}
			return r
		},
	})
}

// UpdateHandler handles the update Name, whose arguments are an A and
// whose reply is an R, in a phase whose state is an S.
type UpdateHandler[S, A, R any] struct {
	name     string
	fn       func(ctx Context, args A, state S) (Reply[S, R], error)
	validate func(args A, state S) error
}

// OnUpdate handles an update in a phase. An update is accepted (and
// recorded) when it arrives if a phase with a handler for it is running,
// its arguments decode into an A and the validator, if any, passes;
// otherwise it is rejected and nothing is recorded. The handler runs when
// the phase dispatches the update, one message at a time; if it returns
// an error, the update fails with it, the state stays as it was and the
// phase goes on.
func OnUpdate[S, A, R any](name string, fn func(ctx Context, args A, state S) (Reply[S, R], error)) *UpdateHandler[S, A, R] {
	return &UpdateHandler[S, A, R]{name: name, fn: fn}
}

// Validate returns a copy of the handler that first validates each update
// against the phase's current state: an error rejects the update, and
// nothing is written to history. Validators must be quick and pure: they
// run only when the update arrives, never on replay.
func (h *UpdateHandler[S, A, R]) Validate(v func(args A, state S) error) *UpdateHandler[S, A, R] {
	c := *h
	c.validate = v
	return &c
}

func (h *UpdateHandler[S, A, R]) register(spec *replay.PhaseSpec) {
	uh := replay.UpdateHandler{
		Name:   h.name,
		Decode: func(raw json.RawMessage) (any, error) { return decode[A](raw) },
		Handle: func(u *replay.Unit, args, state any) replay.HandlerResult {
			rep, err := h.fn(wctx{u}, args.(A), as[S](state))
			if err != nil {
				return replay.HandlerResult{Err: err}
			}
			r := replay.HandlerResult{State: rep.state, Stop: rep.stop}
			if fn := rep.async; fn != nil {
				r.Async = func(u *replay.Unit) (json.RawMessage, error) {
					v, err := fn(wctx{u})
					if err != nil {
						return nil, userError(err)
					}
					return encodeReply(h.name, v)
				}
				return r
			}
			r.Reply, r.Err = encodeReply(h.name, rep.reply)
			return r
		},
	}
	if v := h.validate; v != nil {
		uh.Validate = func(args, state any) error { return v(args.(A), as[S](state)) }
	}
	spec.Updates = append(spec.Updates, uh)
}

func encodeReply(name string, v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("update %q: reply does not encode: %w", name, err)
	}
	return raw, nil
}

// as returns v as an S; a nil v (the zero value of an interface type S)
// is the zero S.
func as[S any](v any) S {
	if v == nil {
		var zero S
		return zero
	}
	return v.(S)
}

// Phase enters a message-driven phase whose state starts as initial. It
// blocks the workflow function and dispatches the phase's signals and
// updates to their handlers, in arrival order, one at a time (signals
// that arrived before the phase began are dispatched first), until a
// handler stops it. Then it waits for the async handlers the phase
// started and returns the final state.
//
// Only the workflow function itself may enter a phase, and phases do not
// nest. Updates sent while no phase handles them are rejected; signals
// are buffered for a later phase or WaitSignal.
func Phase[S any](ctx Context, initial S, handlers ...Handler[S]) (S, error) {
	s, _, err := runPhase(ctx, initial, 0, handlers)
	return s, err
}

// PhaseWithTimeout is Phase with a durable timeout: if no handler stops
// the phase within timeout, it stops dispatching, waits for its async
// handlers and returns with timedOut set. A phase stopped by a handler
// cancels its timer.
func PhaseWithTimeout[S any](ctx Context, initial S, timeout time.Duration, handlers ...Handler[S]) (state S, timedOut bool, err error) {
	if timeout <= 0 {
		return initial, false, fmt.Errorf("workflow.PhaseWithTimeout: timeout %s must be positive", timeout)
	}
	return runPhase(ctx, initial, timeout, handlers)
}

func runPhase[S any](ctx Context, initial S, timeout time.Duration, handlers []Handler[S]) (S, bool, error) {
	spec := &replay.PhaseSpec{Initial: initial, Timeout: timeout}
	for _, h := range handlers {
		h.register(spec)
	}
	st, timedOut, err := unitOf(ctx).Phase(spec)
	return as[S](st), timedOut, err
}

// UpdateState changes the state of the enclosing phase from an async
// handler: fn receives the current state and returns a result and the new
// state. It runs alone, so concurrent handlers never interleave their
// changes and never read a stale state. fn must be quick and must not
// call workflow functions. To read the state, return it unchanged.
//
// UpdateState panics outside an async handler, or if S is not the
// phase's state type.
func UpdateState[S, T any](ctx Context, fn func(state S) (T, S)) T {
	r := unitOf(ctx).UpdateState(func(state any) (any, any) {
		if _, ok := state.(S); !ok && state != nil {
			panic(fmt.Sprintf("workflow.UpdateState: the phase state is a %T, not a %s", state, typeName[S]()))
		}
		return fn(as[S](state))
	})
	return as[T](r)
}
