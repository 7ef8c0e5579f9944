package hephaestus

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/telemetry"
)

// EventKind names a telemetry event. docs/observability.md lists every
// kind with when it is emitted and the fields it sets.
type EventKind string

// The telemetry events.
//
// The events of committed changes (run.*, step.completed, step.failed,
// decision.completed, schedule.*) are emitted once per committed change,
// by the process that committed it, after its transaction committed:
// never for a change the store refused (a completion whose task lease was
// lost, a stale decision), and never when a workflow replays its history
// (replay commits nothing). The events of execution (step.started,
// task.*, decision.started, worker.*) are emitted by the process that
// does the work, when it does it: a task claimed again after a lost
// lease starts again.
const (
	// RunStarted: a run was created (a start, a job insert, a child, the
	// run a continue-as-new or a schedule's tick started).
	RunStarted   EventKind = "run.started"
	RunCompleted EventKind = "run.completed"
	RunFailed    EventKind = "run.failed"
	RunCancelled EventKind = "run.cancelled"
	// RunContinued: a workflow continued as new.
	RunContinued EventKind = "run.continued"
	// StepStarted: this process started an attempt of a flow step or a
	// workflow activity (or handed it to a remote worker).
	StepStarted EventKind = "step.started"
	// StepCompleted and StepFailed: the outcome of an attempt committed
	// (whoever ran it). Retry is set on a failure after which another
	// attempt is scheduled; Duration runs from the attempt's start to the
	// commit.
	StepCompleted EventKind = "step.completed"
	StepFailed    EventKind = "step.failed"
	// TaskStarted, TaskCompleted, TaskFailed: a worker of this process
	// ran a claimed task (any kind: TaskKind). On TaskStarted, Duration is
	// how long the task waited in its queue once ready.
	TaskStarted   EventKind = "task.started"
	TaskCompleted EventKind = "task.completed"
	TaskFailed    EventKind = "task.failed"
	// DecisionStarted and DecisionCompleted: a decision task of a
	// code-first workflow began, and its decision committed.
	DecisionStarted   EventKind = "decision.started"
	DecisionCompleted EventKind = "decision.completed"
	// DecisionFailed: a workflow decision failed (Err says why: a
	// *NonDeterminismError, a workflow not registered here); it is
	// retried after Duration.
	DecisionFailed EventKind = "decision.failed"
	// WorkerStarted and WorkerStopped: the claim loop of a queue began
	// and ended.
	WorkerStarted EventKind = "worker.started"
	WorkerStopped EventKind = "worker.stopped"
	// WorkerPoll: the claim loop of a queue polled it; Count tasks were
	// claimed.
	WorkerPoll EventKind = "worker.poll"
	// WorkerFailed: a poll of a queue failed (the worker's error); it
	// polls again after a backoff.
	WorkerFailed EventKind = "worker.failed"
	// CommitCompleted: a transaction of the group commit committed Count
	// changes (0: claims only) in Duration.
	CommitCompleted EventKind = "commit.completed"
	// CommitFailed: a transaction of Count changes failed; it is retried.
	CommitFailed   EventKind = "commit.failed"
	RetentionSwept EventKind = "retention.swept"
	// ScheduleFired: a schedule's tick started its run (RunID), or failed
	// to for good (Err). ScheduleSkipped: a tick was skipped because the
	// previous run was still active.
	ScheduleFired   EventKind = "schedule.fired"
	ScheduleSkipped EventKind = "schedule.skipped"
	// RunCondition: a run does not progress, and the runtime recorded why
	// on the run (Condition names it, Err says why): no live worker can run
	// one of its tasks (ConditionUnserved), or its decision keeps failing
	// (ConditionDecisionFailing, after each failed attempt).
	RunCondition EventKind = "run.condition"
)

// Event is a telemetry event: something the runtime did. Fields that do
// not apply to a kind are zero.
type Event struct {
	Kind     EventKind
	Time     time.Time
	RunID    string
	Workflow string
	Version  int
	// RunKind is the run's model (flow: flows, documents and jobs;
	// workflow: code-first workflows), on run.* and step outcomes.
	RunKind RunKind
	// Step is the flow step or the workflow activity.
	Step    string
	Index   int
	Attempt int
	Queue   string
	TaskID  int64
	// TaskKind is the kind of the task (step, timer, decision, activity,
	// workflow_timer, workflow_op) on task.*, step.* and decision.*.
	TaskKind string
	// Duration is how long the step, task, decision, commit or run took,
	// on completion (see the kinds for the others).
	Duration time.Duration
	// Count is a number that goes with the event (runs pruned, tasks
	// claimed, changes committed).
	Count int
	// Condition is the code of a RunCondition event.
	Condition string
	// Retry: on StepFailed, another attempt is scheduled.
	Retry bool
	// Schedule is the schedule of a schedule.* event.
	Schedule string
	// Tags and Metadata are the run's (StartOptions), on every event of a
	// run (run.*, step.*, task.*, decision.*, run.condition): each task of
	// the run holds a copy. Events share them: do not modify them.
	Tags     []string
	Metadata map[string]json.RawMessage
	Err      error
}

// Subscribe registers fn to receive every telemetry event, synchronously
// from the goroutine that produced it: fn must be fast and must not block.
// The returned function unsubscribes.
func (c *Client) Subscribe(fn func(Event)) (unsubscribe func()) {
	return c.hub.Subscribe(func(e telemetry.Event) { fn(publicEvent(e)) })
}

func publicEvent(e telemetry.Event) Event {
	return Event{
		Kind: EventKind(e.Kind), Time: e.Time, RunID: e.RunID, Workflow: e.Workflow, Version: e.Version, RunKind: e.RunKind,
		Step: e.Step, Index: e.Index, Attempt: e.Attempt, Queue: e.Queue, TaskID: e.TaskID, TaskKind: e.TaskKind,
		Duration: e.Duration, Count: e.Count, Condition: e.Condition, Retry: e.Retry, Schedule: e.Schedule,
		Tags: e.Tags, Metadata: e.Metadata, Err: e.Err,
	}
}

// LogEvents returns a subscriber (for Client.Subscribe) that writes each
// event to logger, as a record whose message is the event's kind and
// whose attributes are the fields the event sets (the run's metadata as a
// group). level picks each event's level; nil means DefaultEventLevel.
// Events below the logger's level cost a call to Enabled.
func LogEvents(logger *slog.Logger, level func(Event) slog.Level) func(Event) {
	if level == nil {
		level = DefaultEventLevel
	}
	return func(e Event) {
		l := level(e)
		ctx := context.Background()
		if !logger.Enabled(ctx, l) {
			return
		}
		logger.LogAttrs(ctx, l, string(e.Kind), eventAttrs(e)...)
	}
}

// DefaultEventLevel is LogEvents' default: Error for a failed commit,
// decision or worker poll; Warn for a failed run or step and a run
// condition; Debug for polls and commits; Info for the rest.
func DefaultEventLevel(e Event) slog.Level {
	switch e.Kind {
	case CommitFailed, DecisionFailed, WorkerFailed:
		return slog.LevelError
	case RunFailed, StepFailed, TaskFailed, RunCondition:
		return slog.LevelWarn
	case WorkerPoll, CommitCompleted, TaskStarted, TaskCompleted, DecisionStarted, DecisionCompleted:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

func eventAttrs(e Event) []slog.Attr {
	a := make([]slog.Attr, 0, 12)
	str := func(k, v string) {
		if v != "" {
			a = append(a, slog.String(k, v))
		}
	}
	num := func(k string, v int64) {
		if v != 0 {
			a = append(a, slog.Int64(k, v))
		}
	}
	str("run", e.RunID)
	str("workflow", e.Workflow)
	num("version", int64(e.Version))
	str("run_kind", string(e.RunKind))
	str("step", e.Step)
	if e.Step != "" && e.Index >= 0 {
		num("index", int64(e.Index))
	}
	num("attempt", int64(e.Attempt))
	str("queue", e.Queue)
	num("task", e.TaskID)
	str("task_kind", e.TaskKind)
	if e.Duration != 0 {
		a = append(a, slog.Duration("duration", e.Duration))
	}
	num("count", int64(e.Count))
	str("condition", e.Condition)
	if e.Retry {
		a = append(a, slog.Bool("retry", true))
	}
	str("schedule", e.Schedule)
	if len(e.Tags) > 0 {
		a = append(a, slog.Any("tags", e.Tags))
	}
	if len(e.Metadata) > 0 {
		md := make([]any, 0, len(e.Metadata))
		for _, k := range slices.Sorted(maps.Keys(e.Metadata)) {
			md = append(md, slog.String(k, string(e.Metadata[k])))
		}
		a = append(a, slog.Group("metadata", md...))
	}
	if e.Err != nil {
		a = append(a, slog.String("err", e.Err.Error()))
	}
	return a
}
