package hephaestus

import (
	"time"

	"github.com/hephaestus-go/hephaestus/internal/telemetry"
)

// EventKind names a telemetry event.
type EventKind string

// The telemetry events.
const (
	RunStarted     EventKind = "run.started"
	RunCompleted   EventKind = "run.completed"
	RunFailed      EventKind = "run.failed"
	RunCancelled   EventKind = "run.cancelled"
	StepStarted    EventKind = "step.started"
	StepCompleted  EventKind = "step.completed"
	StepFailed     EventKind = "step.failed"
	TaskStarted    EventKind = "task.started"
	TaskCompleted  EventKind = "task.completed"
	TaskFailed     EventKind = "task.failed"
	WorkerStarted  EventKind = "worker.started"
	WorkerStopped  EventKind = "worker.stopped"
	WorkerFailed   EventKind = "worker.failed"
	CommitFailed   EventKind = "commit.failed"
	RetentionSwept EventKind = "retention.swept"
	RunContinued   EventKind = "run.continued" // a workflow continued as new
	// DecisionFailed: a workflow decision failed (Err says why: a
	// *NonDeterminismError, a workflow not registered here); it is
	// retried after Duration.
	DecisionFailed EventKind = "decision.failed"
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
	Step     string
	Index    int
	Attempt  int
	Queue    string
	TaskID   int64
	// Duration is how long the step, task or run took, on completion.
	Duration time.Duration
	// Count is a number that goes with the event (runs pruned …).
	Count int
	// Condition is the code of a RunCondition event.
	Condition string
	Err       error
}

// Subscribe registers fn to receive every telemetry event, synchronously
// from the goroutine that produced it: fn must be fast and must not block.
// The returned function unsubscribes.
func (c *Client) Subscribe(fn func(Event)) (unsubscribe func()) {
	return c.hub.Subscribe(func(e telemetry.Event) {
		fn(Event{
			Kind: EventKind(e.Kind), Time: e.Time, RunID: e.RunID, Workflow: e.Workflow, Version: e.Version,
			Step: e.Step, Index: e.Index, Attempt: e.Attempt, Queue: e.Queue, TaskID: e.TaskID,
			Duration: e.Duration, Count: e.Count, Condition: e.Condition, Err: publicError(e.Err),
		})
	})
}
