package hephaestus

import (
	"context"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrRunActive: DeleteRun without DeleteOptions.Force named a run that is
// pending, running or waiting, or a finished run that still has work
// left (starting the run that continues it, reporting to its parent,
// cancelling its children). Nothing was deleted. Cancel the run first,
// or force the delete.
var ErrRunActive = store.ErrRunActive

// DeleteOptions are the optional parameters of DeleteRun.
type DeleteOptions struct {
	// Force deletes the run even when it is active or has work left. Its
	// tasks go with it in the same transaction: none is claimed again,
	// and a worker that holds one (here or in another process) cannot
	// commit its result, which the store refuses as for a lost lease; a
	// step running here sees its context cancelled at once, one running
	// in another process at once on PostgreSQL (which notifies it), else
	// at its next heartbeat. Nothing of the run is cancelled or reported: its parent,
	// if any, never hears of it (a workflow waiting for it as a child
	// waits on), and its children run on.
	Force bool
}

// DeletedRun is what DeleteRun deleted: the run's id, workflow, kind and
// status when it was deleted, and the number of its tasks deleted with it.
type DeletedRun = store.DeletedRun

// DeleteRun deletes a run for good, with its history, tasks, requests
// (signals, updates, queries) and step logs, in one transaction. A run
// that is active, or finished with work left, is refused with
// ErrRunActive unless opts.Force is set. A run that does not exist
// (deleted already: a second delete) is ErrRunNotFound.
//
// The run's child runs are kept: their Run.ParentID names a run that is
// gone, as after retention. Deleting a run whose id a start names again
// (StartOptions.RunID) lets that start create a new run.
func (c *Client) DeleteRun(ctx context.Context, runID string, opts *DeleteOptions) (*DeletedRun, error) {
	if opts == nil {
		opts = &DeleteOptions{}
	}
	if runID == "" {
		return nil, fmt.Errorf("delete run: %w: the run id is empty", ErrInvalidInput)
	}
	d, err := c.cfg.Store.DeleteRun(ctx, &store.DeleteRunParams{ID: runID, Force: opts.Force})
	if err != nil {
		return nil, err // the store's errors name the call and the run
	}
	if d.Tasks > 0 {
		// A step of the run running here stops now. (PostgreSQL also
		// tells the other processes that listen.)
		c.pool.CheckRun(d.ID)
	}
	if d.Kind == hephtype.KindWorkflow && c.wf != nil {
		// The run's cached state goes; waiters for its updates learn.
		c.wf.Cancelled(&store.Run{ID: d.ID, Workflow: d.Workflow, Kind: d.Kind, Status: d.Status})
	}
	c.cfg.Logger.Info("run deleted", "run", d.ID, "workflow", d.Workflow, "status", d.Status, "tasks", d.Tasks, "forced", opts.Force)
	return d, nil
}

// DeleteRunsResult is what a call of DeleteRuns did.
type DeleteRunsResult struct {
	// Deleted counts the runs deleted.
	Deleted int
	// Kept are the runs the filter selected that were not deleted: active,
	// or finished with work left (ErrRunActive). A run deleted by someone
	// else meanwhile is neither deleted nor kept.
	Kept []string
	// Next is the cursor to pass as ListOptions.Cursor (with the same
	// filter) to go on; empty when every run the filter selects was seen.
	Next string
}

// DeleteRuns deletes the finished runs that a filter selects, one page
// of runs per call (filter.Limit, 100 by default, at most 1000), as
// DeleteRun without Force deletes each: active runs are kept. Call it
// again with filter.Cursor set to the result's Next until Next is empty;
// each call is bounded, and a call that failed may simply be repeated
// (the runs it deleted are gone; the cursor skips nothing). On an
// error, the result counts what the call did before it.
//
// A filter that selects every run is ErrInvalidInput: name at least one
// field (set CreatedBefore to the present to delete every finished run).
func (c *Client) DeleteRuns(ctx context.Context, filter *ListOptions) (*DeleteRunsResult, error) {
	if filter == nil || filterEmpty(filter) {
		return nil, fmt.Errorf("delete runs: %w: the filter selects every run: give at least one field", ErrInvalidInput)
	}
	page, err := c.ListRuns(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("delete runs: %w", err)
	}
	out := &DeleteRunsResult{Next: page.Next}
	for _, r := range page.Runs {
		if r.Status.Active() {
			out.Kept = append(out.Kept, r.ID)
			continue
		}
		_, err := c.DeleteRun(ctx, r.ID, nil)
		switch {
		case err == nil:
			out.Deleted++
		case errors.Is(err, ErrRunActive):
			out.Kept = append(out.Kept, r.ID)
		case errors.Is(err, ErrRunNotFound):
		default:
			return out, fmt.Errorf("delete runs: %w", err)
		}
	}
	return out, nil
}

// filterEmpty reports whether the filter selects every run.
func filterEmpty(f *ListOptions) bool {
	return f.Flow == "" && len(f.Statuses) == 0 && f.BusinessID == "" && len(f.Tags) == 0 && f.CreatedAfter.IsZero() &&
		f.CreatedBefore.IsZero() && f.Kind == "" && f.Queue == "" && len(f.Metadata) == 0 && f.Text == "" && f.Version == 0 &&
		f.Parent == "" && f.Build == "" && len(f.IDs) == 0
}
