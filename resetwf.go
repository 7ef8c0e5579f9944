package hephaestus

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
)

// The points a workflow run can be reset to (ResetWorkflowOptions.Point),
// besides a decision number ("1", "2", ...).
const (
	// ResetPointFirst: before the first decision. The new run decides its
	// first activation again with the current code.
	ResetPointFirst = "first"
	// ResetPointLastGood: right after the last decision before the one
	// that ended the run (completed, failed or continued it); for a run
	// that has not ended, its last decision. The default.
	ResetPointLastGood = "last_good"
)

// EventWorkflowReset is the history entry of a reset, on both runs: on
// the run that was reset it names the new run (Name), on the new run the
// run it was reset from.
const EventWorkflowReset = hephtype.EventWorkflowReset

// ResetWorkflowOptions tune ResetWorkflow.
type ResetWorkflowOptions struct {
	// Point is where in the run's history to reset it: ResetPointFirst,
	// ResetPointLastGood (the default) or a decision number N (the run
	// as it stood right after its N-th decision: the N-th decision entry
	// of its history and the commands after it).
	Point string
	// ReapplySignals appends the signals the run received after the
	// point to the new run's history, in their order, after the reset
	// entry: the new run's next decision receives them. Without it they
	// are dropped.
	ReapplySignals bool
	// By names who resets the run, for the history (the API server sets
	// the authenticated principal). Reason says why.
	By, Reason string
}

// ResetWorkflow resets a code-first workflow run to a point of its
// history, and returns the new run that carries it on.
//
// The new run, of the same workflow with the same input, tags, metadata
// and business id, starts with the old run's history copied up to the
// point, then a workflow_reset entry naming the old run (and the
// signals received after the point, with opts.ReapplySignals). Its code
// is the workflow's current code, registered in this client: it must
// replay the copied history (a *NonDeterminismError otherwise, and
// nothing is written) and decides what comes after the point. What the
// copied history left open runs again: activities scheduled and not
// reported are scheduled again (a new first attempt), timers started and
// not fired fire at their recorded time (at once if it has passed),
// children started and not reported start again as new child runs of
// the new run. Outcomes recorded before the point (activity results,
// fired timers, children's results) are kept and not run again.
//
// The old run is marked reset: its history gets a workflow_reset entry
// naming the new run, Run.ResetTo names it (the new run's
// Run.ResetFrom names the old one), and if it was active it is cancelled
// (its tasks go, its open children are cancelled).
//
// The new run's id derives from the old run's id and the point, and both
// writes commit in one transaction: a reset tried again (after a lost
// reply, or by two operators at once) creates the new run once and
// returns it. A child workflow run cannot be reset (reset its parent);
// bad points fail with an error wrapping ErrInvalidInput.
func (c *Client) ResetWorkflow(ctx context.Context, runID string, opts *ResetWorkflowOptions) (*Run, error) {
	if opts == nil {
		opts = &ResetWorkflowOptions{}
	}
	r, err := c.wf.ResetWorkflow(ctx, runID, &wfrt.ResetOptions{Point: opts.Point, ReapplySignals: opts.ReapplySignals, By: opts.By, Reason: opts.Reason})
	if err != nil {
		return nil, err
	}
	return c.toRun(r), nil
}

// retryWorkflow retries a failed workflow run: a reset to its last good
// point, signals re-applied.
func (c *Client) retryWorkflow(ctx context.Context, runID string, status hephtype.RunStatus) (*Run, error) {
	if status != hephtype.StatusFailed {
		return nil, fmt.Errorf("retry run %s: %w: run %s is %s, only a failed run can be retried", runID, ErrNotRetryable, runID, status)
	}
	return c.ResetWorkflow(ctx, runID, &ResetWorkflowOptions{Point: ResetPointLastGood, ReapplySignals: true, Reason: "retry"})
}
