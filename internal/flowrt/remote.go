package flowrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// Remote steps (flow.Remote, flow.RemoteMap, a document's remote actions)
// are run by workers outside the process, which claim their tasks by
// handler. The root package claims the tasks and holds their tokens; this
// file turns a claimed task into what the worker receives (the step's
// RemotePrepare hook) and the worker's report into the step's outcome
// (RemoteFinish), committed by Complete: the same fenced change as a step
// run in this process, so fencing, retries and timeouts hold alike.

// ErrNotRemote: the task is not one of a remote step.
var ErrNotRemote = errors.New("not a task of a remote step")

// RemoteAttempt is a claimed attempt of a remote step, as the worker that
// runs it receives it.
type RemoteAttempt struct {
	// Input is what the worker receives (RemotePrepare's result, or the
	// step's input document; the element, for a map step).
	Input json.RawMessage
	// Timeout bounds the attempt from its claim (the step's Timeout).
	Timeout time.Duration
}

// remoteSpec returns the flow and step of a remote step's task, loading
// the flow version of its run if need be.
func (r *Runtime) remoteSpec(ctx context.Context, t *store.Task) (*flow.Flow, flow.StepSpec, error) {
	if t.Kind != store.TaskStep {
		return nil, flow.StepSpec{}, fmt.Errorf("task %d is a %s: %w", t.ID, t.Kind, ErrNotRemote)
	}
	if err := r.Ensure(ctx, t.RunID, t.Workflow, t.Version); err != nil {
		return nil, flow.StepSpec{}, err
	}
	f, err := r.Flow(t.Workflow, t.Version)
	if err != nil {
		return nil, flow.StepSpec{}, err
	}
	spec, ok := f.Step(t.Step)
	if !ok || spec.Remote == "" {
		return nil, flow.StepSpec{}, fmt.Errorf("step %q of flow %q version %d: %w", t.Step, t.Workflow, t.Version, ErrNotRemote)
	}
	return f, spec, nil
}

// PrepareRemote readies a claimed attempt of a remote step for the worker
// that claimed it (worker), from claimedAt. An error means the attempt is
// not to be handed out: the flow could not be loaded (the task runs again
// once its lease expires), or the step's RemotePrepare failed, which is
// committed as the attempt's failure (retried per the step's policy).
func (r *Runtime) PrepareRemote(ctx context.Context, t *store.Task, worker string, claimedAt time.Time) (*RemoteAttempt, error) {
	f, spec, err := r.remoteSpec(ctx, t)
	if err != nil {
		return nil, err
	}
	info := telemetry.OfTask(t)
	info.Kind = telemetry.StepStarted
	r.cfg.Telemetry.Emit(info)
	tctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	in, err := f.PrepareRemote(tctx, r.callOf(t))
	if err != nil {
		o := &Outcome{Err: fmt.Sprintf("step %q: prepare the remote worker's input: %v", t.Step, err), Retryable: spec.Retry.Retryable(err),
			StartedAt: claimedAt, Worker: worker, Details: t.Details}
		if _, cerr := r.Complete(t, o, ""); cerr != nil {
			return nil, errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("step %q: prepare the remote worker's input: %w", t.Step, err)
	}
	return &RemoteAttempt{Input: in, Timeout: spec.Timeout}, nil
}

// RemoteTimeout returns how long an attempt of a remote step's task may
// take from its claim.
func (r *Runtime) RemoteTimeout(ctx context.Context, t *store.Task) (time.Duration, error) {
	_, spec, err := r.remoteSpec(ctx, t)
	return spec.Timeout, err
}

// CompleteRemote commits the output a worker outside the process reported
// for an attempt of a remote step, claimed at claimedAt, through the
// step's RemoteFinish hook: fenced by t's lease, as Complete is (a stale
// report fails with store.ErrLeaseLost and writes nothing). A report after
// the attempt's timeout is recorded as a timeout failure, retried per the
// step's policy.
//
// attrs are search attributes the worker upserts with the result, of
// those the flow declares: written with a result that completes the
// attempt (flow.SetSearchAttributes); a name not declared, or a value not
// of its type, is refused (ErrInvalidInput) and nothing is written.
func (r *Runtime) CompleteRemote(ctx context.Context, t *store.Task, worker string, claimedAt time.Time, output json.RawMessage, attrs map[string]any) error {
	f, spec, err := r.remoteSpec(ctx, t)
	if err != nil {
		return err
	}
	sattrs, err := store.AttrsOf(f.SearchAttributes(), attrs)
	if err != nil {
		return fmt.Errorf("step %q of flow %q: %w", t.Step, t.Workflow, err)
	}
	var o *Outcome
	if terr := r.lateRemote(t, spec, claimedAt); terr != nil {
		o = &Outcome{Err: terr.Error(), Retryable: spec.Retry.Retryable(terr)}
	} else {
		tctx, cancel := context.WithTimeout(ctx, spec.Timeout)
		out, ferr := f.FinishRemote(tctx, r.callOf(t), output)
		cancel()
		switch {
		case ferr != nil:
			o = &Outcome{Err: ferr.Error(), Retryable: spec.Retry.Retryable(ferr)}
		default:
			o = &Outcome{Event: out.Event, Output: out.Output, Wait: out.Wait, SearchAttributes: sattrs}
		}
	}
	o.StartedAt, o.Worker, o.Details = claimedAt, worker, t.Details
	return r.completeRemote(t, o)
}

// FailRemote commits the failure a worker outside the process reported
// for an attempt of a remote step, claimed at claimedAt: retried per the
// step's policy when retryable, failed for good otherwise. details (when
// not nil) are the attempt's last heartbeat details, which the retry
// reads. Fenced as CompleteRemote.
func (r *Runtime) FailRemote(ctx context.Context, t *store.Task, worker string, claimedAt time.Time, msg string, retryable bool, details json.RawMessage) error {
	_, spec, err := r.remoteSpec(ctx, t)
	if err != nil {
		return err
	}
	if details == nil {
		details = t.Details
	}
	cause := errors.New(msg)
	if terr := r.lateRemote(t, spec, claimedAt); terr != nil {
		cause, retryable = terr, true
	}
	o := &Outcome{Err: cause.Error(), Retryable: retryable && spec.Retry.Retryable(cause), StartedAt: claimedAt, Worker: worker, Details: details}
	return r.completeRemote(t, o)
}

// lateRemote returns the timeout error of an attempt reported after its
// deadline, or nil.
func (r *Runtime) lateRemote(t *store.Task, spec flow.StepSpec, claimedAt time.Time) error {
	if r.cfg.Clock.Now().After(claimedAt.Add(spec.Timeout)) {
		return fmt.Errorf("step %q timed out after %s: %w", t.Step, spec.Timeout, context.DeadlineExceeded)
	}
	return nil
}

// completeRemote commits o; the committer emits the step's end.
func (r *Runtime) completeRemote(t *store.Task, o *Outcome) error {
	_, err := r.Complete(t, o, "")
	return err
}
