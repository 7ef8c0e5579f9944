package replay

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Errors the Instance returns.
var (
	// ErrClosed: the instance was closed (evicted).
	ErrClosed = errors.New("replay: instance closed")
	// ErrUpdateNotAccepted: no phase of the workflow accepts the update
	// now. The update is rejected and nothing is written.
	ErrUpdateNotAccepted = hephtype.ErrUpdateNotAccepted
	// ErrPhaseEnded completes an accepted update that the phase had not
	// dispatched yet when it stopped.
	ErrPhaseEnded = errors.New("the phase ended before the update was handled")
)

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
