package store

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Due tells when the work of runs is due: a run whose only tasks are
// ready at a later time (a job inserted to run tomorrow, a step retried
// after a backoff) is scheduled rather than running.
type Due interface {
	// EarliestReady returns, by run id, the earliest ready time among the
	// tasks (queued or leased) of each of the runs that has a task; a run
	// without tasks, or not stored, is absent from the map. One query for
	// a page of runs.
	EarliestReady(ctx context.Context, p *EarliestReadyParams) (map[string]time.Time, error)
}

// EarliestReadyParams names the runs of EarliestReady.
type EarliestReadyParams struct {
	// RunIDs are the runs, at most MaxListIDs of them.
	RunIDs []string
}

// Check validates p: the error wraps hephtype.ErrInvalidInput.
func (p *EarliestReadyParams) Check() error {
	if len(p.RunIDs) > MaxListIDs {
		return fmt.Errorf("%w: RunIDs has %d run ids, more than %d", hephtype.ErrInvalidInput, len(p.RunIDs), MaxListIDs)
	}
	return nil
}
