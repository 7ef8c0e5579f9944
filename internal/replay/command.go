package replay

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Command is something an activation asks the runtime to do. Each command
// is recorded by exactly one history event (Event), written in the same
// transaction as the decision; on replay the recorded event stands for the
// command and the two must match.
type Command interface {
	fmt.Stringer
	// Event returns the history event that records the command.
	Event() Event
	isCommand()
}

// ActivityOptions say how the runtime runs an activity.
type ActivityOptions struct {
	// Queue is the task queue; empty means the runtime's default.
	Queue string
	// StartToCloseTimeout bounds one attempt; zero means the runtime's
	// default.
	StartToCloseTimeout time.Duration
	// HeartbeatTimeout fails an attempt that has not heartbeaten for this
	// long; zero means no heartbeat is required.
	HeartbeatTimeout time.Duration
	// ScheduleToCloseTimeout bounds all attempts together, from the
	// first one's scheduling; zero means none.
	ScheduleToCloseTimeout time.Duration
	// RetryPolicy says how failed attempts are retried; zero fields
	// inherit flow.DefaultRetryPolicy.
	RetryPolicy flow.RetryPolicy
}

// ScheduleActivity asks the runtime to run an activity and to report its
// outcome as ActivityCompleted or ActivityFailed with ID Seq. Retries are
// the runtime's: the history only learns the final outcome.
type ScheduleActivity struct {
	Seq     int
	Name    string
	Input   json.RawMessage
	Options ActivityOptions
	// At is "dir/file.go:line" of the workflow code that issued it, for
	// the history; empty on replay.
	At string
}

// StartTimer asks the runtime to report TimerFired(Seq) once Duration has
// passed since the activation time, that is at FireAt.
type StartTimer struct {
	Seq      int
	Duration time.Duration
	FireAt   time.Time
	// At is "dir/file.go:line" of the workflow code that issued it, for
	// the history; empty on replay.
	At string
}

// CancelTimer disarms the timer started as command Seq.
type CancelTimer struct{ Seq int }

// RecordMarker records that the run took the new code path of a patch
// (or, Deprecated, that the code still mentions a deprecated patch). The
// runtime has nothing to do but write the event.
type RecordMarker struct {
	Seq        int
	Patch      string
	Deprecated bool
}

// AcceptUpdate tells the caller of update UpdateID that the workflow
// accepted it. Its event records the update's name and arguments: on
// replay the update is delivered again from it.
type AcceptUpdate struct {
	Seq      int
	UpdateID string
	Name     string
	Args     json.RawMessage
}

// CompleteUpdate gives the caller of an accepted update its result, or its
// error. Seq is the AcceptUpdate's.
type CompleteUpdate struct {
	Seq      int
	UpdateID string
	Name     string
	Result   json.RawMessage
	Error    string
}

// StartChild asks the runtime to start a child run of Workflow with Input,
// in the same transaction, and to report its end as ChildCompleted or
// ChildFailed with ID Seq.
type StartChild struct {
	Seq      int
	Workflow string
	Input    json.RawMessage
	// At is "dir/file.go:line" of the workflow code that issued it, for
	// the history; empty on replay.
	At string
}

// CancelChild asks the runtime to cancel the child started as command
// Seq. The workflow issues it for each open child when it ends.
type CancelChild struct {
	Seq      int
	Workflow string
}

// CompleteWorkflow ends the run successfully.
type CompleteWorkflow struct{ Output json.RawMessage }

// FailWorkflow ends the run in failure. Data is what the error records
// beyond its message (failureData), or nil.
type FailWorkflow struct {
	Error string
	Data  json.RawMessage
}

// failureData is implemented by errors that keep more than their message
// when a run fails with them (workflow.ApplicationError).
type failureData interface {
	error
	FailureData() json.RawMessage
}

// UpsertAttributes upserts search attributes of the run (Attrs, as the
// runs table stores them: store.EncodeAttrs). The runtime applies them
// with the decision that issues the command; on replay the recorded event
// stands for it and nothing is applied again.
type UpsertAttributes struct{ Attrs json.RawMessage }

// ContinueAsNew ends the run and asks the runtime to start a new run of the
// same workflow with Input and a fresh history (and seed).
type ContinueAsNew struct{ Input json.RawMessage }

func (ScheduleActivity) isCommand() {}
func (StartTimer) isCommand()       {}
func (CancelTimer) isCommand()      {}
func (RecordMarker) isCommand()     {}
func (AcceptUpdate) isCommand()     {}
func (CompleteUpdate) isCommand()   {}
func (StartChild) isCommand()       {}
func (CancelChild) isCommand()      {}
func (CompleteWorkflow) isCommand() {}
func (FailWorkflow) isCommand()     {}
func (ContinueAsNew) isCommand()    {}
func (UpsertAttributes) isCommand() {}

func (c ScheduleActivity) Event() Event {
	ref := callRecord{Input: inputHash(c.Input), Queue: c.Options.Queue, At: c.At}.encode()
	return Event{Kind: hephtype.EventStepScheduled, ID: c.Seq, Name: c.Name, Ref: ref, Data: c.Input}
}
func (c StartTimer) Event() Event {
	return Event{Kind: hephtype.EventTimerStarted, ID: c.Seq, Data: mustJSON(timerData{Duration: c.Duration, FireAt: c.FireAt, At: c.At})}
}
func (c CancelTimer) Event() Event { return Event{Kind: hephtype.EventTimerCancelled, ID: c.Seq} }
func (c RecordMarker) Event() Event {
	ref := markerPatch
	if c.Deprecated {
		ref = markerDeprecated
	}
	return Event{Kind: hephtype.EventMarker, ID: c.Seq, Name: c.Patch, Ref: ref}
}
func (c AcceptUpdate) Event() Event {
	return Event{Kind: hephtype.EventUpdateAccepted, ID: c.Seq, Name: c.Name, Ref: c.UpdateID, Data: c.Args}
}
func (c CompleteUpdate) Event() Event {
	return Event{Kind: hephtype.EventUpdateDone, ID: c.Seq, Name: c.Name, Ref: c.UpdateID, Data: c.Result, Error: c.Error}
}
func (c StartChild) Event() Event {
	var ref string
	if c.At != "" {
		ref = callRecord{At: c.At}.encode()
	}
	return Event{Kind: hephtype.EventChildStarted, ID: c.Seq, Name: c.Workflow, Ref: ref, Data: c.Input}
}
func (c CancelChild) Event() Event {
	return Event{Kind: EventChildCancelled, ID: c.Seq, Name: c.Workflow}
}
func (c CompleteWorkflow) Event() Event {
	return Event{Kind: hephtype.EventRunCompleted, Data: c.Output}
}
func (c FailWorkflow) Event() Event {
	return Event{Kind: hephtype.EventRunFailed, Error: c.Error, Data: c.Data}
}
func (c ContinueAsNew) Event() Event { return Event{Kind: hephtype.EventRunContinued, Data: c.Input} }
func (c UpsertAttributes) Event() Event {
	return Event{Kind: hephtype.EventAttributesUpserted, Data: c.Attrs}
}

func (c ScheduleActivity) String() string {
	return fmt.Sprintf("schedule activity #%d %q", c.Seq, c.Name)
}
func (c StartTimer) String() string  { return fmt.Sprintf("start timer #%d (%s)", c.Seq, c.Duration) }
func (c CancelTimer) String() string { return fmt.Sprintf("cancel timer #%d", c.Seq) }
func (c RecordMarker) String() string {
	if c.Deprecated {
		return fmt.Sprintf("record marker #%d %q (deprecated)", c.Seq, c.Patch)
	}
	return fmt.Sprintf("record marker #%d %q", c.Seq, c.Patch)
}
func (c AcceptUpdate) String() string {
	return fmt.Sprintf("accept update #%d %q id %q", c.Seq, c.Name, c.UpdateID)
}
func (c CompleteUpdate) String() string {
	return fmt.Sprintf("complete update #%d %q id %q", c.Seq, c.Name, c.UpdateID)
}
func (c StartChild) String() string       { return fmt.Sprintf("start child #%d %q", c.Seq, c.Workflow) }
func (c CancelChild) String() string      { return fmt.Sprintf("cancel child #%d %q", c.Seq, c.Workflow) }
func (c CompleteWorkflow) String() string { return "complete workflow" }
func (c FailWorkflow) String() string     { return "fail workflow: " + c.Error }
func (c ContinueAsNew) String() string    { return "continue as new" }
func (c UpsertAttributes) String() string { return "upsert search attributes " + string(c.Attrs) }

// sameCommand reports whether the recorded event rec records the command
// that new records: same kind and the same identity (the activity name,
// the timer duration, the patch or the referenced command). Update
// arguments may change between versions; an activity's input and queue
// may not, which difference checks once the identity matches.
func sameCommand(rec, ev Event) bool {
	if rec.Kind != ev.Kind {
		return false
	}
	switch ev.Kind {
	case hephtype.EventStepScheduled, hephtype.EventChildStarted, hephtype.EventMarker:
		return rec.Name == ev.Name
	case hephtype.EventTimerStarted:
		a, err1 := decodeTimer(rec.Data)
		b, err2 := decodeTimer(ev.Data)
		return err1 == nil && err2 == nil && a.Duration == b.Duration
	case hephtype.EventUpdateAccepted:
		return rec.Name == ev.Name && rec.Ref == ev.Ref
	case hephtype.EventUpdateDone:
		return rec.ID == ev.ID && rec.Ref == ev.Ref
	case hephtype.EventTimerCancelled, EventChildCancelled:
		return rec.ID == ev.ID
	}
	return true
}
