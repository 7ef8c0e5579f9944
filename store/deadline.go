package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Deadlines finds the active runs whose execution deadline has passed
// (Run.Deadline): the maintenance service times them out, each through
// a change of the run like a cancel, so a run that finished first is
// left as it is.
type Deadlines interface {
	// ExpiredRuns returns the ids of the runs that are pending, running
	// or waiting and whose Deadline is set and not after p.Now, earliest
	// deadline first (then by id), at most p.Limit.
	ExpiredRuns(ctx context.Context, p *ExpiredRunsParams) ([]string, error)
}

// ExpiredRunsParams selects the runs of ExpiredRuns.
type ExpiredRunsParams struct {
	Now time.Time
	// Limit bounds the answer: 1 to MaxListIDs.
	Limit int
}

// Check validates p: the error wraps hephtype.ErrInvalidInput.
func (p *ExpiredRunsParams) Check() error {
	if p.Limit < 1 || p.Limit > MaxListIDs {
		return fmt.Errorf("%w: ExpiredRunsParams.Limit is %d, want 1 to %d", hephtype.ErrInvalidInput, p.Limit, MaxListIDs)
	}
	if p.Now.IsZero() {
		return fmt.Errorf("%w: ExpiredRunsParams.Now is zero", hephtype.ErrInvalidInput)
	}
	return nil
}
