package hephaestus

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/store"
)

// ErrRunExists: a start named a run id (StartOptions.RunID,
// WorkflowOptions.RunID) that a run has already. The start returns that
// run with the error, so that a caller that repeats a start (a lost
// answer, a retried request) tells "already there" from "created".
var ErrRunExists = store.ErrRunExists

// checkRunID reports a run id given to a start that is not a UUID in its
// canonical form (lower-case hex, with hyphens), naming the field.
func checkRunID(field, id string) error {
	if id == "" {
		return nil
	}
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return fmt.Errorf("%w: %s %q is not a UUID in canonical form (like %s)", ErrInvalidInput, field, id, "01890a5d-ac96-774b-bcce-b302099a8057")
	}
	return nil
}

// existingRun completes a start that failed with err: when a run with the
// id runID exists already, it returns that run with err (which wraps
// ErrRunExists); otherwise nil and err. A business id held by the run
// runID itself (the same start repeated while its run is active) is that
// case too, not a conflict with another run.
func (c *Client) existingRun(ctx context.Context, runID string, err error) (*Run, error) {
	var dup *store.DuplicateRunError
	if runID != "" && errors.As(err, &dup) && dup.ExistingRunID == runID {
		err = fmt.Errorf("%w: %s (it holds the business id %s)", ErrRunExists, runID, dup.BusinessID)
	}
	if runID == "" || !errors.Is(err, ErrRunExists) {
		return nil, err
	}
	r, gerr := c.cfg.Store.GetRun(ctx, runID)
	if gerr != nil {
		return nil, errors.Join(err, fmt.Errorf("read the existing run %s: %w", runID, gerr))
	}
	return c.toRun(r), err
}
