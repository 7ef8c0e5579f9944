package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// Remote activities: activity tasks that a worker outside the process
// claims by handler ("activity:<name>") and reports on. Their outcome is
// committed by activityOutcome, the one commit of an activity attempt run
// in this process: fenced by the task's lease, retried per the policy
// the workflow gave the activity, followed by the decision it causes.

// RemoteActivity is a claimed attempt of an activity, as the worker that
// runs it receives it.
type RemoteActivity struct {
	// Input is the activity's input.
	Input json.RawMessage
	// Timeout bounds the attempt from its claim (StartToClose, or
	// flow.DefaultTimeout).
	Timeout time.Duration
	// Heartbeat is the activity's heartbeat timeout (0: none).
	Heartbeat time.Duration
}

// PrepareRemote readies a claimed activity attempt for a worker outside
// the process. A task whose payload does not decode is failed for good
// here (and not handed out).
func (c *Runtime) PrepareRemote(t *store.Task, worker string, claimedAt time.Time) (*RemoteActivity, error) {
	if t.Kind != store.TaskActivity {
		return nil, fmt.Errorf("task %d is a %s, not an activity", t.ID, t.Kind)
	}
	ev := telemetry.OfTask(t)
	ev.Kind = telemetry.StepStarted
	c.cfg.Telemetry.Emit(ev)
	p, err := decodeActivity(t)
	if err != nil {
		_, cerr := c.activityOutcome(&attempt{task: t, details: t.Details, start: claimedAt, worker: worker}, p, "", nil, err, flow.RetryPolicy{})
		return nil, errors.Join(err, cerr)
	}
	return &RemoteActivity{Input: p.Input, Timeout: p.timeout(), Heartbeat: p.Heartbeat}, nil
}

// CompleteRemote commits the output a worker outside the process reported
// for an activity attempt claimed at claimedAt. A stale report (the lease
// went to another claim, or the run ended) fails with store.ErrLeaseLost
// and writes nothing; one after the attempt's timeout is a timeout
// failure, retried per the activity's policy.
//
// attrs are search attributes the worker upserts with the result, of
// those the workflow declares (AttrDecl): a name not declared, or a value
// not of its type, is refused (ErrInvalidInput) and nothing is written.
func (c *Runtime) CompleteRemote(ctx context.Context, t *store.Task, worker string, claimedAt time.Time, output json.RawMessage, attrs map[string]any) error {
	var sattrs map[string]store.Attr
	if len(attrs) > 0 {
		decl, err := c.AttrDecl(ctx, t.Workflow)
		if err != nil {
			return err
		}
		if sattrs, err = store.AttrsOf(decl, attrs); err != nil {
			return fmt.Errorf("activity %q of workflow %q: %w", t.Step, t.Workflow, err)
		}
	}
	var err error
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	if !json.Valid(output) {
		err = flow.NonRetryable(fmt.Errorf("activity %q: the worker's output is not a JSON value", t.Step))
	} else if perr := limits.Payload(output, c.cfg.MaxPayloadSize, "output of activity "+strconv.Quote(t.Step)); perr != nil {
		err = flow.NonRetryable(perr)
	}
	return c.remoteOutcome(ctx, t, worker, claimedAt, output, err, t.Details, sattrs)
}

// FailRemote commits the failure a worker outside the process reported
// for an activity attempt claimed at claimedAt: retried per the
// activity's policy when retryable, failed for good otherwise. details
// (when not nil) are the attempt's last heartbeat details, which the
// retry reads. Fenced as CompleteRemote.
func (c *Runtime) FailRemote(ctx context.Context, t *store.Task, worker string, claimedAt time.Time, msg string, retryable bool, details json.RawMessage) error {
	err := errors.New(msg)
	if !retryable {
		err = flow.NonRetryable(err)
	}
	if details == nil {
		details = t.Details
	}
	return c.remoteOutcome(ctx, t, worker, claimedAt, nil, err, details, nil)
}

func (c *Runtime) remoteOutcome(_ context.Context, t *store.Task, worker string, claimedAt time.Time, out json.RawMessage, cause error, details json.RawMessage, attrs map[string]store.Attr) error {
	if t.Kind != store.TaskActivity {
		return fmt.Errorf("task %d is a %s, not an activity", t.ID, t.Kind)
	}
	p, err := decodeActivity(t)
	if err != nil {
		return err
	}
	policy := p.policy()
	if act, ok := c.reg.activity(t.Step); ok {
		policy.NonRetryable = act.Options().RetryPolicy.NonRetryable
	}
	if timeout := p.timeout(); c.cfg.Clock.Now().After(claimedAt.Add(timeout)) {
		cause = fmt.Errorf("activity %q timed out after %s: %w", t.Step, timeout, context.DeadlineExceeded)
	}
	// The committer emits the attempt's end.
	_, err = c.activityOutcome(&attempt{task: t, details: details, start: claimedAt, worker: worker, attrs: attrs}, p, "", out, cause, policy)
	return err
}

// decodeActivity reads an activity task's payload; an error is permanent.
func decodeActivity(t *store.Task) (activityPayload, error) {
	var p activityPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return p, flow.NonRetryable(fmt.Errorf("activity %q: bad task payload: %w", t.Step, err))
	}
	return p, nil
}

// timeout bounds an attempt of the activity.
func (p *activityPayload) timeout() time.Duration {
	if p.StartToClose <= 0 {
		return flow.DefaultTimeout
	}
	return p.StartToClose
}
