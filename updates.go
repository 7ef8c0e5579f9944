package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/wfrt"
)

// Updates are synchronous: the caller's process offers the update to the
// workflow in a decision of its own (it must have the workflow
// registered), so a validator's rejection comes back at once and writes
// nothing. An accepted update is recorded (update_accepted) with whatever
// the activation did; the caller then waits for its update_completed,
// which a later decision of any process may write: a decision of this
// process tells the caller directly, one elsewhere is found by reading
// the history.

// UpdateOptions are the optional parameters of UpdateWorkflow.
type UpdateOptions struct {
	// ID identifies the update within the run. Sending an update with the
	// ID of one the run accepted before does not run the handler again:
	// it waits for (or returns) that update's reply. Defaults to a new
	// random id.
	ID string
}

// UpdateRejectedError reports an update the workflow rejected: no phase
// accepts it now (Err is ErrUpdateNotAccepted), its arguments did not
// decode, or its validator returned Err. Nothing was written to the
// history.
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

// UpdateWorkflow sends an update to a workflow run and waits for the
// handler's reply. A rejected update returns an *UpdateRejectedError and
// writes nothing; a failed handler returns an *UpdateFailedError. The
// workflow must be registered in this client (its validators run here).
// An update to a run that continued as new goes to the run that carries
// it on.
func (c *Client) UpdateWorkflow(ctx context.Context, runID, name string, args any, opts *UpdateOptions) (json.RawMessage, error) {
	id := ""
	if opts != nil {
		id = opts.ID
	}
	out, err := c.wf.UpdateWorkflow(ctx, runID, name, args, id)
	var re *wfrt.UpdateRejectedError
	if errors.As(err, &re) {
		return nil, &UpdateRejectedError{RunID: re.RunID, Name: re.Name, ID: re.ID, Err: re.Err}
	}
	var fe *wfrt.UpdateFailedError
	if errors.As(err, &fe) {
		return nil, &UpdateFailedError{RunID: fe.RunID, Name: fe.Name, ID: fe.ID, Message: fe.Message}
	}
	return out, err
}
