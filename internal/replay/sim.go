package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Sim is an in-memory stand-in for the durable runtime, for tests: it
// keeps each run's history in a slice, decides activations with an
// Instance (sticky, or fresh each time), runs activities by calling their
// functions, starts children, and fires timers on a virtual clock that
// jumps to the next timer, so a 30-day sleep ends at once.
//
// Nothing happens by itself: tests send signals and updates and move the
// simulation with Settle (activities and children), Drive (also timers),
// Advance (timers due within a duration) or Do (one action of their
// choice). Activity retries happen at once, without backoff.
//
// A Sim is not safe for concurrent use; activity code may call back into
// it (to send a signal while the activity runs, say).
type Sim struct {
	cfg  SimConfig
	now  time.Time
	runs []*SimRun
}

// SimConfig configures a Sim.
type SimConfig struct {
	// Workflows by name: the runs the Sim can start, children included.
	Workflows map[string]Func
	// Activities by name. Scheduling an unknown activity fails it.
	Activities map[string]ActivityFunc
	// Start is the virtual clock's first reading. Defaults to
	// 2025-01-01T00:00:00Z.
	Start time.Time
	// Seed seeds the random source of the first run; each further run
	// gets the next number. Defaults to 1.
	Seed uint64
	// Logger receives the workflows' logs. Defaults to discarding.
	Logger *slog.Logger
	// Fresh replays the whole history in a new Instance for every
	// activation instead of keeping one per run (sticky execution).
	Fresh bool
	// Verify, with sticky instances, replays the whole history in a new
	// Instance after every activation and fails the activation unless
	// both reach the same state.
	Verify bool
	// MaxSteps bounds the actions one Drive performs. Defaults to 10000.
	MaxSteps int
}

// NewSim returns a Sim.
func NewSim(cfg *SimConfig) (*Sim, error) {
	c := *cfg
	if len(c.Workflows) == 0 {
		return nil, errors.New("replay: SimConfig.Workflows is empty")
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = 10000
	}
	return &Sim{cfg: c, now: c.Start}, nil
}

// Now returns the virtual time.
func (s *Sim) Now() time.Time { return s.now }

// Runs returns every run the Sim started, children and continued runs
// included, in the order they started.
func (s *Sim) Runs() []*SimRun { return slices.Clone(s.runs) }

// Workflow returns the name of the run's workflow.
func (r *SimRun) Workflow() string { return r.workflow }

// Close drops every run's instance, ending its coroutines.
func (s *Sim) Close() {
	for _, r := range s.runs {
		r.evict()
	}
}

// SimRun is a run in a Sim.
type SimRun struct {
	sim       *Sim
	id        string
	workflow  string
	fn        Func
	parent    *SimRun
	parentSeq int

	history []Event
	inst    *Instance
	held    int // history length when Hold was called, or -1

	activities map[int]ScheduleActivity
	timers     map[int]StartTimer
	starts     map[int]StartChild
	children   map[int]*SimRun
	updates    map[string]*simUpdate
	status     hephtype.RunStatus
	output     json.RawMessage
	errMsg     string
	published  json.RawMessage
	next       *SimRun
	heartbeats []any
}

type simUpdate struct {
	done   bool
	result json.RawMessage
	err    string
}

// Start starts a run of a workflow and runs its first activation.
func (s *Sim) Start(workflow string, input json.RawMessage) (*SimRun, error) {
	r, err := s.newRun(workflow, input, nil, 0)
	if err != nil {
		return nil, err
	}
	return r, r.activate(nil)
}

func (s *Sim) newRun(workflow string, input json.RawMessage, parent *SimRun, seq int) (*SimRun, error) {
	fn := s.cfg.Workflows[workflow]
	if fn == nil {
		return nil, fmt.Errorf("replay: no workflow %q in the Sim", workflow)
	}
	r := &SimRun{
		sim: s, id: fmt.Sprintf("run-%d", len(s.runs)+1), workflow: workflow, fn: fn,
		parent: parent, parentSeq: seq, held: -1, status: hephtype.StatusPending,
		activities: map[int]ScheduleActivity{}, timers: map[int]StartTimer{}, starts: map[int]StartChild{},
		children: map[int]*SimRun{}, updates: map[string]*simUpdate{},
	}
	r.history = []Event{Started(workflow, input, s.cfg.Seed+uint64(len(s.runs)), s.now)}
	s.runs = append(s.runs, r)
	return r, nil
}

// ID returns the run's id.
func (r *SimRun) ID() string { return r.id }

// Status returns the run's status.
func (r *SimRun) Status() hephtype.RunStatus { return r.status }

// Output returns the output of a completed run.
func (r *SimRun) Output() json.RawMessage { return r.output }

// Err returns the error of a failed or cancelled run.
func (r *SimRun) Err() string { return r.errMsg }

// Published returns what the run published last: what a query reads.
func (r *SimRun) Published() json.RawMessage { return r.published }

// History returns a copy of the run's history.
func (r *SimRun) History() []Event { return slices.Clone(r.history) }

// Next returns the run a continue-as-new started, or nil.
func (r *SimRun) Next() *SimRun { return r.next }

// Heartbeats returns the details of every heartbeat the run's activities
// recorded.
func (r *SimRun) Heartbeats() []any { return r.heartbeats }

// Snapshot returns the state of the run's sticky instance (replaying the
// history into a new one if there is none).
func (r *SimRun) Snapshot() (Snapshot, error) {
	if r.inst != nil {
		return r.inst.Snapshot(), nil
	}
	return ReplaySnapshot(r.fn, r.history)
}

// ReplaySnapshot replays a history in a new instance of fn and returns its
// state.
func ReplaySnapshot(fn Func, history []Event) (Snapshot, error) {
	in, err := New(&Config{Workflow: fn})
	if err != nil {
		return Snapshot{}, err
	}
	defer in.Close()
	if err := in.Replay(history); err != nil {
		return Snapshot{}, err
	}
	return in.Snapshot(), nil
}

func (r *SimRun) evict() {
	if r.inst != nil {
		r.inst.Close()
		r.inst = nil
	}
}

// Hold makes the run collect events without deciding, until Release: the
// events then reach one activation together, as when several complete
// before the runtime gets to the decision.
func (r *SimRun) Hold() {
	if r.held < 0 {
		r.held = len(r.history)
	}
}

// Release ends Hold and decides, if events came in meanwhile.
func (r *SimRun) Release() error {
	h := r.held
	r.held = -1
	if h >= 0 && len(r.history) > h {
		return r.activate(nil)
	}
	return nil
}

// Signal sends a signal to the run.
func (r *SimRun) Signal(name string, payload json.RawMessage) error {
	if r.status.Terminal() {
		return fmt.Errorf("replay: signal %q to %s, which is %s", name, r.id, r.status)
	}
	return r.deliver(SignalReceived(name, payload))
}

// Update sends an update and returns whether the workflow accepted it.
// Its result comes later (UpdateResult).
func (r *SimRun) Update(id, name string, args json.RawMessage) (UpdateOutcome, error) {
	if r.held >= 0 {
		return UpdateOutcome{}, errors.New("replay: Update on a held run")
	}
	if r.status.Terminal() {
		return UpdateOutcome{ID: id, Err: &UpdateRejectedError{ID: id, Name: name, Err: ErrUpdateNotAccepted}}, nil
	}
	dec, err := r.decide([]UpdateRequest{{ID: id, Name: name, Args: args}})
	if err != nil {
		return UpdateOutcome{}, err
	}
	return dec.Updates[0], nil
}

// UpdateResult returns the result of an accepted update, once it is done.
func (r *SimRun) UpdateResult(id string) (result json.RawMessage, errMsg string, done bool) {
	u := r.updates[id]
	if u == nil || !u.done {
		return nil, "", false
	}
	return u.result, u.err, true
}

// Decide runs an activation for the events not yet decided, as the
// runtime does when it retries a decision that failed.
func (r *SimRun) Decide() error { return r.activate(nil) }

func (r *SimRun) deliver(e Event) error {
	r.history = append(r.history, e)
	if r.held >= 0 || r.status.Terminal() {
		return nil
	}
	return r.activate(nil)
}

func (r *SimRun) activate(ups []UpdateRequest) error {
	_, err := r.decide(ups)
	return err
}

// decide runs one activation and applies its decision.
func (r *SimRun) decide(ups []UpdateRequest) (*Decision, error) {
	s := r.sim
	act := &Activation{Time: s.now, Updates: ups}
	var dec *Decision
	var err error
	if s.cfg.Fresh {
		var in *Instance
		if in, err = New(&Config{Workflow: r.fn, RunID: r.id, Logger: s.cfg.Logger}); err != nil {
			return nil, err
		}
		act.Events = r.history
		dec, err = in.Decide(act)
		in.Close()
	} else {
		if r.inst == nil {
			if r.inst, err = New(&Config{Workflow: r.fn, RunID: r.id, Logger: s.cfg.Logger}); err != nil {
				return nil, err
			}
		}
		act.Events = r.history[r.inst.Len():]
		dec, err = r.inst.Decide(act)
	}
	if err != nil {
		// Nothing was decided: evict, as the runtime would.
		r.evict()
		return nil, err
	}
	r.history = append(r.history, dec.History...)
	r.apply(dec)
	if s.cfg.Verify && r.inst != nil {
		if err := r.verify(); err != nil {
			return nil, err
		}
	}
	return dec, r.after()
}

func (r *SimRun) verify() error {
	fresh, err := ReplaySnapshot(r.fn, r.history)
	if err != nil {
		return fmt.Errorf("replay: verify: a fresh replay of the history failed: %w", err)
	}
	if sticky := r.inst.Snapshot(); !reflect.DeepEqual(sticky, fresh) {
		return fmt.Errorf("replay: verify: the sticky instance and a fresh replay differ:\nsticky: %+v\nfresh:  %+v", sticky, fresh)
	}
	return nil
}

func (r *SimRun) apply(dec *Decision) {
	if dec.Published != nil {
		r.published = dec.Published
	}
	for _, o := range dec.Updates {
		if o.Accepted && r.updates[o.ID] == nil {
			r.updates[o.ID] = &simUpdate{}
		}
	}
	for _, c := range dec.Commands {
		switch c := c.(type) {
		case ScheduleActivity:
			r.activities[c.Seq] = c
		case StartTimer:
			r.timers[c.Seq] = c
		case CancelTimer:
			delete(r.timers, c.Seq)
		case StartChild:
			r.starts[c.Seq] = c
		case CancelChild:
			delete(r.starts, c.Seq)
			if ch := r.children[c.Seq]; ch != nil {
				ch.cancel()
			}
		case CompleteUpdate:
			u := r.updates[c.UpdateID]
			if u == nil {
				u = &simUpdate{}
				r.updates[c.UpdateID] = u
			}
			u.done, u.result, u.err = true, c.Result, c.Error
		case CompleteWorkflow:
			r.output = c.Output
		case FailWorkflow:
			r.errMsg = c.Error
		case ContinueAsNew:
			r.output = c.Input
		}
	}
	r.status = dec.Status
	if r.status.Terminal() {
		r.clear()
	}
}

func (r *SimRun) clear() {
	clear(r.activities)
	clear(r.timers)
	clear(r.starts)
	r.evict()
}

func (r *SimRun) cancel() {
	if r.status.Terminal() {
		return
	}
	r.status, r.errMsg = hephtype.StatusCancelled, "cancelled by the parent run"
	for _, ch := range r.children {
		ch.cancel()
	}
	r.clear()
}

// after handles the end of a run: a continued run starts its successor; a
// child reports to its parent.
func (r *SimRun) after() error {
	switch r.status {
	case hephtype.StatusContinued:
		if r.next != nil {
			return nil
		}
		next, err := r.sim.newRun(r.workflow, r.output, r.parent, r.parentSeq)
		if err != nil {
			return err
		}
		r.next = next
		if r.parent != nil {
			r.parent.children[r.parentSeq] = next
		}
		return next.activate(nil)
	case hephtype.StatusCompleted, hephtype.StatusFailed:
		p := r.parent
		if p == nil || p.status.Terminal() || p.children[r.parentSeq] != r {
			return nil
		}
		delete(p.children, r.parentSeq)
		if r.status == hephtype.StatusCompleted {
			return p.deliver(ChildCompleted(r.parentSeq, r.workflow, r.output))
		}
		return p.deliver(ChildFailed(r.parentSeq, r.workflow, r.errMsg))
	}
	return nil
}

// ActionKind is the kind of an Action.
type ActionKind uint8

// The action kinds.
const (
	ActionActivity ActionKind = iota + 1 // run an activity
	ActionChild                          // start a child run
	ActionTimer                          // fire a timer (moving the clock to it)
)

// Action is something the Sim can do next.
type Action struct {
	Run  *SimRun
	Kind ActionKind
	Seq  int
	Name string
	At   time.Time // timers
}

func (a Action) String() string {
	switch a.Kind {
	case ActionActivity:
		return fmt.Sprintf("%s: activity #%d %q", a.Run.id, a.Seq, a.Name)
	case ActionChild:
		return fmt.Sprintf("%s: start child #%d %q", a.Run.id, a.Seq, a.Name)
	}
	return fmt.Sprintf("%s: timer #%d at %s", a.Run.id, a.Seq, a.At.Format(time.RFC3339))
}

// Pending lists what the Sim can do, in a fixed order: activities and
// child starts by run and sequence number, then timers by time.
func (s *Sim) Pending() []Action {
	var now, timers []Action
	for _, r := range s.runs {
		for _, seq := range sortedKeys(r.activities) {
			now = append(now, Action{Run: r, Kind: ActionActivity, Seq: seq, Name: r.activities[seq].Name})
		}
		for _, seq := range sortedKeys(r.starts) {
			now = append(now, Action{Run: r, Kind: ActionChild, Seq: seq, Name: r.starts[seq].Workflow})
		}
		for _, seq := range sortedKeys(r.timers) {
			timers = append(timers, Action{Run: r, Kind: ActionTimer, Seq: seq, At: r.timers[seq].FireAt})
		}
	}
	slices.SortStableFunc(timers, func(a, b Action) int { return a.At.Compare(b.At) })
	return append(now, timers...)
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Do performs one action: it runs the activity (with its retries), starts
// the child, or moves the clock to the timer and fires it; then the run
// decides (unless held).
func (s *Sim) Do(ctx context.Context, a Action) error {
	r := a.Run
	switch a.Kind {
	case ActionActivity:
		c, ok := r.activities[a.Seq]
		if !ok {
			return fmt.Errorf("replay: %s is not pending", a)
		}
		delete(r.activities, a.Seq)
		return r.deliver(r.runActivity(ctx, c))
	case ActionChild:
		c, ok := r.starts[a.Seq]
		if !ok {
			return fmt.Errorf("replay: %s is not pending", a)
		}
		delete(r.starts, a.Seq)
		ch, err := s.newRun(c.Workflow, c.Input, r, c.Seq)
		if err != nil {
			return r.deliver(ChildFailed(c.Seq, c.Workflow, err.Error()))
		}
		r.children[c.Seq] = ch
		return ch.activate(nil)
	case ActionTimer:
		t, ok := r.timers[a.Seq]
		if !ok {
			return fmt.Errorf("replay: %s is not pending", a)
		}
		delete(r.timers, a.Seq)
		if t.FireAt.After(s.now) {
			s.now = t.FireAt
		}
		return r.deliver(TimerFired(a.Seq))
	}
	return fmt.Errorf("replay: unknown action %v", a.Kind)
}

// runActivity runs the attempts of an activity and returns the event that
// reports its outcome. Retries are recorded as step_retrying events.
func (r *SimRun) runActivity(ctx context.Context, c ScheduleActivity) Event {
	fn := r.sim.cfg.Activities[c.Name]
	if fn == nil {
		return ActivityFailed(c.Seq, c.Name, 1, fmt.Sprintf("activity %q is not registered", c.Name))
	}
	p := c.Options.RetryPolicy
	maxAttempts := p.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = flow.DefaultRetryPolicy.MaxAttempts
	}
	var details json.RawMessage // the last heartbeat's, for the next attempt
	for attempt := 1; ; attempt++ {
		info := &ActivityInfo{
			RunID: r.id, Workflow: r.workflow, Seq: c.Seq, Name: c.Name, Attempt: attempt,
			IdempotencyKey: fmt.Sprintf("%s/%d", r.id, c.Seq),
			Details:        details,
			Heartbeat: func(d any) {
				r.heartbeats = append(r.heartbeats, d)
				if b, err := json.Marshal(d); err == nil {
					details = b
				}
			},
		}
		var out json.RawMessage
		var err error
		if perr := protect(func() { out, err = fn(WithActivityInfo(ctx, info), c.Input) }); perr != nil {
			err = perr
		}
		if err == nil {
			ev := ActivityCompleted(c.Seq, c.Name, out)
			ev.Attempt = attempt
			return ev
		}
		if attempt >= maxAttempts || !p.Retryable(err) {
			return ActivityFailed(c.Seq, c.Name, attempt, err.Error())
		}
		r.history = append(r.history, Event{Kind: hephtype.EventStepRetrying, ID: c.Seq, Name: c.Name, Attempt: attempt + 1, Error: err.Error()})
	}
}

// Settle runs activities and starts children until none is pending. It
// does not move the clock.
func (s *Sim) Settle(ctx context.Context) error {
	for n := 0; ; n++ {
		if n >= s.cfg.MaxSteps {
			return fmt.Errorf("replay: Settle: still busy after %d actions", n)
		}
		p := s.Pending()
		if len(p) == 0 || p[0].Kind == ActionTimer {
			return nil
		}
		if err := s.Do(ctx, p[0]); err != nil {
			return err
		}
	}
}

// Drive settles, then fires the next timer, and so on until nothing is
// pending: every run has ended or waits for a signal or an update.
func (s *Sim) Drive(ctx context.Context) error {
	for n := 0; ; n++ {
		if n >= s.cfg.MaxSteps {
			return fmt.Errorf("replay: Drive: still busy after %d timers", n)
		}
		if err := s.Settle(ctx); err != nil {
			return err
		}
		p := s.Pending()
		if len(p) == 0 {
			return nil
		}
		if err := s.Do(ctx, p[0]); err != nil {
			return err
		}
	}
}

// Advance moves the clock by d, firing the timers due by then in order and
// settling after each.
func (s *Sim) Advance(ctx context.Context, d time.Duration) error {
	target := s.now.Add(d)
	for {
		if err := s.Settle(ctx); err != nil {
			return err
		}
		p := s.Pending()
		if len(p) == 0 || p[0].At.After(target) {
			break
		}
		if err := s.Do(ctx, p[0]); err != nil {
			return err
		}
	}
	if target.After(s.now) {
		s.now = target
	}
	return nil
}

// Resume loads a run from a history recorded elsewhere (by a Sim with
// other code, or by the runtime) and replays it with the workflow
// registered under its name: a *NonDeterminismError says the code cannot
// continue that run. The run's outstanding activities, timers and
// children become pending again (children start anew), and the clock
// moves to the history's last decision if it is behind.
func (s *Sim) Resume(history []Event) (*SimRun, error) {
	if len(history) == 0 || history[0].Kind != hephtype.EventRunStarted {
		return nil, errors.New("replay: Resume: the history does not begin with run_started")
	}
	d, err := decodeStarted(history[0])
	if err != nil {
		return nil, err
	}
	r, err := s.newRun(history[0].Name, d.Input, nil, 0)
	if err != nil {
		return nil, err
	}
	r.history = slices.Clone(history)
	if r.inst, err = New(&Config{Workflow: r.fn, RunID: r.id, Logger: s.cfg.Logger}); err != nil {
		return nil, err
	}
	if err := r.inst.Replay(r.history); err != nil {
		r.evict()
		return r, err
	}
	for _, e := range r.history {
		switch e.Kind {
		case hephtype.EventStepScheduled:
			c, _ := decodeCall(e.Ref)
			r.activities[e.ID] = ScheduleActivity{Seq: e.ID, Name: e.Name, Input: e.Data, Options: ActivityOptions{Queue: c.Queue}}
		case hephtype.EventStepCompleted, hephtype.EventStepFailed:
			delete(r.activities, e.ID)
		case hephtype.EventTimerStarted:
			t, _ := decodeTimer(e.Data)
			r.timers[e.ID] = StartTimer{Seq: e.ID, Duration: t.Duration, FireAt: t.FireAt}
		case hephtype.EventTimerFired, hephtype.EventTimerCancelled:
			delete(r.timers, e.ID)
		case hephtype.EventChildStarted:
			r.starts[e.ID] = StartChild{Seq: e.ID, Workflow: e.Name, Input: e.Data}
		case hephtype.EventChildCompleted, EventChildFailed, EventChildCancelled:
			delete(r.starts, e.ID)
		case hephtype.EventUpdateAccepted:
			r.updates[e.Ref] = &simUpdate{}
		case hephtype.EventUpdateDone:
			r.updates[e.Ref] = &simUpdate{done: true, result: e.Data, err: e.Error}
		case hephtype.EventRunCompleted, hephtype.EventRunContinued:
			r.output = e.Data
		case hephtype.EventRunFailed:
			r.errMsg = e.Error
		case EventDecision:
			if t, err := decisionTime(e); err == nil && t.After(s.now) {
				s.now = t
			}
		}
	}
	r.published = r.inst.Published()
	r.status = r.inst.status()
	if r.status.Terminal() {
		r.clear()
	}
	return r, nil
}
