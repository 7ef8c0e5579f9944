package hephtype

import "fmt"

// The failures of updates and named queries. The runtime
// (internal/wfrt) reports them, and package hephaestus names them under
// the same names.

// UpdateRejectedError reports an update the workflow did not take;
// nothing was written to the run's history. Err says why:
// ErrUnknownUpdate (the workflow declares its updates, and none of that
// name), ErrUpdateNotAccepted (no phase of the workflow accepts the update
// now), ErrUpdateInvalid (its validator refused it, or its arguments did not
// decode; the message is the validator's), ErrRunFinished (the run ended
// first) or ErrDecisionFailed (the names of package hephaestus).
type UpdateRejectedError struct {
	RunID string
	Name  string
	ID    string
	Err   error
}

func (e *UpdateRejectedError) Error() string {
	return fmt.Sprintf("update %q of run %s rejected: %v", e.Name, e.RunID, e.Err)
}

func (e *UpdateRejectedError) Unwrap() error { return e.Err }

// UpdateFailedError reports an accepted update whose handler failed: it
// returned an error or panicked, or its phase ended before handling it.
// The workflow goes on.
type UpdateFailedError struct {
	RunID   string
	Name    string
	ID      string
	Message string
}

func (e *UpdateFailedError) Error() string {
	return fmt.Sprintf("update %q of run %s failed: %s", e.Name, e.RunID, e.Message)
}

// QueryFailedError reports a named query whose handler returned an error
// (or whose arguments or published state did not decode).
type QueryFailedError struct {
	RunID   string
	Name    string
	Message string
}

func (e *QueryFailedError) Error() string {
	return fmt.Sprintf("query %q of run %s failed: %s", e.Name, e.RunID, e.Message)
}
