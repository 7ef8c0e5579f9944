package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Func is a workflow function as the replay core sees it: JSON in, JSON
// out. The workflow package wraps typed functions into it.
type Func func(u *Unit, input json.RawMessage) (json.RawMessage, error)

// Config configures an Instance.
type Config struct {
	// Workflow is the workflow function. Required.
	Workflow Func
	// RunID names the run, for logs and Info. Optional.
	RunID string
	// Logger receives what workflow code logs through Unit.Logger, except
	// while it replays. Defaults to discarding.
	Logger *slog.Logger
}

// Instance is one run of a workflow held in memory: its coroutines, parked
// where the history left them. It is fed the run's history, replays what
// was already decided (returning recorded results instead of running
// anything) and decides new activations.
//
// Keep an instance between activations (sticky execution) and feed it
// only the events appended since (from Len on); Close it to evict it (an
// instance merely dropped keeps its goroutines). A new instance fed the
// whole history reaches exactly the same state.
//
// An Instance is not safe for concurrent use. After an error (a
// *NonDeterminismError, a malformed history) it is unusable: close it and
// replay the history in a new one once the cause is fixed.
type Instance struct {
	cfg Config
	// attrDecl are the search attributes the workflow declares
	// (Unit.DeclareAttributes).
	attrDecl map[string]hephtype.AttrType

	// Scheduler.
	cos     []*coroutine
	nextCo  int
	running *coroutine
	yield   chan struct{}
	err     error // sticky
	closed  bool

	// History.
	seen       int     // history events consumed or produced
	pending    []Event // external events not yet delivered
	replaying  bool
	block      []Event // the recorded commands of the activation being replayed
	blockPos   []int   // their positions in the history, from 1
	cursor     int
	activation int

	// The activation being decided.
	out          []Command
	publishedNow json.RawMessage

	// Workflow state.
	started   bool
	name      string
	input     json.RawMessage
	startTime time.Time
	now       time.Time
	pcg       *rand.PCG
	rng       *rand.Rand
	nextSeq   int
	futures   map[int]*future
	signals   []signal
	published json.RawMessage
	phase     *phase
	patches   map[string]bool
	updates   map[string]int // accepted update id -> seq
	children  map[int]string // open children: seq -> workflow
	inUpdate  bool           // an UpdateState closure runs
	finished  bool
	final     Command
}

// New returns an instance that has seen no history yet.
func New(cfg *Config) (*Instance, error) {
	if cfg == nil || cfg.Workflow == nil {
		return nil, errors.New("replay: Config.Workflow is required")
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Instance{
		cfg:      c,
		yield:    make(chan struct{}),
		nextSeq:  1,
		futures:  map[int]*future{},
		patches:  map[string]bool{},
		updates:  map[string]int{},
		children: map[int]string{},
	}, nil
}

// Close ends the instance's coroutines. It is safe to call twice.
func (in *Instance) Close() {
	if in.closed {
		return
	}
	in.closed = true
	in.killAll()
}

// Len returns how many history events the instance has seen: those fed to
// it and those its decisions produced. Feed it the history from there.
func (in *Instance) Len() int { return in.seen }

// Err returns the error that made the instance unusable, if any.
func (in *Instance) Err() error { return in.err }

func (in *Instance) usable() error {
	if in.closed {
		return ErrClosed
	}
	return in.err
}

// future is the pending outcome of a command: an activity, a timer or a
// child.
type future struct {
	seq  int
	kind hephtype.EventKind // the kind of the command's event
	cmd  Command            // the command that opened it (Outstanding)
	name string
	done bool
	data json.RawMessage
	err  error
}

// signal is a buffered signal.
type signal struct {
	name    string
	payload json.RawMessage
}

// Replay feeds recorded history: the events appended since the instance
// last saw the history (all of it, for a new instance). Recorded
// activations are replayed; events after the last one wait for the next
// Decide. Feed whole transactions: a decision event together with the
// commands written after it.
func (in *Instance) Replay(events []Event) error {
	if err := in.usable(); err != nil {
		return err
	}
	for i := 0; i < len(events); {
		e := events[i]
		switch classify(e.Kind) {
		case classExternal:
			in.pending = append(in.pending, e)
			i++
		case classInfo:
			i++
		case classDecision:
			j := i + 1
			for j < len(events) && classify(events[j].Kind) != classExternal && classify(events[j].Kind) != classDecision {
				j++
			}
			t, err := decisionTime(e)
			if err != nil {
				return in.fail(err)
			}
			block := []Event{} // not nil: a recorded activation
			var pos []int
			for k, c := range events[i+1 : j] {
				if classify(c.Kind) == classCommand {
					block = append(block, c)
					pos = append(pos, in.seen+i+2+k)
				} else if classify(c.Kind) == classUnknown {
					return in.fail(fmt.Errorf("replay: history event %d has unknown kind %q", in.seen+i+1, c.Kind))
				}
			}
			var ups []UpdateRequest
			for _, c := range block {
				if c.Kind == hephtype.EventUpdateAccepted {
					ups = append(ups, UpdateRequest{ID: c.Ref, Name: c.Name, Args: c.Data})
				}
			}
			in.blockPos = pos
			if _, err := in.activate(t, ups, block); err != nil {
				return err
			}
			i = j
		case classCommand:
			return in.fail(fmt.Errorf("replay: history event %d (%s) is a command outside any decision", in.seen+i+1, e))
		default:
			return in.fail(fmt.Errorf("replay: history event %d has unknown kind %q", in.seen+i+1, e.Kind))
		}
	}
	in.seen += len(events)
	return nil
}

func (in *Instance) fail(err error) error {
	if in.err == nil {
		in.err = err
	}
	return in.err
}

// UpdateRequest is an update delivered to an activation.
type UpdateRequest struct {
	// ID identifies the update (the caller's request); it is unique per
	// run. A duplicate is not delivered again.
	ID   string
	Name string
	Args json.RawMessage
}

// UpdateOutcome is what became of an update request in an activation.
type UpdateOutcome struct {
	ID       string
	Accepted bool
	// Duplicate: an update with this ID was accepted before; nothing new
	// happened.
	Duplicate bool
	// Err is why it was rejected: ErrUpdateNotAccepted, or what the
	// validator (or the decoding of the arguments) returned. A rejected
	// update writes nothing to history.
	Err error
}

// Activation is the input of a decision.
type Activation struct {
	// Events is the history appended since the instance last saw it.
	Events []Event
	// Time is the activation time: what workflow code sees as now.
	Time time.Time
	// Updates are the update requests to deliver, in order.
	Updates []UpdateRequest
}

// Decision is the output of an activation: what the runtime writes and
// does, in one transaction.
type Decision struct {
	// History is what to append: a decision event followed by the event of
	// each command. Empty when nothing happened (no new event to deliver
	// and no update accepted): then write nothing.
	History []Event
	// Commands are what the runtime must do, in order.
	Commands []Command
	// Updates holds the outcome of each update request, in order.
	Updates []UpdateOutcome
	// Published is the state the workflow published last in this
	// activation, or nil when it published nothing: queries read it.
	Published json.RawMessage
	// Status is the run's status after the decision: running (an activity
	// or child is outstanding), waiting (only timers, signals or updates
	// can move it), or terminal.
	Status hephtype.RunStatus
	// Waits is what the workflow waits for after the decision (see
	// Instance.Waits).
	Waits []Wait
}

// Decide feeds the events appended since the instance last saw the
// history, then decides a new activation: it delivers what the history
// has not delivered yet and the update requests, and runs the workflow
// until every unit waits.
//
// The decision assumes that its History is appended right after the
// events fed so far. If the runtime does not commit it, the instance is
// ahead of the stored history: drop it.
func (in *Instance) Decide(a *Activation) (*Decision, error) {
	if a.Time.IsZero() {
		return nil, errors.New("replay: Activation.Time is required")
	}
	if err := in.Replay(a.Events); err != nil {
		return nil, err
	}
	if !in.started && len(in.pending) == 0 {
		return nil, in.fail(errors.New("replay: the history has no run_started event"))
	}
	d := &Decision{}
	if in.finished {
		// A late event or update: the run is over.
		for _, u := range a.Updates {
			d.Updates = append(d.Updates, UpdateOutcome{ID: u.ID, Err: &UpdateRejectedError{ID: u.ID, Name: u.Name, Err: ErrUpdateNotAccepted}})
		}
		in.pending = nil
		d.Status = in.status()
		return d, nil
	}
	if len(in.pending) == 0 && len(a.Updates) == 0 {
		d.Status = in.status()
		return d, nil
	}
	delivered := len(in.pending) > 0
	prevNow := in.now
	outcomes, err := in.activate(a.Time, a.Updates, nil)
	if err != nil {
		return nil, err
	}
	d.Updates = outcomes
	d.Status = in.status()
	if !delivered && len(in.out) == 0 {
		// Only rejected (or duplicate) updates: nothing happened.
		in.now = prevNow
		in.activation--
		return d, nil
	}
	d.History = append(d.History, decisionEvent(a.Time))
	for _, c := range in.out {
		d.History = append(d.History, c.Event())
	}
	d.Commands = in.out
	d.Published = in.publishedNow
	d.Waits = in.Waits()
	in.out = nil
	in.seen += len(d.History)
	return d, nil
}

func (in *Instance) status() hephtype.RunStatus {
	if in.finished {
		switch in.final.(type) {
		case CompleteWorkflow:
			return hephtype.StatusCompleted
		case ContinueAsNew:
			return hephtype.StatusContinued
		default:
			return hephtype.StatusFailed
		}
	}
	for _, f := range in.futures {
		if f.kind != hephtype.EventTimerStarted {
			return hephtype.StatusRunning
		}
	}
	return hephtype.StatusWaiting
}

// activate runs one activation at time t: it delivers the pending events,
// runs the units, then offers the updates. recorded is nil for a new
// activation; on replay it holds (non-nil, maybe empty) the commands the
// activation recorded, which the code must issue again, and updates are
// the recorded ones.
func (in *Instance) activate(t time.Time, updates []UpdateRequest, recorded []Event) ([]UpdateOutcome, error) {
	in.activation++
	in.now = t
	in.replaying = recorded != nil
	in.block, in.cursor = recorded, 0
	in.out, in.publishedNow = nil, nil
	ext := in.pending
	in.pending = nil
	defer func() { in.replaying, in.block, in.blockPos = false, nil, nil }()

	if in.finished {
		if len(recorded) > 0 {
			return nil, in.fail(in.nde(&recorded[0], in.posOf(0), nil, "", "the run had already ended before this decision"))
		}
		return nil, nil
	}
	for _, e := range ext {
		if err := in.deliver(e); err != nil {
			return nil, in.fail(err)
		}
	}
	if err := in.run(); err != nil {
		return nil, err
	}
	var outcomes []UpdateOutcome
	for _, u := range updates {
		o, err := in.offerUpdate(u, recorded == nil)
		if err != nil {
			return nil, in.fail(err)
		}
		outcomes = append(outcomes, o)
		if o.Accepted && !o.Duplicate {
			if err := in.run(); err != nil {
				return nil, err
			}
		}
	}
	if in.finished {
		// Whatever still runs is bound to nothing: the run is over.
		in.killAll()
	}
	if recorded != nil {
		for in.cursor < len(in.block) && in.block[in.cursor].Kind == hephtype.EventMarker {
			in.cursor++ // a patch marker the code no longer asks for
		}
		if in.cursor < len(in.block) {
			rec := in.block[in.cursor]
			nde := in.nde(&rec, in.posOf(in.cursor), nil, "", "")
			for _, co := range in.cos {
				if !co.done && co.wait != "" {
					if co.file != "" {
						nde.CommandAt = co.file + ":" + strconv.Itoa(co.line)
					}
					nde.Waiting = co.wait
					break
				}
			}
			return nil, in.fail(nde)
		}
	}
	return outcomes, nil
}

// posOf returns the history position of the recorded command i of the
// activation being replayed, or 0.
func (in *Instance) posOf(i int) int {
	if i < len(in.blockPos) {
		return in.blockPos[i]
	}
	return 0
}

// deliver applies one external event.
func (in *Instance) deliver(e Event) error {
	if e.Kind == hephtype.EventRunStarted {
		if in.started {
			return errors.New("replay: a second run_started event")
		}
		d, err := decodeStarted(e)
		if err != nil {
			return err
		}
		in.started = true
		in.name, in.input, in.startTime = e.Name, d.Input, d.Time
		in.pcg = rand.NewPCG(d.Seed, d.Seed^0x9e3779b97f4a7c15)
		in.rng = rand.New(in.pcg)
		in.startRoot()
		return nil
	}
	if !in.started {
		return fmt.Errorf("replay: %s before run_started", e)
	}
	switch e.Kind {
	case hephtype.EventSignalReceived:
		if p := in.phase; p != nil && !p.stopping && p.signals[e.Name] != nil {
			p.queue = append(p.queue, message{name: e.Name, payload: e.Data})
		} else {
			in.signals = append(in.signals, signal{name: e.Name, payload: e.Data})
		}
		return nil
	case hephtype.EventStepCompleted, hephtype.EventStepFailed, hephtype.EventTimerFired,
		hephtype.EventChildCompleted, EventChildFailed:
		f := in.futures[e.ID]
		if f == nil {
			if e.ID > 0 && e.ID < in.nextSeq {
				return nil // stale: the timer was cancelled, say
			}
			return in.nde(&e, 0, nil, "", "the history reports the outcome of a command the code never issued")
		}
		if f.kind != outcomeOf[e.Kind] {
			return in.nde(&e, 0, nil, "", fmt.Sprintf("the history reports an outcome for command #%d, which the code issued as %s", e.ID, f.kind))
		}
		f.done = true
		switch e.Kind {
		case hephtype.EventStepCompleted, hephtype.EventChildCompleted:
			f.data = e.Data
		case hephtype.EventStepFailed:
			f.err = &ActivityFailure{Name: f.name, Seq: f.seq, Attempt: e.Attempt, Message: e.Error, Data: e.Data}
		case EventChildFailed:
			f.err = &ChildFailure{Workflow: f.name, Seq: f.seq, Message: e.Error}
		}
		if f.kind == hephtype.EventChildStarted {
			delete(in.children, f.seq)
		}
		delete(in.futures, e.ID)
		return nil
	}
	return fmt.Errorf("replay: cannot deliver %s", e)
}

// outcomeOf maps the kinds of events that report an outcome to the kind of
// the command whose outcome they report.
var outcomeOf = map[hephtype.EventKind]hephtype.EventKind{
	hephtype.EventStepCompleted:  hephtype.EventStepScheduled,
	hephtype.EventStepFailed:     hephtype.EventStepScheduled,
	hephtype.EventTimerFired:     hephtype.EventTimerStarted,
	hephtype.EventChildCompleted: hephtype.EventChildStarted,
	EventChildFailed:             hephtype.EventChildStarted,
}

// startRoot creates the coroutine of the workflow function.
func (in *Instance) startRoot() {
	u := &Unit{in: in, role: roleRoot}
	u.co = in.spawn("workflow", func() {
		var out json.RawMessage
		var err error
		if perr := protect(func() { out, err = in.cfg.Workflow(u, in.input) }); perr != nil {
			err = perr
		}
		in.finish(u, out, err)
	})
}

// finish ends the run after the workflow function returned: it cancels
// open children, then completes, fails or continues the run.
func (in *Instance) finish(u *Unit, out json.RawMessage, err error) {
	var cmd Command
	var can *ContinueAsNewError
	switch {
	case err == nil:
		if out == nil {
			out = json.RawMessage("null")
		}
		cmd = CompleteWorkflow{Output: out}
	case errors.As(err, &can):
		cmd = ContinueAsNew{Input: can.Input}
	default:
		fw := FailWorkflow{Error: err.Error()}
		var fd failureData
		if errors.As(err, &fd) {
			fw.Data = fd.FailureData()
		}
		cmd = fw
	}
	seqs := make([]int, 0, len(in.children))
	for s := range in.children {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		in.issueRef(u.co, CancelChild{Seq: s, Workflow: in.children[s]})
		delete(in.futures, s)
		delete(in.children, s)
	}
	in.issueRef(u.co, cmd)
	in.finished, in.final = true, cmd
}

// issue records a new command that takes a sequence number, from the
// coroutine co: build makes it from the number. On replay it must match
// the recorded command at the cursor, whose number it adopts; on a
// mismatch the instance fails and co is aborted.
func (in *Instance) issue(co *coroutine, build func(seq int) Command) int {
	seq, _ := in.record(co, build)
	return seq
}

// issueRef records, from the coroutine co, a command that takes no
// sequence number of its own.
func (in *Instance) issueRef(co *coroutine, cmd Command) {
	in.recordRef(co, cmd)
}

// record is issue for the driver (co nil), which gets the mismatch as an
// error.
func (in *Instance) record(co *coroutine, build func(seq int) Command) (int, error) {
	seq := in.nextSeq
	cmd := build(seq)
	if in.replaying {
		rec, err := in.match(co, cmd)
		if err != nil {
			return 0, err
		}
		if rec.ID != seq {
			seq = rec.ID
			cmd = build(seq)
		}
	}
	in.nextSeq = seq + 1
	in.out = append(in.out, cmd)
	return seq, nil
}

func (in *Instance) recordRef(co *coroutine, cmd Command) {
	if in.replaying {
		if _, err := in.match(co, cmd); err != nil {
			return
		}
	}
	in.out = append(in.out, cmd)
}

// match checks cmd against the recorded commands at the cursor, skipping
// patch markers the code does not ask for, and consumes the match.
func (in *Instance) match(co *coroutine, cmd Command) (Event, error) {
	ev := matchEvent(cmd)
	for in.cursor < len(in.block) {
		rec := in.block[in.cursor]
		if sameCommand(rec, ev) {
			if what, _, _ := difference(rec, cmd); what != "" {
				// The same command, with another input or queue.
				return Event{}, in.mismatch(co, &rec, in.posOf(in.cursor), cmd)
			}
			in.cursor++
			return rec, nil
		}
		if rec.Kind == hephtype.EventMarker {
			in.cursor++
			continue
		}
		return Event{}, in.mismatch(co, &rec, in.posOf(in.cursor), cmd)
	}
	return Event{}, in.mismatch(co, nil, 0, cmd)
}

func (in *Instance) mismatch(co *coroutine, rec *Event, pos int, cmd Command) error {
	var at string
	if co != nil {
		at = site()
	}
	err := in.fail(in.nde(rec, pos, cmd, at, ""))
	if co != nil {
		abort()
	}
	return err
}

// markerAhead reports whether the recorded commands at the cursor hold a
// marker for patch before any other command.
func (in *Instance) markerAhead(patch string) bool {
	for i := in.cursor; i < len(in.block) && in.block[i].Kind == hephtype.EventMarker; i++ {
		if in.block[i].Name == patch {
			return true
		}
	}
	return false
}

// Published returns the state the workflow published last (nil if none):
// what queries read. Queries never replay.
func (in *Instance) Published() json.RawMessage { return in.published }

// Snapshot describes the state of an instance: two instances that saw the
// same history have equal snapshots.
type Snapshot struct {
	Workflow    string
	Status      hephtype.RunStatus
	Final       string
	Now         time.Time
	Activations int
	Seen        int
	NextSeq     int
	Pending     []string // outstanding commands, by sequence number
	Undelivered []string // external events waiting for the next activation
	Signals     []string // buffered signals, oldest first
	Units       []string // live units and what they wait for
	Phase       string
	Published   string
	Patches     []string
	Updates     []string
	Children    []string
	Rand        string
}

// Snapshot returns the instance's state.
func (in *Instance) Snapshot() Snapshot {
	s := Snapshot{
		Workflow: in.name, Status: in.status(), Now: in.now, Activations: in.activation,
		Seen: in.seen, NextSeq: in.nextSeq, Published: string(in.published),
	}
	if in.final != nil {
		s.Final = in.final.String() + " " + string(in.final.Event().Data)
	}
	seqs := make([]int, 0, len(in.futures))
	for k := range in.futures {
		seqs = append(seqs, k)
	}
	slices.Sort(seqs)
	for _, k := range seqs {
		f := in.futures[k]
		s.Pending = append(s.Pending, fmt.Sprintf("#%d %s %q", k, f.kind, f.name))
	}
	for _, e := range in.pending {
		s.Undelivered = append(s.Undelivered, e.String())
	}
	for _, sg := range in.signals {
		s.Signals = append(s.Signals, sg.name+"="+string(sg.payload))
	}
	for _, co := range in.cos {
		if !co.done {
			s.Units = append(s.Units, co.name+": "+co.wait)
		}
	}
	if p := in.phase; p != nil {
		st, err := json.Marshal(p.state)
		if err != nil {
			st = []byte(fmt.Sprintf("%#v", p.state))
		}
		s.Phase = fmt.Sprintf("state=%s queue=%d stopping=%t timedOut=%t async=%d", st, len(p.queue), p.stopping, p.timedOut, p.async)
	}
	for k, v := range in.patches {
		s.Patches = append(s.Patches, k+"="+strconv.FormatBool(v))
	}
	slices.Sort(s.Patches)
	for k, v := range in.updates {
		s.Updates = append(s.Updates, k+"=#"+strconv.Itoa(v))
	}
	slices.Sort(s.Updates)
	for k, v := range in.children {
		s.Children = append(s.Children, fmt.Sprintf("#%d %s", k, v))
	}
	slices.Sort(s.Children)
	if in.pcg != nil {
		b, _ := in.pcg.MarshalBinary()
		s.Rand = fmt.Sprintf("%x", b)
	}
	return s
}

// Outstanding returns the commands the history fed so far issued and has
// not reported the outcome of: the activities, timers and children still
// open, by sequence number. A run reset to this point of its history
// (a copy of it) must execute them again.
func (in *Instance) Outstanding() []Command {
	seqs := make([]int, 0, len(in.futures))
	for s, f := range in.futures {
		if !f.done && f.cmd != nil {
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	out := make([]Command, 0, len(seqs))
	for _, s := range seqs {
		out = append(out, in.futures[s].cmd)
	}
	return out
}

// Status returns the run's status after the history fed so far: running
// (an activity or child is outstanding), waiting, or terminal.
func (in *Instance) Status() hephtype.RunStatus { return in.status() }
