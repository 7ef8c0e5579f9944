package flowrt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrNotDue refuses to time out a run whose deadline has not passed (or
// that has none).
var ErrNotDue = errors.New("the run's deadline has not passed")

// TimedOutMessage is the error of a run that timed out, as its
// run_timed_out entry, its Error and its condition keep it.
func TimedOutMessage(deadline time.Time) string {
	return fmt.Sprintf("timed out: the run did not finish by its deadline %s (its execution timeout)", deadline.UTC().Format(time.RFC3339Nano))
}

// TimeOut fails a run whose execution deadline (store.Run.Deadline) has
// passed, in a keyed change decided from the stored run, like Cancel: a
// flow's steps are cancelled through the engine; a run that is not a
// flow is ended by other (the workflow runtime's update). The run's
// condition becomes hephtype.ConditionTimedOut. A run that finished
// first is refused with engine.ErrRunFinished, one whose deadline has not
// passed with ErrNotDue; nothing changes then. It returns the run as the
// change left it (nil when an earlier attempt of the commit applied it).
func (r *Runtime) TimeOut(ctx context.Context, runID string, other func(run *store.Run, msg string) (*store.Update, error)) (*store.Run, error) {
	now := r.cfg.Clock.Now()
	res, err := r.submitLoading(ctx, store.Change{RunID: runID, Key: "timeout:" + runID, Decide: func(run *store.Run) (*store.Update, error) {
		if run.Status.Terminal() {
			return nil, fmt.Errorf("%w (status %s)", engine.ErrRunFinished, run.Status)
		}
		if run.Deadline.IsZero() || now.Before(run.Deadline) {
			return nil, fmt.Errorf("%w (deadline %v, now %v)", ErrNotDue, run.Deadline, now)
		}
		msg := TimedOutMessage(run.Deadline)
		var u *store.Update
		var err error
		if run.Kind != hephtype.KindFlow {
			if other == nil {
				return nil, fmt.Errorf("run %s is a %s, not a flow", run.ID, run.Kind)
			}
			u, err = other(run, msg)
		} else {
			u, err = r.decideWith(engine.TimedOut{Error: msg}, now, true)(run)
		}
		if err != nil {
			return nil, err
		}
		u.Condition = &store.Condition{Code: hephtype.ConditionTimedOut, Message: msg, Since: now}
		return u, nil
	}})
	if errors.Is(err, store.ErrDuplicateChange) {
		return nil, nil // applied by an earlier attempt of this commit
	}
	if err != nil {
		return nil, fmt.Errorf("time out run %s: %w", runID, err)
	}
	return res.Res.Run, nil
}
