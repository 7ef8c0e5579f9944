// Package telemetry delivers the runtime's telemetry events to
// subscribers: the one place the runtime services report what they did
// (runs started and ended, tasks and steps, commits that failed, workers,
// retention, run conditions).
//
// It owns the event type and the subscriber list. It may not touch the
// store, start goroutines or block: events are delivered synchronously
// from the goroutine that emits them. The public root package converts
// these events to hephaestus.Event for its subscribers; exporters
// (OpenTelemetry, metrics) subscribe here.
package telemetry

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Kind names an event. The values are those of hephaestus.EventKind.
type Kind string

// The event kinds.
const (
	RunStarted     Kind = "run.started"
	RunCompleted   Kind = "run.completed"
	RunFailed      Kind = "run.failed"
	RunCancelled   Kind = "run.cancelled"
	RunContinued   Kind = "run.continued"
	StepStarted    Kind = "step.started"
	StepCompleted  Kind = "step.completed"
	StepFailed     Kind = "step.failed"
	TaskStarted    Kind = "task.started"
	TaskCompleted  Kind = "task.completed"
	TaskFailed     Kind = "task.failed"
	WorkerStarted  Kind = "worker.started"
	WorkerStopped  Kind = "worker.stopped"
	WorkerFailed   Kind = "worker.failed"
	CommitFailed   Kind = "commit.failed"
	RetentionSwept Kind = "retention.swept"
	DecisionFailed Kind = "decision.failed"
	RunCondition   Kind = "run.condition"

	DecisionStarted   Kind = "decision.started"
	DecisionCompleted Kind = "decision.completed"
	WorkerPoll        Kind = "worker.poll"
	CommitCompleted   Kind = "commit.completed"
	ScheduleFired     Kind = "schedule.fired"
	ScheduleSkipped   Kind = "schedule.skipped"
)

// Kinds lists every kind, in the order the documentation gives them.
var Kinds = []Kind{
	RunStarted, RunCompleted, RunFailed, RunCancelled, RunContinued, RunCondition,
	StepStarted, StepCompleted, StepFailed,
	TaskStarted, TaskCompleted, TaskFailed,
	DecisionStarted, DecisionCompleted, DecisionFailed,
	WorkerStarted, WorkerStopped, WorkerPoll, WorkerFailed,
	CommitCompleted, CommitFailed, RetentionSwept, ScheduleFired, ScheduleSkipped,
}

// Event is something the runtime did; fields that do not apply are zero.
// The public hephaestus.Event documents each field.
type Event struct {
	Kind      Kind
	Time      time.Time
	RunID     string
	Workflow  string
	Version   int
	RunKind   hephtype.RunKind
	Step      string
	Index     int
	Attempt   int
	Queue     string
	TaskID    int64
	TaskKind  string
	Duration  time.Duration
	Count     int
	Condition string
	Retry     bool
	Schedule  string
	Tags      []string
	Metadata  map[string]json.RawMessage
	Err       error
}

// WithRun copies the run's identity, tags and metadata into e.
func (e Event) WithRun(r *store.Run) Event {
	e.RunID, e.Workflow, e.Version, e.RunKind = r.ID, r.Workflow, r.Version, r.Kind
	e.Tags, e.Metadata = r.Tags, r.Metadata
	return e
}

// OfTask is an event about task t (kind left to set), with its run's tags
// and metadata, which every task carries (copied when it was inserted).
func OfTask(t *store.Task) Event {
	return Event{RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt,
		Queue: t.Queue, TaskID: t.ID, TaskKind: string(t.Kind), Tags: t.Tags, Metadata: t.Metadata}
}

// Hub delivers events to its subscribers. The zero Hub is not usable: use
// New.
type Hub struct {
	clock clock.Clock
	mu    sync.RWMutex
	next  int
	subs  map[int]func(Event)
}

// New returns a Hub that stamps events with c's time.
func New(c clock.Clock) *Hub {
	if c == nil {
		c = clock.Real{}
	}
	return &Hub{clock: c, subs: map[int]func(Event){}}
}

// Subscribe registers fn for every later event; the returned function
// unsubscribes.
func (h *Hub) Subscribe(fn func(Event)) (unsubscribe func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next++
	h.subs[id] = fn
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, id)
	}
}

// Emit stamps e with the time and delivers it to every subscriber.
func (h *Hub) Emit(e Event) {
	e.Time = h.clock.Now()
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, fn := range h.subs {
		fn(e)
	}
}

// Defaults fills what a runtime service's configuration leaves out: the
// real clock, slog's default logger, and a hub of its own on that clock.
func Defaults(c *clock.Clock, l **slog.Logger, h **Hub) {
	if *c == nil {
		*c = clock.Real{}
	}
	if *l == nil {
		*l = slog.Default()
	}
	if *h == nil {
		*h = New(*c)
	}
}
