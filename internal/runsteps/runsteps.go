// Package runsteps derives what each step of a run did from the run's
// history, its step states and its open tasks: per step its status,
// first start, end and attempts, and per attempt its worker, queue and
// run times, outcome and error. It is pure: the API, the CLI and the
// dashboard's steps table and timeline all read the same derivation.
//
// A "step" is a flow's step, a map step's element ("step #i"), or, for
// a code-first workflow, an activity ("name #seq"), a timer
// ("timer #seq") or a child workflow ("child name #seq").
package runsteps

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// The outcomes of an attempt.
const (
	Completed = "completed"
	Failed    = "failed"
	Retrying  = "retrying" // failed, and another attempt follows
	Cancelled = "cancelled"
	Snoozed   = "snoozed"
	Waiting   = "waiting" // the step ran and waits to be resumed from outside
	Running   = "running" // leased by a worker now
	Queued    = "queued"  // ready (or due later) and not yet claimed
)

// The kinds of a step.
const (
	KindStep     = "step"     // a flow's step
	KindItem     = "item"     // an element of a map step
	KindActivity = "activity" // a workflow's activity
	KindTimer    = "timer"    // a workflow's durable timer
	KindChild    = "child"    // a workflow's child run
)

// Event is a history entry (store.Event without its run and key).
type Event struct {
	Seq     int64
	Kind    hephtype.EventKind
	Step    string
	Index   int
	Attempt int
	Name    string
	Data    json.RawMessage
	Error   string
	At      time.Time
}

// Task is an open task of the run (store.Task, as much as is read here).
type Task struct {
	// Kind is the store's task kind: "step" and "activity" run attempts.
	Kind       string
	Step       string
	Index      int
	Attempt    int
	ReadyAt    time.Time
	Owner      string
	LeaseUntil time.Time
	Claims     int
	Details    json.RawMessage
}

// State is a flow step's stored state.
type State struct {
	Name     string
	Status   string
	Attempts int
}

// Input is what Derive reads.
type Input struct {
	Events []Event
	States []State
	Tasks  []Task
	// Finished: the run has ended; what is still open ended with it
	// (cancelled at End).
	Finished bool
	// End is the run's end when it has finished, else now.
	End time.Time
}

// Step is what one step did.
type Step struct {
	// Key names the step: "charge", "price #1", "fetch #3", "timer #4".
	Key  string
	Kind string
	// Name is the flow step, activity, timer ("timer") or child workflow.
	Name string
	// Index is the map element or the workflow's command sequence number
	// (-1 for a flow step).
	Index  int
	Status string
	// Start is the first attempt's start (zero before it started); End
	// the last attempt's end (zero while the step is not done).
	Start, End time.Time
	// Error is the last failed attempt's error, on a failed step.
	Error    string
	Attempts []*Attempt
	// Waits are the stretches the step waited to be resumed from outside,
	// or, for a timer, until it fired.
	Waits []*Wait
}

// Duration is from the step's first start to its end (or to now, given
// as end, while it runs); 0 before it started.
func (s *Step) Duration(end time.Time) time.Duration {
	if s.Start.IsZero() {
		return 0
	}
	if !s.End.IsZero() {
		end = s.End
	}
	if end.Before(s.Start) {
		return 0
	}
	return end.Sub(s.Start)
}

// Attempt is one attempt of a step.
type Attempt struct {
	N int
	// Worker ran it (from step_started, or the lease of the open task).
	Worker string
	// Ready is when it was queued: scheduled, expanded, or its retry's
	// or snooze's ready time.
	Ready time.Time
	// Start is when it started (zero when it never did, or when it runs
	// now: the store keeps no claim time, only the lease).
	Start time.Time
	// End is its outcome's time (zero while open).
	End     time.Time
	Outcome string
	Error   string
	// Reexecution: an earlier claim of it lost its lease or was given
	// back; Claims counts the claims.
	Reexecution bool
	Claims      int
	// Details are the heartbeat details of the open task.
	Details json.RawMessage
	// LeaseUntil is the open task's lease.
	LeaseUntil time.Time
	// ran: it started (Start is set, or it is leased now).
	ran bool
}

// Ran reports whether the attempt started.
func (a *Attempt) Ran() bool { return a.ran }

// Wait is a stretch a step waited: for a resume or a decision, or a
// timer's time.
type Wait struct {
	From, To time.Time // To is zero while it waits
	Outcome  string    // completed (resumed, fired), cancelled, or waiting
	// Event is the event that resumed it; Actor who sent it.
	Event, Actor string
}

// builder holds Derive's walk.
type builder struct {
	in    *Input
	steps []*Step
	byKey map[string]*Step
	cur   map[string]*Attempt // the open attempt of each step
	names map[int]string      // a workflow's command sequence -> step key
	maps  map[string]bool     // flow steps that are map steps
}

// Derive reads a run's steps, in the order they first appear in the
// history (a flow's steps without history follow in their stored
// order).
func Derive(in *Input) []*Step {
	b := &builder{in: in, byKey: map[string]*Step{}, cur: map[string]*Attempt{}, names: map[int]string{}, maps: map[string]bool{}}
	for i := range in.Events {
		b.read(&in.Events[i])
	}
	b.openTasks()
	b.close()
	b.states()
	return b.steps
}

func (b *builder) step(key, kind, name string, index int) *Step {
	s, ok := b.byKey[key]
	if !ok {
		s = &Step{Key: key, Kind: kind, Name: name, Index: index}
		b.byKey[key] = s
		b.steps = append(b.steps, s)
	}
	return s
}

// IsActivity reports whether a step entry is a workflow's (its Step is
// empty or a JSON command) rather than a flow's.
func IsActivity(e *Event) bool { return e.Step == "" || strings.HasPrefix(e.Step, "{") }

// key names the step of an entry.
func (b *builder) key(e *Event) string {
	if IsActivity(e) {
		if k, ok := b.names[e.Index]; ok {
			return k
		}
		return nameOr(e.Name, "activity") + " #" + strconv.Itoa(e.Index)
	}
	switch e.Kind {
	case hephtype.EventStepCompleted, hephtype.EventStepFailed, hephtype.EventStepCancelled:
		return e.Step
	}
	if b.maps[e.Step] {
		return e.Step + " #" + strconv.Itoa(e.Index)
	}
	return e.Step
}

// stepOf returns the step an entry names, creating it.
func (b *builder) stepOf(e *Event) *Step {
	k := b.key(e)
	if s := b.byKey[k]; s != nil {
		return s
	}
	switch {
	case IsActivity(e):
		return b.step(k, KindActivity, nameOr(e.Name, "activity"), e.Index)
	case k != e.Step:
		return b.step(k, KindItem, e.Step, e.Index)
	}
	return b.step(k, KindStep, e.Step, -1)
}

func (b *builder) read(e *Event) {
	switch e.Kind {
	case hephtype.EventStepScheduled:
		b.scheduled(e)
	case hephtype.EventMapExpanded:
		b.expanded(e)
	case hephtype.EventStepStarted:
		b.started(e)
	case hephtype.EventStepCompleted, hephtype.EventItemCompleted:
		b.end(b.key(e), Completed, e.Error, e.At)
	case hephtype.EventStepFailed, hephtype.EventItemFailed:
		b.end(b.key(e), Failed, e.Error, e.At)
	case hephtype.EventStepCancelled:
		b.cancelled(e)
	case hephtype.EventStepSnoozed:
		b.snoozed(e)
	case hephtype.EventStepRetrying:
		b.retrying(e)
	case hephtype.EventStepWaiting:
		b.waiting(e)
	case hephtype.EventStepResumed:
		b.resumed(e)
	case hephtype.EventTimerStarted:
		b.timerStarted(e)
	case hephtype.EventTimerFired, hephtype.EventTimerCancelled:
		b.timerEnded(e)
	case hephtype.EventChildStarted:
		k := "child " + e.Name + " #" + strconv.Itoa(e.Index)
		b.names[e.Index] = k
		b.open(b.step(k, KindChild, e.Name, e.Index), &Attempt{N: 1, Start: e.At, ran: true, Outcome: Running})
	case hephtype.EventChildCompleted:
		b.end(b.names[e.Index], Completed, "", e.At)
	case hephtype.EventChildFailed:
		b.end(b.names[e.Index], Failed, e.Error, e.At)
	case hephtype.EventChildCancelled:
		b.end(b.names[e.Index], Cancelled, e.Error, e.At)
	case hephtype.EventRunFailed:
		if e.Step != "" && !IsActivity(e) { // a map step fails with its run
			b.end(e.Step, Failed, e.Error, e.At)
		}
	}
}

// scheduled opens a step's queued attempt.
func (b *builder) scheduled(e *Event) {
	if IsActivity(e) {
		k := nameOr(e.Name, "activity") + " #" + strconv.Itoa(e.Index)
		b.names[e.Index] = k
	}
	s := b.stepOf(e)
	b.open(s, &Attempt{N: max(e.Attempt, 1), Ready: e.At, Outcome: Queued})
}

// open adds a step's open attempt.
func (b *builder) open(s *Step, a *Attempt) {
	s.Attempts = append(s.Attempts, a)
	b.cur[s.Key] = a
}

// expanded opens a map step's (running) attempt and a queued attempt of
// each element.
func (b *builder) expanded(e *Event) {
	b.maps[e.Step] = true
	s := b.step(e.Step, KindStep, e.Step, -1)
	b.open(s, &Attempt{N: 1, Start: e.At, ran: true, Outcome: Running})
	for i := range e.Index {
		k := e.Step + " #" + strconv.Itoa(i)
		b.open(b.step(k, KindItem, e.Step, i), &Attempt{N: 1, Ready: e.At, Outcome: Queued})
	}
}

// StartedData is what a step_started entry's Data says of its attempt.
type StartedData struct {
	Worker      string    `json:"worker"`
	StartedAt   time.Time `json:"started_at"`
	Claim       int       `json:"claim"`
	Reexecution bool      `json:"reexecution"`
}

// started starts a step's attempt.
func (b *builder) started(e *Event) {
	s := b.stepOf(e)
	a := b.cur[s.Key]
	if a == nil || a.N != e.Attempt && e.Attempt > 0 {
		a = &Attempt{N: max(e.Attempt, 1)}
		b.open(s, a)
	}
	var d StartedData
	_ = json.Unmarshal(e.Data, &d) // an entry without data starts at its time
	start := d.StartedAt
	if start.IsZero() {
		start = e.At
	}
	a.Start, a.ran, a.Outcome = start.UTC(), true, Running
	a.Worker, a.Claims, a.Reexecution = d.Worker, d.Claim, d.Reexecution
}

// end ends a step's open attempt.
func (b *builder) end(k, outcome, errText string, at time.Time) {
	a := b.cur[k]
	if a == nil {
		return
	}
	delete(b.cur, k)
	a.End, a.Outcome, a.Error = at, outcome, errText
}

// last is a step's last attempt (nil for none).
func last(s *Step) *Attempt {
	if s == nil || len(s.Attempts) == 0 {
		return nil
	}
	return s.Attempts[len(s.Attempts)-1]
}

// cancelled ends a step's attempt, and a map step's elements with it.
func (b *builder) cancelled(e *Event) {
	k := b.key(e)
	b.end(k, Cancelled, e.Error, e.At)
	if b.maps[e.Step] {
		for _, s := range b.steps {
			if strings.HasPrefix(s.Key, e.Step+" #") {
				b.end(s.Key, Cancelled, e.Error, e.At)
			}
		}
	}
}

// snoozed ends a step's attempt and queues the next for the snooze's end.
func (b *builder) snoozed(e *Event) {
	s := b.stepOf(e)
	b.end(s.Key, Snoozed, e.Error, e.At)
	ready := e.At
	var d string
	if json.Unmarshal(e.Data, &d) == nil {
		if dd, err := time.ParseDuration(d); err == nil {
			ready = e.At.Add(dd)
		}
	}
	b.open(s, &Attempt{N: max(e.Attempt, 1), Ready: ready, Outcome: Queued})
}

// retrying ends (or marks) the failed attempt and queues the next for
// its backoff's end.
func (b *builder) retrying(e *Event) {
	s := b.stepOf(e)
	if a := b.cur[s.Key]; e.Error != "" || a != nil && a.ran {
		// a workflow's activity: the failure is on this entry
		b.end(s.Key, Retrying, e.Error, e.At)
	} else if l := last(s); l != nil && l.Outcome == Failed {
		l.Outcome = Retrying
	}
	var d struct {
		Backoff *int64    `json:"backoff"`
		ReadyAt time.Time `json:"ready_at"`
	}
	ready := e.At
	if json.Unmarshal(e.Data, &d) == nil {
		switch {
		case !d.ReadyAt.IsZero():
			ready = d.ReadyAt.UTC()
		case d.Backoff != nil:
			ready = e.At.Add(time.Duration(*d.Backoff))
		}
	}
	b.open(s, &Attempt{N: e.Attempt, Ready: ready, Outcome: Queued})
}

// waiting ends a step's attempt as waiting and opens its wait.
func (b *builder) waiting(e *Event) {
	s := b.stepOf(e)
	b.end(s.Key, Waiting, e.Error, e.At)
	s.Waits = append(s.Waits, &Wait{From: e.At, Outcome: Waiting})
}

// resumed ends a waiting step's wait.
func (b *builder) resumed(e *Event) {
	s := b.byKey[b.key(e)]
	if s == nil || len(s.Waits) == 0 || !s.Waits[len(s.Waits)-1].To.IsZero() {
		return
	}
	w := s.Waits[len(s.Waits)-1]
	w.To, w.Outcome, w.Event = e.At, Completed, e.Name
	var d struct {
		Actor string `json:"actor"`
	}
	if json.Unmarshal(e.Data, &d) == nil {
		w.Actor = d.Actor
	}
	if l := last(s); l != nil && l.Outcome == Waiting {
		l.Outcome = Completed
	}
}

// timerStarted opens a workflow timer (a flow's timer is a waiting
// step's deadline: its wait shows it).
func (b *builder) timerStarted(e *Event) {
	if !IsActivity(e) {
		return
	}
	k := "timer #" + strconv.Itoa(e.Index)
	b.names[e.Index] = k
	s := b.step(k, KindTimer, "timer", e.Index)
	s.Start = e.At
	s.Waits = append(s.Waits, &Wait{From: e.At, Outcome: Waiting})
}

// timerEnded ends a workflow timer.
func (b *builder) timerEnded(e *Event) {
	if !IsActivity(e) {
		return
	}
	s := b.byKey[b.names[e.Index]]
	if s == nil || len(s.Waits) == 0 {
		return
	}
	w := s.Waits[len(s.Waits)-1]
	w.To, w.Outcome = e.At, Completed
	if e.Kind == hephtype.EventTimerCancelled {
		w.Outcome = Cancelled
	}
}

// openTasks adds what the run's open tasks say: the worker, lease and
// heartbeat details of a running attempt, and the ready time of a queued
// one.
func (b *builder) openTasks() {
	for _, t := range b.in.Tasks {
		var k string
		switch t.Kind {
		case "step":
			k = t.Step
			if t.Index >= 0 {
				k += " #" + strconv.Itoa(t.Index)
			}
		case "activity":
			k = b.names[t.Index]
			if k == "" {
				k = t.Step + " #" + strconv.Itoa(t.Index)
			}
		default:
			continue
		}
		s := b.byKey[k]
		if s == nil {
			kind := KindStep
			if t.Kind == "activity" {
				kind = KindActivity
			} else if t.Index >= 0 {
				kind = KindItem
			}
			s = b.step(k, kind, t.Step, t.Index)
		}
		a := b.cur[k]
		if a == nil || t.Attempt > 0 && a.N != t.Attempt {
			a = &Attempt{N: max(t.Attempt, 1), Ready: t.ReadyAt, Outcome: Queued}
			b.open(s, a)
		}
		if a.Ready.IsZero() {
			a.Ready = t.ReadyAt
		}
		a.Details, a.Claims = t.Details, t.Claims
		if t.Owner != "" && t.LeaseUntil.After(b.in.End) {
			a.Worker, a.LeaseUntil, a.ran, a.Outcome = t.Owner, t.LeaseUntil, true, Running
			a.Reexecution = t.Claims > 1
		}
	}
}

// close ends what is still open when the run has finished: cancelled at
// its end.
func (b *builder) close() {
	if !b.in.Finished {
		return
	}
	for _, s := range b.steps {
		if a := b.cur[s.Key]; a != nil {
			b.end(s.Key, Cancelled, "", b.in.End)
		}
		for _, w := range s.Waits {
			if w.To.IsZero() {
				w.To, w.Outcome = b.in.End, Cancelled
			}
		}
	}
}

// states gives each step its status, start, end and error, adding the
// flow's steps the history does not name.
func (b *builder) states() {
	stored := map[string]State{}
	for _, st := range b.in.States {
		stored[st.Name] = st
		if b.byKey[st.Name] == nil {
			b.step(st.Name, KindStep, st.Name, -1)
		}
	}
	for _, s := range b.steps {
		for _, a := range s.Attempts {
			if a.Start.IsZero() {
				continue
			}
			if s.Start.IsZero() || a.Start.Before(s.Start) {
				s.Start = a.Start
			}
		}
		s.Status = derived(s)
		// A stored "scheduled" (queued or running) says less than the
		// attempts do.
		if st, ok := stored[s.Key]; ok && st.Status != "" && (st.Status != "scheduled" || s.Status != Running) {
			s.Status = st.Status
		}
		switch s.Status {
		case "completed", "failed", "cancelled", "skipped":
			s.End = endOf(s)
		}
		if s.Status == "failed" {
			for i := len(s.Attempts) - 1; i >= 0; i-- {
				if a := s.Attempts[i]; a.Error != "" {
					s.Error = a.Error
					break
				}
			}
		}
	}
}

// endOf is when a done step ended: its last attempt's or wait's end.
func endOf(s *Step) time.Time {
	var end time.Time
	for _, a := range s.Attempts {
		if a.End.After(end) {
			end = a.End
		}
	}
	for _, w := range s.Waits {
		if w.To.After(end) {
			end = w.To
		}
	}
	return end
}

// derived is the status of a step without a stored state (a map
// element, a workflow's activity, timer or child).
func derived(s *Step) string {
	if s.Kind == KindTimer {
		if w := s.Waits[len(s.Waits)-1]; w.Outcome != Completed {
			return w.Outcome
		}
		return Completed
	}
	a := last(s)
	if a == nil {
		return "pending"
	}
	switch a.Outcome {
	case Queued, Snoozed:
		return "pending"
	case Retrying:
		return Running
	}
	return a.Outcome
}

func nameOr(name, alt string) string {
	if name != "" {
		return name
	}
	return alt
}
