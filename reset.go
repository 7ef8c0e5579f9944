package hephaestus

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrNotResettable: ResetRun was given a run that cannot be reset to the
// step: a code-first workflow run, a cancelled run, or a step that has not
// run yet. Nothing was written.
var ErrNotResettable = hephtype.ErrNotResettable

// ResetOptions tune ResetRun.
type ResetOptions struct {
	// By names who resets the run, for the history (the API server sets
	// the authenticated principal). Empty: nobody named.
	By string
	// Key, when set, makes the reset idempotent: a second ResetRun of the
	// run with the same key (a call tried again after its answer was lost)
	// resets nothing and returns the run as it is. At most 194 bytes.
	// Empty: every call resets.
	Key string
}

// maxResetKey bounds ResetOptions.Key (the store's key limit, less the
// prefix it is stored under).
const maxResetKey = store.MaxKeyLen - len("reset:")

// ResetRun runs a run of a flow, a stored document or a job again from
// step, and returns it as the reset left it (running). The step and every
// step after it (every step a path of edges leads to from it) run again
// from their start: those running or waiting are cancelled (their holders
// lose their tasks, and their late results are refused), their outputs
// and map elements are cleared, and they run again as their dependencies
// complete, each with a fresh budget of attempts (attempt numbers go on
// counting). The other steps keep their outputs and do not run again,
// except those that failed or were cancelled, which run again as by
// RetryRun. The history records run_reset with the step, opts.By and the
// steps it runs again.
//
// Running, waiting, completed and failed runs are reset; a completed or
// failed run is reopened (its output and error cleared). A paused run is
// reset too: the steps it schedules wait for UnpauseRun. A cancelled run,
// a code-first workflow run (see the workflow reset operations) and a step
// that has not run yet are refused with ErrNotResettable; an unknown step
// with ErrUnknownStep, naming the steps. A job is a run of one step: its
// step may be left empty, and the reset runs it again. A run whose
// business id another run took since it ended fails with ErrDuplicateRun.
// Each call resets again, unless opts.Key repeats.
func (c *Client) ResetRun(ctx context.Context, runID, step string, opts *ResetOptions) (*Run, error) {
	if opts == nil {
		opts = &ResetOptions{}
	}
	if runID == "" {
		return nil, fmt.Errorf("reset run: %w: the run id is empty", ErrInvalidInput)
	}
	if len(opts.Key) > maxResetKey {
		return nil, fmt.Errorf("reset run %s: %w: the key is %d bytes long, more than %d", runID, ErrInvalidInput, len(opts.Key), maxResetKey)
	}
	if err := c.ensureDocumentFlow(ctx, runID); err != nil {
		return nil, fmt.Errorf("reset run %s: %w", runID, err)
	}
	r, err := c.flows.Reset(ctx, runID, step, opts.By, opts.Key)
	if err != nil {
		return nil, err
	}
	// A step of the run that was running here stops now.
	c.pool.CheckRun(runID)
	for q := range c.cfg.Queues {
		c.pool.Wake(q)
	}
	c.cfg.Logger.Info("run reset", "run", runID, "step", step, "by", opts.By)
	return c.toRun(r), nil
}
