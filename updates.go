package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Updates are durable requests. The caller records the update in the
// store with a task that only a process which has the workflow registered
// claims; it needs none of the workflow's code itself (an HTTP handler, a
// CLI, another service can send one). That worker offers the update to the
// workflow in a decision over the run's current state, where its validator
// runs: an accepted update is written to the run's history
// (update_accepted, then update_completed with the handler's reply); a
// rejected one is recorded with the request only, never in the history.
// The caller waits for the acceptance or the reply (UpdateOptions.WaitFor)
// by reading the store, so any process that reaches the store can wait.
// An update id is recorded once per run: sending it again returns the
// first's outcome, and its handler never runs twice; only a rejected
// update, which wrote nothing, may be sent again under its id (and is
// offered to the workflow anew).

// Errors of updates that callers branch on (see UpdateRejectedError).
var (
	// ErrUpdateInvalid: the workflow's validator refused the update, or
	// its arguments did not decode into the handler's type.
	ErrUpdateInvalid = workflow.ErrUpdateInvalid
	// ErrDecisionFailed: the worker that was to take the update could not
	// decide the run (its code does not replay the history, say); the
	// update was not applied and may be sent again.
	ErrDecisionFailed = workflow.ErrDecisionFailed
)

// UpdateStage is how far UpdateWorkflow waits.
type UpdateStage int

const (
	// UpdateCompleted waits for the handler's reply (the default).
	UpdateCompleted UpdateStage = iota
	// UpdateAccepted returns once the workflow accepted the update (its
	// validator passed and it is recorded in the history); the reply is
	// not waited for.
	UpdateAccepted
)

// UpdateOptions are the optional parameters of UpdateWorkflow.
type UpdateOptions struct {
	// ID identifies the update within the run: letters, digits and
	// "._:-", at most 193 bytes. Sending an update with the ID of one sent
	// to the run before records nothing new: it returns (or waits for)
	// that update's outcome, and its handler does not run again; unless
	// that one was rejected, in which case the update is offered anew.
	// Defaults to a new random id.
	ID string
	// WaitFor says how far to wait: UpdateCompleted (the default) or
	// UpdateAccepted. Bound the wait with ctx.
	WaitFor UpdateStage
}

// UpdateRejectedError reports an update the workflow did not take;
// nothing was written to the run's history. Err says why
// (hephtype.UpdateRejectedError, where it is defined).
type UpdateRejectedError = hephtype.UpdateRejectedError

// UpdateFailedError reports an accepted update whose handler failed; the
// workflow goes on (hephtype.UpdateFailedError, where it is defined).
type UpdateFailedError = hephtype.UpdateFailedError

// UpdateWorkflow sends an update to a workflow run and waits, as
// opts.WaitFor says, for the handler's reply (returned) or for its
// acceptance (nil is returned). A rejected update returns an
// *UpdateRejectedError and writes nothing to the run's history; a failed
// handler returns an *UpdateFailedError. The workflow need not be
// registered in this client: a worker that has it decides. An update to a
// run that continued as new goes to the run that carries it on.
func (c *Client) UpdateWorkflow(ctx context.Context, runID, name string, args any, opts *UpdateOptions) (json.RawMessage, error) {
	p := &wfrt.UpdateParams{RunID: runID, Name: name, Args: args}
	if opts != nil {
		p.ID = opts.ID
		if opts.WaitFor == UpdateAccepted {
			p.Wait = wfrt.WaitAccepted
		}
	}
	out, err := c.wf.UpdateWorkflow(ctx, p)
	if err != nil {
		return nil, updateError(err)
	}
	return out.Result, nil
}

func updateError(err error) error {
	var re *wfrt.UpdateRejectedError
	if errors.As(err, &re) {
		pub := re.UpdateRejectedError
		return &pub
	}
	var fe *wfrt.UpdateFailedError
	if errors.As(err, &fe) {
		return fe
	}
	return err
}

// RunUpdate sends the declared update u with args to a workflow run and
// waits for its reply (see Client.UpdateWorkflow); with
// opts.WaitFor == UpdateAccepted it returns the zero R once the update is
// accepted.
func RunUpdate[A, R any](ctx context.Context, c *Client, runID string, u *workflow.Update[A, R], args A, opts *UpdateOptions) (R, error) {
	var v R
	raw, err := c.UpdateWorkflow(ctx, runID, u.Name(), args, opts)
	if err != nil || raw == nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("update %q of run %s: decode reply into a %T: %w", u.Name(), runID, v, err)
	}
	return v, nil
}

// SendSignal sends the declared signal s with payload to a workflow run
// (see Client.SignalWorkflow).
func SendSignal[A any](ctx context.Context, c *Client, runID string, s *workflow.Signal[A], payload A) error {
	return c.SignalWorkflow(ctx, runID, s.Name(), payload)
}

// Update sends an update to the run (see Client.UpdateWorkflow); RunUpdate
// is its typed form.
func (r *WorkflowRun[Out]) Update(ctx context.Context, name string, args any, opts *UpdateOptions) (json.RawMessage, error) {
	return r.c.UpdateWorkflow(ctx, r.ID, name, args, opts)
}

// Query asks a named query of the run (see Client.QueryNamed); RunQuery
// is its typed form. An empty name returns the published state.
func (r *WorkflowRun[Out]) Query(ctx context.Context, name string, args any) (json.RawMessage, error) {
	return r.c.QueryNamed(ctx, r.ID, name, args)
}

// UpdateWithStart sends an update to the active run of the workflow name
// with workflow id id, starting one first (with input and opts) if there
// is none, and waits as updateOpts.WaitFor says. It returns the run that
// got the update and the handler's reply (nil when only acceptance was
// waited for). The workflow must be registered in this client (it starts
// the run). A run it starts is created with the update's request in one
// transaction, so the update is never lost between the two; calling again
// with the same updateOpts.ID returns the first call's outcome (set the
// ID when the call may be retried).
func (c *Client) UpdateWithStart(ctx context.Context, name, id string, input any, opts *WorkflowOptions, update string, args any, updateOpts *UpdateOptions) (*Run, json.RawMessage, error) {
	if err := opts.noRunID("UpdateWithStart"); err != nil {
		return nil, nil, fmt.Errorf("update with start %q: %w", name, err)
	}
	if err := opts.noSignalID("UpdateWithStart"); err != nil {
		return nil, nil, fmt.Errorf("update with start %q: %w", name, err)
	}
	p := &wfrt.UpdateParams{Name: update, Args: args}
	if updateOpts != nil {
		p.ID = updateOpts.ID
		if updateOpts.WaitFor == UpdateAccepted {
			p.Wait = wfrt.WaitAccepted
		}
	}
	r, out, err := c.wf.UpdateWithStart(ctx, name, id, input, opts.internal(), p)
	var run *Run
	if r != nil {
		run = c.toRun(r)
	}
	if err != nil {
		return run, nil, updateError(err)
	}
	return run, out.Result, nil
}

// UpdateWithStartWorkflow is Client.UpdateWithStart for def and the
// declared update u: it returns a handle on the run and the reply.
func UpdateWithStartWorkflow[In, Out, A, R any](ctx context.Context, c *Client, def *workflow.Definition[In, Out], id string, in In, opts *WorkflowOptions,
	u *workflow.Update[A, R], args A, updateOpts *UpdateOptions) (*WorkflowRun[Out], R, error) {
	var v R
	r, raw, err := c.UpdateWithStart(ctx, def.Name(), id, in, opts, u.Name(), args, updateOpts)
	var run *WorkflowRun[Out]
	if r != nil {
		run = GetWorkflow(c, def, r.ID)
	}
	if err != nil || raw == nil {
		return run, v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return run, v, fmt.Errorf("update %q of run %s: decode reply into a %T: %w", u.Name(), r.ID, v, err)
	}
	return run, v, nil
}
