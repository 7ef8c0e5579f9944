package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// role is what kind of unit workflow code runs in; it decides which
// primitives it may call.
type role uint8

const (
	roleRoot    role = iota // the workflow function
	roleBranch              // a parallel branch
	roleHandler             // a sync phase handler (runs in the workflow function's coroutine)
	roleAsync               // an async phase handler
)

// Unit is the handle through which workflow code reaches the scheduler:
// the workflow function, each parallel branch and each phase handler gets
// its own. Its methods are the workflow primitives, untyped (JSON); the
// workflow package types them.
//
// A Unit may only be used by the code it was given to: a parallel branch
// that calls a primitive through its parent's handle panics.
type Unit struct {
	in   *Instance
	co   *coroutine
	role role
	// phase is the phase whose state UpdateState changes (async handlers
	// and their branches).
	phase *phase
	// Parallel branches are named after their parent.
	parallels int
}

// Misuse errors, raised as panics by the primitives (they are bugs of the
// workflow code, reported where they happen).
var (
	ErrWrongUnit        = errors.New("workflow: primitive called through the Context of another unit (use the Context passed to the branch or handler) or from a goroutine the workflow started")
	ErrInUpdateState    = errors.New("workflow: UpdateState closures must not call workflow primitives")
	ErrNotAsyncHandler  = errors.New("workflow: UpdateState can only be called from an async phase handler")
	ErrPhaseNotAllowed  = errors.New("workflow: Phase can only be called from the workflow function itself, outside any other phase")
	ErrDuplicateHandler = errors.New("workflow: two phase handlers for the same signal or update")
)

// abort ends the calling coroutine: the instance failed or is closing.
func abort() { runtime.Goexit() }

// enter is called first by every primitive.
func (u *Unit) enter() {
	in := u.in
	if in.running != u.co || u.co == nil {
		if u.co != nil && (u.co.kill || in.err != nil) {
			abort()
		}
		panic(ErrWrongUnit)
	}
	if u.co.kill || in.err != nil || (in.finished && u.role != roleRoot) {
		abort()
	}
	if in.inUpdate {
		panic(ErrInUpdateState)
	}
}

// Info describes the run.
type Info struct {
	Workflow  string
	RunID     string
	StartTime time.Time
}

// Info returns what the unit's run is.
func (u *Unit) Info() Info {
	return Info{Workflow: u.in.name, RunID: u.in.cfg.RunID, StartTime: u.in.startTime}
}

func (in *Instance) newFuture(seq int, kind hephtype.EventKind, name string) *future {
	f := &future{seq: seq, kind: kind, name: name}
	if n := len(in.out); n > 0 {
		f.cmd = in.out[n-1] // the command issue just recorded
	}
	in.futures[seq] = f
	return f
}

// ExecuteActivity schedules an activity and waits for its outcome.
func (u *Unit) ExecuteActivity(name string, input json.RawMessage, opts ActivityOptions) (json.RawMessage, error) {
	u.enter()
	at := u.in.recordSite()
	seq := u.in.issue(u.co, func(seq int) Command {
		return ScheduleActivity{Seq: seq, Name: name, Input: input, Options: opts, At: at}
	})
	f := u.in.newFuture(seq, hephtype.EventStepScheduled, name)
	u.co.blockFor([]Wait{{Kind: WaitActivity, Name: name, Seq: seq}}, "activity #"+strconv.Itoa(seq)+" "+strconv.Quote(name), func() bool { return f.done })
	return f.data, f.err
}

// Sleep starts a durable timer and waits until it fires. A duration of
// zero or less returns at once and issues nothing.
func (u *Unit) Sleep(d time.Duration) error {
	u.enter()
	if d <= 0 {
		return nil
	}
	in := u.in
	at := in.recordSite()
	seq := in.issue(u.co, func(seq int) Command {
		return StartTimer{Seq: seq, Duration: d, FireAt: in.now.Add(d), At: at}
	})
	f := in.newFuture(seq, hephtype.EventTimerStarted, "")
	due := in.now.Add(d)
	u.co.blockFor([]Wait{{Kind: WaitTimer, Seq: seq, Due: due}}, "timer #"+strconv.Itoa(seq)+" ("+d.String()+")", func() bool { return f.done })
	return nil
}

// WaitSignal waits for a signal with the given name and consumes it:
// signals are buffered by name, oldest first, from the moment the run
// starts; none is ever dropped.
func (u *Unit) WaitSignal(name string) (json.RawMessage, error) {
	u.enter()
	in := u.in
	idx := func() int {
		for i, s := range in.signals {
			if s.name == name {
				return i
			}
		}
		return -1
	}
	u.co.blockFor([]Wait{{Kind: WaitSignal, Name: name}}, "signal "+strconv.Quote(name), func() bool { return idx() >= 0 })
	i := idx()
	s := in.signals[i]
	in.signals = append(in.signals[:i:i], in.signals[i+1:]...)
	return s.payload, nil
}

// WaitSignalFor waits for a signal with the given name, as WaitSignal,
// or for a durable timer of d, whichever comes first: ok is false when
// the timer fired first. A signal that wins cancels the timer. A d of
// zero or less waits for the signal only.
func (u *Unit) WaitSignalFor(name string, d time.Duration) (payload json.RawMessage, ok bool, err error) {
	if d <= 0 {
		p, err := u.WaitSignal(name)
		return p, err == nil, err
	}
	u.enter()
	in := u.in
	idx := func() int {
		for i, s := range in.signals {
			if s.name == name {
				return i
			}
		}
		return -1
	}
	if i := idx(); i >= 0 {
		s := in.signals[i]
		in.signals = append(in.signals[:i:i], in.signals[i+1:]...)
		return s.payload, true, nil
	}
	at := in.recordSite()
	seq := in.issue(u.co, func(seq int) Command {
		return StartTimer{Seq: seq, Duration: d, FireAt: in.now.Add(d), At: at}
	})
	f := in.newFuture(seq, hephtype.EventTimerStarted, "")
	due := in.now.Add(d)
	u.co.blockFor([]Wait{{Kind: WaitSignal, Name: name}, {Kind: WaitTimer, Seq: seq, Due: due}},
		"signal "+strconv.Quote(name)+" or timer #"+strconv.Itoa(seq)+" ("+d.String()+")",
		func() bool { return f.done || idx() >= 0 })
	if i := idx(); i >= 0 {
		s := in.signals[i]
		in.signals = append(in.signals[:i:i], in.signals[i+1:]...)
		if !f.done {
			in.issueRef(u.co, CancelTimer{Seq: seq})
			delete(in.futures, seq)
		}
		return s.payload, true, nil
	}
	return nil, false, nil
}

// Publish replaces the state queries read.
func (u *Unit) Publish(state json.RawMessage) {
	u.enter()
	u.in.published = state
	u.in.publishedNow = state
}

// Now returns the activation time.
func (u *Unit) Now() time.Time {
	u.enter()
	return u.in.now
}

// Random returns a number in [0, 1) from the run's deterministic random
// source, seeded by the history.
func (u *Unit) Random() float64 {
	u.enter()
	return u.in.rng.Float64()
}

// RandomUint64 returns a 64-bit number from the run's deterministic random
// source.
func (u *Unit) RandomUint64() uint64 {
	u.enter()
	return u.in.rng.Uint64()
}

// Patched reports whether the run takes the new code path of a patch: true
// on new runs and on runs whose history recorded the patch when they first
// reached it, false on runs that reached that point before the code had
// the patch. The answer is the same for every call in a run.
func (u *Unit) Patched(patch string) bool {
	u.enter()
	in := u.in
	if v, ok := in.patches[patch]; ok {
		return v
	}
	v := !in.replaying || in.markerAhead(patch)
	if v {
		in.issue(u.co, func(seq int) Command { return RecordMarker{Seq: seq, Patch: patch} })
	}
	in.patches[patch] = v
	return v
}

// DeprecatePatch marks a patch whose old code path is gone. It records a
// marker on new runs; on replay it consumes the patch's marker if the
// history has one there, and accepts its absence.
func (u *Unit) DeprecatePatch(patch string) {
	u.enter()
	in := u.in
	if _, ok := in.patches[patch]; ok {
		return
	}
	if !in.replaying || in.markerAhead(patch) {
		in.issue(u.co, func(seq int) Command { return RecordMarker{Seq: seq, Patch: patch, Deprecated: true} })
	}
	in.patches[patch] = true
}

// DeclareAttributes records the search attributes the workflow declares
// (the workflow package calls it before the workflow function runs):
// UpsertAttributes is checked against them by the caller.
func (u *Unit) DeclareAttributes(decl map[string]hephtype.AttrType) { u.in.attrDecl = decl }

// DeclaredAttributes returns what DeclareAttributes recorded.
func (u *Unit) DeclaredAttributes() map[string]hephtype.AttrType { return u.in.attrDecl }

// UpsertAttributes issues an UpsertAttributes command with attrs (as the
// runs table stores them). On replay it matches the recorded command; the
// runtime applies only a new one, with its decision.
func (u *Unit) UpsertAttributes(attrs json.RawMessage) {
	u.enter()
	u.in.issueRef(u.co, UpsertAttributes{Attrs: attrs})
}

// Logger returns a logger that is silent while the workflow replays.
func (u *Unit) Logger() *slog.Logger {
	in := u.in
	return slog.New(&replayHandler{in: in, h: in.cfg.Logger.Handler()}).With(
		slog.String("workflow", in.name), slog.String("run_id", in.cfg.RunID))
}

type replayHandler struct {
	in *Instance
	h  slog.Handler
}

func (r *replayHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !r.in.replaying && r.h.Enabled(ctx, l)
}
func (r *replayHandler) Handle(ctx context.Context, rec slog.Record) error {
	if r.in.replaying {
		return nil
	}
	return r.h.Handle(ctx, rec)
}
func (r *replayHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &replayHandler{in: r.in, h: r.h.WithAttrs(as)}
}
func (r *replayHandler) WithGroup(name string) slog.Handler {
	return &replayHandler{in: r.in, h: r.h.WithGroup(name)}
}

// BranchResult is the outcome of one parallel branch.
type BranchResult struct {
	Value any
	Err   error
}

// Parallel runs the branches as units of their own, scheduled in rounds
// in input order, and waits until every one has finished. A branch that
// fails (or panics) leaves an error in its slot; the others run on.
func (u *Unit) Parallel(branches []func(u *Unit) (any, error)) []BranchResult {
	u.enter()
	res := make([]BranchResult, len(branches))
	if len(branches) == 0 {
		return res
	}
	in := u.in
	u.parallels++
	prefix := fmt.Sprintf("%s/parallel%d", u.co.name, u.parallels)
	remaining := len(branches)
	var ph *phase
	if u.role == roleAsync || u.role == roleBranch {
		ph = u.phase
	}
	for i, b := range branches {
		bu := &Unit{in: in, role: roleBranch, phase: ph}
		bu.co = in.spawn(prefix+"/branch"+strconv.Itoa(i), func() {
			var v any
			var err error
			if perr := protect(func() { v, err = b(bu) }); perr != nil {
				err = perr
			}
			res[i] = BranchResult{Value: v, Err: err}
			remaining--
		})
	}
	u.co.block(fmt.Sprintf("parallel (%d branches)", len(branches)), func() bool { return remaining == 0 })
	return res
}

// Child is a child workflow started by the workflow.
type Child struct {
	f *future
}

// StartChild starts a child workflow; the child is cancelled if the
// workflow ends before it.
func (u *Unit) StartChild(workflow string, input json.RawMessage) *Child {
	u.enter()
	in := u.in
	at := in.recordSite()
	seq := in.issue(u.co, func(seq int) Command { return StartChild{Seq: seq, Workflow: workflow, Input: input, At: at} })
	in.children[seq] = workflow
	return &Child{f: in.newFuture(seq, hephtype.EventChildStarted, workflow)}
}

// WaitChild waits for the outcome of a child.
func (u *Unit) WaitChild(c *Child) (json.RawMessage, error) {
	u.enter()
	f := c.f
	u.co.blockFor([]Wait{{Kind: WaitChild, Name: f.name, Seq: f.seq}}, "child #"+strconv.Itoa(f.seq)+" "+strconv.Quote(f.name), func() bool { return f.done })
	return f.data, f.err
}
