package flowrt

import (
	"context"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrNotResettable: the run cannot be reset to the step (re-exported by
// the root package).
var ErrNotResettable = hephtype.ErrNotResettable

// Reset runs a flow run again from a step (engine.RunReset), keeping the
// outputs of the steps that are not after it, and returns the run as the
// change left it. A finished run (completed or failed) is reopened. The
// change is decided from the stored run, inside the write, and keyed by
// key ("reset:"+key): a commit tried again after its outcome was lost, or
// a second reset with the same key, reports the run without resetting it
// again. An empty key makes the reset's own. A code-first workflow run, a
// cancelled run and a step that has not run are refused with
// ErrNotResettable; an unknown step with ErrUnknownStep; a run whose
// business id another run took since it ended with ErrDuplicateRun.
func (r *Runtime) Reset(ctx context.Context, runID, step, by, key string) (*store.Run, error) {
	if key == "" {
		key = newID()
	}
	decide := r.decideWith(engine.RunReset{Step: step, By: by}, r.cfg.Clock.Now(), true)
	res, err := r.submitLoading(ctx, store.Change{RunID: runID, Key: "reset:" + key, Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindFlow {
			return nil, fmt.Errorf("%w: run %s is a code-first workflow run; only flow, document and job runs are reset to a step", ErrNotResettable, run.ID)
		}
		u, err := decide(run)
		if err != nil {
			return nil, err
		}
		u.Reopen = run.Status.Terminal()
		return u, nil
	}})
	if errors.Is(err, store.ErrDuplicateChange) {
		// An earlier try of this commit, or a reset with this key, applied it.
		run, err := r.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return nil, fmt.Errorf("reset run %s: %w", runID, err)
		}
		return run, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reset run %s: %w", runID, err)
	}
	return res.Res.Run, nil
}
