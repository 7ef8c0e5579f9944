package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// ConditionPaused: an operator paused the run (PauseRun); its tasks are
// not claimed until it is unpaused. The condition's Message names who
// paused it, its Since when.
const ConditionPaused = hephtype.ConditionPaused

// PauseOptions tune PauseRun.
type PauseOptions struct {
	// CancelRunning releases the run's running tasks too: their holders
	// lose their leases (a step's context is cancelled at its next
	// heartbeat, at once when it runs in this process; its commit is
	// refused) and the tasks run again after unpause. Without it, they
	// finish and their results are kept; only the work that follows
	// waits.
	CancelRunning bool
	// By names who pauses the run, for the history (the API server sets
	// the authenticated principal). Empty: nobody named.
	By string
}

// UnpauseOptions tune UnpauseRun.
type UnpauseOptions struct {
	// By names who unpauses the run, for the history.
	By string
}

// errPauseUnchanged refuses a pause of a paused run (an unpause of a run that
// is not paused): nothing to write, and the call succeeds.
var errPauseUnchanged = errors.New("unchanged")

// PauseRun pauses a run of any kind: none of its tasks (steps, timers,
// decisions, child reports) is claimed until UnpauseRun. Timers that come
// due meanwhile fire after unpause; signals and updates are accepted and
// recorded, and handled after unpause. Tasks running when it is paused
// finish (their results are kept) unless opts.CancelRunning. The history
// records run_paused with opts.By.
//
// Pausing a paused run changes nothing and succeeds: the decision is
// taken on the run as stored, inside the write that records it, so two
// pauses (or a retried one) append one run_paused between them. A run
// that is finished cannot be paused (ErrRunFinished); a run that finishes
// while paused (cancelled, or completed by the step that was running) is
// no longer paused.
func (c *Client) PauseRun(ctx context.Context, runID string, opts *PauseOptions) error {
	if opts == nil {
		opts = &PauseOptions{}
	}
	now := c.cfg.Clock.Now()
	changed, err := c.setPaused(ctx, "pause run", runID, func(r *store.Run) (*store.Update, error) {
		if r.Paused != nil {
			return nil, errPauseUnchanged
		}
		ev := store.NewEvent{Kind: hephtype.EventRunPaused, Name: opts.By}
		if opts.CancelRunning {
			ev.Data = json.RawMessage(`{"cancel_running":true}`)
		}
		return &store.Update{Pause: &store.Pause{By: opts.By, At: now, CancelRunning: opts.CancelRunning},
			Release: opts.CancelRunning, History: []store.NewEvent{ev}}, nil
	})
	if err != nil {
		return err
	}
	if changed {
		if opts.CancelRunning {
			// A task of the run running here stops now.
			c.pool.CheckRun(runID)
		}
		c.cfg.Logger.Info("run paused", "run", runID, "by", opts.By, "cancel_running", opts.CancelRunning)
	}
	return nil
}

// UnpauseRun unpauses a run that PauseRun paused: its tasks are claimable
// again (this process's workers are woken; other processes find them at
// their next poll), timers that came due meanwhile fire, and the signals
// and updates received meanwhile are handled. The history records
// run_unpaused with By of opts (which may be nil). Unpausing a run that
// is not paused changes nothing and succeeds; a finished run is refused
// with ErrRunFinished.
func (c *Client) UnpauseRun(ctx context.Context, runID string, opts *UnpauseOptions) error {
	if opts == nil {
		opts = &UnpauseOptions{}
	}
	changed, err := c.setPaused(ctx, "unpause run", runID, func(r *store.Run) (*store.Update, error) {
		if r.Paused == nil {
			return nil, errPauseUnchanged
		}
		return &store.Update{Unpause: true, History: []store.NewEvent{{Kind: hephtype.EventRunUnpaused, Name: opts.By}}}, nil
	})
	if err != nil {
		return err
	}
	if changed {
		for q := range c.cfg.Queues {
			c.pool.Wake(q)
		}
		c.cfg.Logger.Info("run unpaused", "run", runID, "by", opts.By)
	}
	return nil
}

// setPaused applies decide to a run that is not finished; it reports
// whether it wrote (false: decide found nothing to change).
func (c *Client) setPaused(ctx context.Context, op, runID string, decide func(*store.Run) (*store.Update, error)) (bool, error) {
	if runID == "" {
		return false, fmt.Errorf("%s: %w: the run id is empty", op, ErrInvalidInput)
	}
	res, err := c.cfg.Store.Apply(ctx, &store.ApplyParams{Now: c.cfg.Clock.Now(), Changes: []store.Change{{
		RunID: runID,
		Decide: func(r *store.Run) (*store.Update, error) {
			if r.Status.Terminal() {
				return nil, fmt.Errorf("%s %s: %w: it is %s", op, r.ID, ErrRunFinished, r.Status)
			}
			return decide(r)
		},
	}}})
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", op, runID, err)
	}
	switch err := res.Changes[0].Err; {
	case err == nil:
		return true, nil
	case errors.Is(err, errPauseUnchanged):
		return false, nil
	default:
		return false, err
	}
}

// pausedCondition is the condition a paused run shows.
func pausedCondition(p *store.Pause) Condition {
	msg := "paused"
	if p.By != "" {
		msg = "paused by " + p.By
	}
	if p.CancelRunning {
		msg += " (running tasks cancelled)"
	}
	return Condition{Code: ConditionPaused, Message: msg, Since: p.At}
}
