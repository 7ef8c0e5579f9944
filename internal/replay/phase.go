package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// SignalHandler handles a signal inside a phase.
type SignalHandler struct {
	Name string
	// Decode turns the payload into the handler's argument.
	Decode func(json.RawMessage) (any, error)
	// Handle runs in the phase's coroutine, one message at a time.
	Handle func(u *Unit, args, state any) HandlerResult
}

// UpdateHandler handles an update inside a phase.
type UpdateHandler struct {
	Name   string
	Decode func(json.RawMessage) (any, error)
	// Validate, optional, accepts or rejects an update before anything is
	// written. It runs in the driver, on first delivery only: on replay
	// acceptance comes from the history. It must be pure.
	Validate func(args, state any) error
	Handle   func(u *Unit, args, state any) HandlerResult
}

// HandlerResult is what a sync handler returns.
type HandlerResult struct {
	// State is the phase's new state (ignored when Err is set).
	State any
	// Stop ends the phase after this message.
	Stop bool
	// Reply is a sync update handler's reply.
	Reply json.RawMessage
	// Err fails a sync update: the caller gets it, the state is unchanged.
	Err error
	// Async, when set, runs as a unit of its own while the phase goes on
	// dispatching; for an update, what it returns is the reply.
	Async func(u *Unit) (json.RawMessage, error)
}

// PhaseSpec describes a phase.
type PhaseSpec struct {
	Initial any
	Signals []SignalHandler
	Updates []UpdateHandler
	// Timeout, when positive, ends the phase through a durable timer.
	Timeout time.Duration
}

type phase struct {
	state    any
	signals  map[string]*SignalHandler
	updates  map[string]*UpdateHandler
	queue    []message
	stopping bool
	timedOut bool
	async    int
	timer    *future
	due      time.Time // when timer fires
}

// message is a signal or an accepted update waiting for dispatch.
type message struct {
	name    string
	payload json.RawMessage // signal
	update  bool
	seq     int    // update: the AcceptUpdate's
	id      string // update
	args    any    // update, decoded
}

// Phase runs a message-driven phase: it dispatches signals and accepted
// updates to their handlers until a handler stops it or its timeout fires,
// then waits for its async handlers and returns the final state.
// timedOut tells a timeout from a stop.
func (u *Unit) Phase(spec *PhaseSpec) (state any, timedOut bool, err error) {
	u.enter()
	in := u.in
	if u.role != roleRoot || in.phase != nil {
		return spec.Initial, false, ErrPhaseNotAllowed
	}
	p := &phase{state: spec.Initial, signals: map[string]*SignalHandler{}, updates: map[string]*UpdateHandler{}}
	for i := range spec.Signals {
		h := &spec.Signals[i]
		if p.signals[h.Name] != nil {
			return spec.Initial, false, fmt.Errorf("%w: signal %q", ErrDuplicateHandler, h.Name)
		}
		p.signals[h.Name] = h
	}
	for i := range spec.Updates {
		h := &spec.Updates[i]
		if p.updates[h.Name] != nil {
			return spec.Initial, false, fmt.Errorf("%w: update %q", ErrDuplicateHandler, h.Name)
		}
		p.updates[h.Name] = h
	}
	// Signals that arrived before the phase began go to its handlers, in
	// order.
	kept := in.signals[:0:0]
	for _, s := range in.signals {
		if p.signals[s.name] != nil {
			p.queue = append(p.queue, message{name: s.name, payload: s.payload})
		} else {
			kept = append(kept, s)
		}
	}
	in.signals = kept
	if spec.Timeout > 0 {
		at := in.recordSite()
		seq := in.issue(u.co, func(seq int) Command {
			return StartTimer{Seq: seq, Duration: spec.Timeout, FireAt: in.now.Add(spec.Timeout), At: at}
		})
		p.timer = in.newFuture(seq, hephtype.EventTimerStarted, "")
		p.due = in.now.Add(spec.Timeout)
	}
	in.phase = p

	fired := func() bool { return p.timer != nil && p.timer.done }
	for !p.stopping {
		u.co.blockFor(p.waits(p.due), "phase", func() bool { return len(p.queue) > 0 || fired() })
		if fired() {
			p.stopping, p.timedOut = true, true
			break
		}
		m := p.queue[0]
		p.queue = p.queue[1:]
		p.dispatch(u, m)
	}
	if p.timer != nil && !p.timer.done {
		in.issueRef(u.co, CancelTimer{Seq: p.timer.seq})
		delete(in.futures, p.timer.seq)
	}
	u.co.block("phase: async handlers", func() bool { return p.async == 0 })

	// What the phase did not dispatch: signals go back to the buffer,
	// ahead of those that came since; accepted updates fail.
	var back []signal
	for _, m := range p.queue {
		if !m.update {
			back = append(back, signal{name: m.name, payload: m.payload})
		} else {
			in.issueRef(u.co, CompleteUpdate{Seq: m.seq, UpdateID: m.id, Name: m.name, Error: ErrPhaseEnded.Error()})
		}
	}
	in.signals = append(back, in.signals...)
	in.phase = nil
	return p.state, p.timedOut, nil
}

// dispatch runs the handler of one message in the phase's coroutine.
func (p *phase) dispatch(u *Unit, m message) {
	in := u.in
	hu := &Unit{in: in, co: u.co, role: roleHandler}
	var res HandlerResult
	if !m.update {
		h := p.signals[m.name]
		args, err := h.Decode(m.payload)
		if err != nil {
			u.Logger().Error("signal dropped: its payload does not decode", slog.String("signal", m.name), slog.Any("err", err))
			return
		}
		if perr := protect(func() { res = h.Handle(hu, args, p.state) }); perr != nil {
			u.Logger().Error("signal handler panicked", slog.String("signal", m.name), slog.Any("err", perr))
			return
		}
		p.state = res.State
		if res.Async != nil {
			p.spawnAsync(u, m, res.Async)
		}
		p.stopping = p.stopping || res.Stop
		return
	}
	h := p.updates[m.name]
	if perr := protect(func() { res = h.Handle(hu, m.args, p.state) }); perr != nil {
		res = HandlerResult{Err: perr}
	}
	if res.Err != nil {
		in.issueRef(u.co, CompleteUpdate{Seq: m.seq, UpdateID: m.id, Name: m.name, Error: res.Err.Error()})
		return
	}
	p.state = res.State
	if res.Async != nil {
		p.spawnAsync(u, m, res.Async)
	} else {
		reply := res.Reply
		if reply == nil {
			reply = json.RawMessage("null")
		}
		in.issueRef(u.co, CompleteUpdate{Seq: m.seq, UpdateID: m.id, Name: m.name, Result: reply})
	}
	p.stopping = p.stopping || res.Stop
}

// spawnAsync starts an async handler, bound to the phase.
func (p *phase) spawnAsync(u *Unit, m message, fn func(*Unit) (json.RawMessage, error)) {
	in := u.in
	p.async++
	au := &Unit{in: in, role: roleAsync, phase: p}
	kind := "signal"
	if m.update {
		kind = "update#" + strconv.Itoa(m.seq)
	}
	au.co = in.spawn("async "+kind+" "+strconv.Quote(m.name), func() {
		var reply json.RawMessage
		var err error
		if perr := protect(func() { reply, err = fn(au) }); perr != nil {
			err = perr
		}
		if m.update {
			c := CompleteUpdate{Seq: m.seq, UpdateID: m.id, Name: m.name, Result: reply}
			if err != nil {
				c.Result, c.Error = nil, err.Error()
			} else if c.Result == nil {
				c.Result = json.RawMessage("null")
			}
			in.issueRef(au.co, c)
		} else if err != nil {
			au.Logger().Error("async signal handler failed", slog.String("signal", m.name), slog.Any("err", err))
		}
		p.async--
	})
}

// UpdateState changes the state of the enclosing phase from an async
// handler: fn gets the current state and returns a result and the new
// state. It runs at once and alone (no other unit runs while it does), so
// concurrent handlers never interleave their changes. fn must not call
// workflow primitives.
func (u *Unit) UpdateState(fn func(state any) (result, newState any)) any {
	u.enter()
	if u.phase == nil || (u.role != roleAsync && u.role != roleBranch) {
		panic(ErrNotAsyncHandler)
	}
	in := u.in
	in.inUpdate = true
	defer func() { in.inUpdate = false }()
	r, s := fn(u.phase.state)
	u.phase.state = s
	return r
}

// offerUpdate delivers an update request: it is accepted into the current
// phase or rejected. validate is false on replay, where the history says
// it was accepted.
func (in *Instance) offerUpdate(req UpdateRequest, validate bool) (UpdateOutcome, error) {
	if _, dup := in.updates[req.ID]; dup && validate {
		return UpdateOutcome{ID: req.ID, Accepted: true, Duplicate: true}, nil
	}
	reject := func(err error) (UpdateOutcome, error) {
		if !validate {
			rec, pos := AcceptUpdate{UpdateID: req.ID, Name: req.Name, Args: req.Args}.Event(), 0
			for i, e := range in.block {
				if e.Kind == rec.Kind && e.Ref == req.ID {
					rec, pos = e, in.posOf(i)
				}
			}
			return UpdateOutcome{}, in.nde(&rec, pos, nil, "", "the workflow no longer accepts the update: "+err.Error())
		}
		return UpdateOutcome{ID: req.ID, Err: &UpdateRejectedError{ID: req.ID, Name: req.Name, Err: err}}, nil
	}
	if req.ID == "" {
		return reject(errors.New("the update has no id"))
	}
	p := in.phase
	if in.finished || p == nil || p.stopping || p.updates[req.Name] == nil {
		return reject(ErrUpdateNotAccepted)
	}
	h := p.updates[req.Name]
	args, err := h.Decode(req.Args)
	if err != nil {
		return reject(fmt.Errorf("arguments do not decode: %w", err))
	}
	if validate && h.Validate != nil {
		var verr error
		if perr := protect(func() { verr = h.Validate(args, p.state) }); perr != nil {
			verr = perr
		}
		if verr != nil {
			return reject(verr)
		}
	}
	seq, err := in.record(nil, func(seq int) Command {
		return AcceptUpdate{Seq: seq, UpdateID: req.ID, Name: req.Name, Args: req.Args}
	})
	if err != nil {
		return UpdateOutcome{}, err
	}
	in.updates[req.ID] = seq
	p.queue = append(p.queue, message{name: req.Name, update: true, seq: seq, id: req.ID, args: args})
	return UpdateOutcome{ID: req.ID, Accepted: true}, nil
}
