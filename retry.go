package hephaestus

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// ErrNotRetryable: RetryRun was given a run that cannot be retried: a
// run that is not failed. Nothing was written.
var ErrNotRetryable = hephtype.ErrNotRetryable

// RetryRun runs a failed run of a flow, a stored document or a job again
// from where it failed, and returns it as the retry left it (running).
// Its failed steps and map elements, and the steps the failure cancelled,
// run again with a fresh budget of attempts; the steps that completed
// keep their outputs and do not run again; the steps after them run when
// their dependencies complete, as if the failure had not happened. The
// history records the retry (EventRunRetried), and the run's error is
// cleared. Attempt numbers go on counting across the retry.
//
// Only the first of two retries of one failure applies (the retry is
// decided from the stored run): the second, like a retry of a run that is
// not failed, fails with ErrNotRetryable. A run whose business id (unique while active)
// another run took since it failed fails with ErrDuplicateRun. The run's
// flow version must be registered in this client (or be a stored document
// its registry compiles).
//
// A failed code-first workflow run is not retried in place: RetryRun
// resets it to its last good point (ResetWorkflow with
// ResetPointLastGood, signals re-applied) and returns the new run; the
// failed run is marked reset. Retried again, it returns the same new run.
func (c *Client) RetryRun(ctx context.Context, runID string) (*Run, error) {
	if r, err := c.cfg.Store.GetRun(ctx, runID); err == nil && r.Kind == hephtype.KindWorkflow {
		return c.retryWorkflow(ctx, runID, r.Status)
	}
	if err := c.ensureDocumentFlow(ctx, runID); err != nil {
		return nil, fmt.Errorf("retry run %s: %w", runID, err)
	}
	r, err := c.flows.Retry(ctx, runID)
	if err != nil {
		return nil, err
	}
	return c.toRun(r), nil
}
