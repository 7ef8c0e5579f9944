// Package hephtype holds the small value types that every other package of
// Hephaestus shares: run and step statuses, the kinds of history events,
// the sentinel errors the runtime reports and the types of remote work
// (re-exported by the root).
//
// It imports nothing from the project, so any package may import it without
// creating an import cycle.
package hephtype

// RunStatus is the lifecycle state of a run.
//
//	pending -> running <-> waiting -> completed | failed | cancelled
//
// A code-first workflow that continues as new ends in StatusContinued.
type RunStatus string

// The run statuses.
const (
	StatusPending   RunStatus = "pending"
	StatusRunning   RunStatus = "running"
	StatusWaiting   RunStatus = "waiting"
	StatusCompleted RunStatus = "completed"
	StatusFailed    RunStatus = "failed"
	StatusCancelled RunStatus = "cancelled"
	StatusContinued RunStatus = "continued"
)

// Terminal reports whether a run in status s can no longer change.
func (s RunStatus) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusContinued:
		return true
	}
	return false
}

// Active reports whether a run in status s still holds work: pending,
// running or waiting.
func (s RunStatus) Active() bool {
	switch s {
	case StatusPending, StatusRunning, StatusWaiting:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s RunStatus) Valid() bool { return s.Active() || s.Terminal() }

// StepStatus is the state of one step within a run.
type StepStatus string

// The step statuses.
const (
	StepPending   StepStatus = "pending"   // not yet ready: some incoming edge is unresolved
	StepScheduled StepStatus = "scheduled" // a task for it is queued or running
	StepWaiting   StepStatus = "waiting"   // returned "wait"; resumed from outside
	StepCompleted StepStatus = "completed" // finished with an event
	StepSkipped   StepStatus = "skipped"   // every incoming edge was dead
	StepFailed    StepStatus = "failed"    // failed after its retries, no failure route
	StepCancelled StepStatus = "cancelled" // the run was cancelled or failed while it ran
)

// EventKind names the kind of a history event.
type EventKind string

// The history event kinds.
const (
	EventRunStarted   EventKind = "run_started"
	EventRunCompleted EventKind = "run_completed"
	EventRunFailed    EventKind = "run_failed"
	EventRunCancelled EventKind = "run_cancelled"
	EventRunContinued EventKind = "run_continued"
	// EventRunTimedOut records that a run's execution timeout passed
	// before it finished: the run failed, its steps were cancelled.
	EventRunTimedOut EventKind = "run_timed_out"
	// EventRunRetried records that a failed flow run was retried: its
	// failed steps run again, and the steps after them.
	EventRunRetried    EventKind = "run_retried"
	EventStepScheduled EventKind = "step_scheduled"
	EventStepStarted   EventKind = "step_started"
	EventStepCompleted EventKind = "step_completed"
	EventStepFailed    EventKind = "step_failed"
	EventStepRetrying  EventKind = "step_retrying"
	EventStepSkipped   EventKind = "step_skipped"
	EventStepWaiting   EventKind = "step_waiting"
	EventStepResumed   EventKind = "step_resumed"
	EventStepCancelled EventKind = "step_cancelled"
	// EventStepSnoozed records that an attempt of a step (or of a map
	// element) asked to run again later without counting an attempt.
	EventStepSnoozed    EventKind = "step_snoozed"
	EventMapExpanded    EventKind = "map_expanded"
	EventItemCompleted  EventKind = "map_item_completed"
	EventItemFailed     EventKind = "map_item_failed"
	EventTimerStarted   EventKind = "timer_started"
	EventTimerFired     EventKind = "timer_fired"
	EventTimerCancelled EventKind = "timer_cancelled"
	EventSignalReceived EventKind = "signal_received"
	EventUpdateAccepted EventKind = "update_accepted"
	EventUpdateRejected EventKind = "update_rejected"
	EventUpdateDone     EventKind = "update_completed"
	EventMarker         EventKind = "marker"
	EventChildStarted   EventKind = "child_started"
	EventChildCompleted EventKind = "child_completed"
	// EventChildFailed reports that a child workflow failed or was
	// cancelled.
	EventChildFailed EventKind = "child_failed"
	// EventChildCancelled records that a workflow asked for one of its
	// children to be cancelled.
	EventChildCancelled EventKind = "child_cancelled"
	// EventDecision opens the output of one activation of a code-first
	// workflow: the events after it, up to the next event the runtime
	// wrote, are the commands that activation issued.
	EventDecision EventKind = "decision"
	// EventRunPaused records that an operator paused the run (Name: who,
	// the authenticated principal; Data: {"cancel_running": true} when
	// the tasks that ran were released). Not a command: replay skips it.
	EventRunPaused EventKind = "run_paused"
	// EventRunUnpaused records that an operator unpaused the run (Name:
	// who). Not a command: replay skips it.
	EventRunUnpaused EventKind = "run_unpaused"
	// EventRunReset records that an operator reset a flow run to a step
	// (Step: the step; Name: who; Data: {"steps": [...]}, the steps that
	// run again from their start: the step and every step after it).
	// Not a command: replay skips it.
	EventRunReset EventKind = "run_reset"
	// EventWorkflowReset records a reset of a code-first workflow run
	// (Client.ResetWorkflow). On the run that was reset it names the new
	// run (Name); on the new run it stands where the copied history ends
	// and names the run it was reset from (Name). Data:
	// {"from", "to", "point", "by", "reason"}. Not a command: replay skips
	// it.
	EventWorkflowReset EventKind = "workflow_reset"
	// EventAttributesUpserted records search attributes that a run's
	// code upserted (Data: the attributes, as the runs table stores them):
	// a workflow's command (workflow.UpsertSearchAttributes), replayed
	// like any other and applied once, when its decision commits.
	EventAttributesUpserted EventKind = "search_attributes_upserted"
)

// RunKind tells which authoring model a run belongs to.
type RunKind string

// The run kinds.
const (
	KindFlow     RunKind = "flow"     // a DAG flow (Go-defined or a document)
	KindWorkflow RunKind = "workflow" // a code-first workflow replayed from history
)

// MaxNameLen bounds, in bytes, the names of flows, workflows, steps,
// activities, queues and events, on every backend.
const MaxNameLen = 200

// The codes of a run's condition (why an active run does not progress).
const (
	// ConditionDecisionFailing: the workflow's decision keeps failing
	// (non-deterministic code, a panic in replay); it is retried with
	// backoff until code that works is registered.
	ConditionDecisionFailing = "decision_failing"
	// ConditionUnserved: a task of the run has waited longer than a lease
	// period and no live worker of its queue can run it: none has its
	// flow version, workflow or activity registered.
	ConditionUnserved = "unserved"
	// ConditionTimedOut: the run's execution timeout passed before it
	// finished, and the run failed for it (kept on the failed run).
	ConditionTimedOut = "timed_out"
	// ConditionPaused: an operator paused the run; its tasks are not
	// claimed until it is unpaused (the message names who paused it).
	ConditionPaused = "paused"
)
