package flowrt

import (
	"context"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrNotRetryable: the run cannot be retried in place (re-exported by the
// root package).
var ErrNotRetryable = hephtype.ErrNotRetryable

// Retry runs a failed flow run again from its failed steps
// (engine.RunRetried), keeping the outputs of the steps that completed,
// and returns the run as the change left it. The change is decided from
// the stored run, so that of two retries of one failure only the first
// applies: the second finds the run running and fails with
// ErrNotRetryable. It is keyed too, so that a commit tried again after its
// outcome was lost reports the retry it made. A run that is not failed, or
// that is a code-first workflow run, fails with ErrNotRetryable; a run
// whose business id another run took meanwhile with ErrDuplicateRun.
func (r *Runtime) Retry(ctx context.Context, runID string) (*store.Run, error) {
	decide := r.decideWith(engine.RunRetried{}, r.cfg.Clock.Now(), true)
	res, err := r.submitLoading(ctx, store.Change{RunID: runID, Key: "retry:" + newID(), Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindFlow {
			return nil, fmt.Errorf("%w: run %s is a code-first workflow run; workflows are reset (ResetWorkflow), not retried in place", ErrNotRetryable, run.ID)
		}
		if run.Status != hephtype.StatusFailed {
			return nil, fmt.Errorf("%w: run %s is %s, only a failed run can be retried", ErrNotRetryable, run.ID, run.Status)
		}
		u, err := decide(run)
		if err != nil {
			return nil, err
		}
		u.Reopen = true
		return u, nil
	}})
	if errors.Is(err, store.ErrDuplicateChange) {
		// An earlier try of this commit applied it.
		run, err := r.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return nil, fmt.Errorf("retry run %s: %w", runID, err)
		}
		return run, nil
	}
	if err != nil {
		return nil, fmt.Errorf("retry run %s: %w", runID, err)
	}
	return res.Res.Run, nil
}
