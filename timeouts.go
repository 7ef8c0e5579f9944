package hephaestus

import (
	"context"
	"errors"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/store"
)

// Time limits (docs/operations.md): a run started with an execution
// timeout (StartOptions.ExecutionTimeout, WorkflowOptions, JobOptions,
// DocumentOptions, or a flow's default) carries its deadline on its stored
// row (Run.Deadline). The maintenance service of every started client
// looks for active runs past their deadline and times each out in a
// keyed change of the run, decided from the stored run like CancelRun: a
// worker's commit that races it is fenced by its lease, and a run that
// finished first is left as it is.

// timeOutRun times out one run past its deadline; false when it was not
// this call that did (the run finished first, or another process timed
// it out).
func (c *Client) timeOutRun(ctx context.Context, runID string) (bool, error) {
	if err := c.ensureDocumentFlow(ctx, runID); err != nil && !errors.Is(err, store.ErrRunNotFound) {
		return false, err
	}
	run, err := c.flows.TimeOut(ctx, runID, func(run *store.Run, msg string) (*store.Update, error) {
		return wfrt.TimedOutUpdate(run, msg)
	})
	switch {
	case errors.Is(err, engine.ErrRunFinished), errors.Is(err, flowrt.ErrNotDue), errors.Is(err, store.ErrRunNotFound):
		return false, nil
	case err != nil:
		return false, err
	case run == nil:
		return false, nil
	}
	if run.Kind == hephtype.KindWorkflow {
		c.wf.Cancelled(run)
	}
	return true, nil
}
