package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Errors the Instance returns.
var (
	// ErrClosed: the instance was closed (evicted).
	ErrClosed = errors.New("replay: instance closed")
	// ErrUpdateNotAccepted: no phase of the workflow accepts the update
	// now. The update is rejected and nothing is written.
	ErrUpdateNotAccepted = errors.New("workflow is not accepting this update now")
	// ErrPhaseEnded completes an accepted update that the phase had not
	// dispatched yet when it stopped.
	ErrPhaseEnded = errors.New("the phase ended before the update was handled")
)

// NonDeterminismError reports that replayed workflow code did not issue
// the command the history recorded at that point: the code changed in a
// way that is incompatible with runs in flight (guard the change with
// workflow.Patched), or it depends on something other than its history.
//
// Nothing was decided: the runtime drops the instance, writes nothing and
// retries the decision later, so that the run continues once the code is
// fixed.
type NonDeterminismError struct {
	Workflow string
	// Activation is the replayed activation, counted from 1.
	Activation int
	// Recorded is the event history recorded at that point; nil when the
	// code issued a command the history does not have.
	Recorded *Event
	// Command is the command the code issued instead; nil when it issued
	// none where the history has one.
	Command Command
	// File and Line locate the workflow code that issued Command (or,
	// without a Command, where the workflow waited instead).
	File string
	Line int
	// Waiting, without a Command, says what the workflow waited for.
	Waiting string
	// Reason explains a mismatch that is not about one command.
	Reason string
}

func (e *NonDeterminismError) Error() string {
	s := "workflow " + strconv.Quote(e.Workflow) + " is not deterministic: replaying activation " + strconv.Itoa(e.Activation) + ", "
	at := ""
	if e.File != "" {
		at = fmt.Sprintf(" at %s:%d", e.File, e.Line)
	}
	switch {
	case e.Reason != "" && e.Recorded != nil:
		s += e.Reason + " (history recorded " + e.Recorded.String() + ")" + at
	case e.Reason != "":
		s += e.Reason + at
	case e.Command != nil && e.Recorded != nil:
		s += "the code issued " + e.Command.String() + at + " where history recorded " + e.Recorded.String()
	case e.Command != nil:
		s += "the code issued " + e.Command.String() + at + ", which history does not have"
	case e.Recorded != nil:
		s += "history recorded " + e.Recorded.String() + " but the code issued no command"
		if e.Waiting != "" {
			s += "; it waits for " + e.Waiting + at
		} else if at != "" {
			s += "; it waits" + at
		}
	}
	return s
}

// ActivityFailure is the error an activity returned, as the history
// records it.
type ActivityFailure struct {
	Name    string
	Seq     int
	Attempt int
	Message string
	// Data is what the runtime recorded of the error beyond its message
	// (an application error's type and details), or nil.
	Data json.RawMessage
}

func (e *ActivityFailure) Error() string {
	return fmt.Sprintf("activity %q failed: %s", e.Name, e.Message)
}

// ChildFailure is the error a child workflow ended with.
type ChildFailure struct {
	Workflow string
	Seq      int
	Message  string
}

func (e *ChildFailure) Error() string {
	return fmt.Sprintf("child workflow %q failed: %s", e.Workflow, e.Message)
}

// PanicError reports a panic of workflow code: in the workflow function
// (the workflow fails), a parallel branch (its result), or a handler (the
// update fails, a signal is dropped).
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// ContinueAsNewError, returned by a workflow function, ends the run with a
// ContinueAsNew command.
type ContinueAsNewError struct{ Input []byte }

func (e *ContinueAsNewError) Error() string { return "continue as new" }

// UpdateRejectedError is the outcome of an update the workflow rejected.
type UpdateRejectedError struct {
	ID   string
	Name string
	Err  error
}

func (e *UpdateRejectedError) Error() string {
	return fmt.Sprintf("update %q (id %q) rejected: %v", e.Name, e.ID, e.Err)
}

func (e *UpdateRejectedError) Unwrap() error { return e.Err }
