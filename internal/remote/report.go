package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/steplog"
	"github.com/hephaestus-go/hephaestus/store"
)

// Heartbeat extends the lease of a remote task by the claim's lease and
// records details (when not nil: a JSON value, at most MaxPayloadSize)
// for a retry to resume from. cancelled is true when the run was
// cancelled: the task is gone, and the worker stops. A lease lost for
// another reason is ErrTaskLost. A heartbeat after the attempt's deadline
// records the attempt's timeout (retried per the policy) and is
// ErrTaskLost.
func (r *Runtime) Heartbeat(ctx context.Context, tok string, details json.RawMessage) (cancelled bool, err error) {
	k, err := decodeToken(tok)
	if err != nil {
		return false, err
	}
	if err := r.checkDetails(details); err != nil {
		return false, fmt.Errorf("heartbeat task %d: %w", k.taskID, err)
	}
	c, err := r.authorize(ctx, k)
	if err != nil {
		return false, err
	}
	now := r.cfg.Clock.Now()
	if now.After(c.Deadline) {
		return r.timedOut(ctx, c, details)
	}
	p := &store.HeartbeatParams{Leases: []store.Lease{{TaskID: c.TaskID, Token: c.Token}}, Until: now.Add(c.Lease)}
	if details != nil {
		p.Details = map[int64]json.RawMessage{c.TaskID: details}
	}
	lost, err := r.cfg.Store.Heartbeat(ctx, p)
	if err != nil {
		return false, fmt.Errorf("heartbeat task %d: %w", c.TaskID, err)
	}
	if len(lost) == 0 {
		return false, nil
	}
	return r.lostOrCancelled(ctx, c, "")
}

// Complete commits the output (a JSON value; empty is null) of a remote
// task: the step's output (through its RemoteFinish hook) or the
// activity's result, and the decision that follows, in one change fenced
// by the claim. A stale token fails with ErrTaskLost and writes nothing;
// output that is not JSON fails with hephtype.ErrInvalidInput. After the
// attempt's deadline (the one recorded at the claim) the attempt is
// recorded as timed out instead (retried per the policy), and the output
// dropped: ErrTaskLost.
//
// attrs are search attributes upserted with the result (of those the
// flow or workflow declares; others are ErrInvalidInput, and nothing is
// written).
func (r *Runtime) Complete(ctx context.Context, tok string, output json.RawMessage, attrs map[string]any) error {
	k, err := decodeToken(tok)
	if err != nil {
		return err
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	if !json.Valid(output) {
		return fmt.Errorf("complete task %d: %w: the output is not a JSON value", k.taskID, hephtype.ErrInvalidInput)
	}
	c, err := r.authorize(ctx, k)
	if err != nil {
		return err
	}
	if r.cfg.Clock.Now().After(c.Deadline) {
		cancelled, err := r.timedOut(ctx, c, nil)
		if cancelled {
			return errLost(c.TaskID, c.RunID, "the run was cancelled")
		}
		return err
	}
	return r.outcome(ctx, c, func(t *store.Task) error {
		switch t.Kind {
		case store.TaskStep:
			return r.cfg.Flows.CompleteRemote(ctx, t, t.Owner, c.ClaimedAt, output, attrs)
		case store.TaskActivity:
			return r.cfg.Workflows.CompleteRemote(ctx, t, t.Owner, c.ClaimedAt, output, attrs)
		}
		return fmt.Errorf("%w: a %s task is not remote work", ErrInvalidToken, t.Kind)
	})
}

// Fail commits the failure of a remote task's attempt: retried per the
// step's or activity's policy when retryable, failed for good otherwise.
// details (when not nil) are recorded for the retry to resume from.
// Fenced as Complete.
func (r *Runtime) Fail(ctx context.Context, tok, msg string, retryable bool, details json.RawMessage) error {
	k, err := decodeToken(tok)
	if err != nil {
		return err
	}
	if err := r.checkDetails(details); err != nil {
		return fmt.Errorf("fail task %d: %w", k.taskID, err)
	}
	c, err := r.authorize(ctx, k)
	if err != nil {
		return err
	}
	if msg == "" {
		msg = "the remote worker reported a failure"
	}
	return r.outcome(ctx, c, func(t *store.Task) error {
		return r.fail(ctx, t, c, msg, retryable, details)
	})
}

// authorize finds the claim a token was made for and checks that the
// token and the caller may report on it: the task's current claim
// record, the secret's hash and the identity that claimed must all
// match. A token of an earlier claim of the task (its fence is older
// than the record's), or of a task that is gone, is ErrTaskLost: nothing
// the token could do is possible any more. Every other refusal is the
// same ErrRefused, so that a made-up token cannot be told from a
// stolen one.
func (r *Runtime) authorize(ctx context.Context, k *token) (*store.RemoteClaim, error) {
	refused := fmt.Errorf("task %d: %w", k.taskID, ErrRefused)
	c, err := r.cfg.Store.GetRemoteClaim(ctx, k.taskID)
	switch {
	case errors.Is(err, store.ErrRemoteClaimNotFound):
		// Never handed out, or its task is gone and a later hand-out
		// pruned the record (or its run was deleted).
		if _, err := r.cfg.Store.GetTask(ctx, k.taskID); errors.Is(err, store.ErrTaskNotFound) {
			return nil, errLost(k.taskID, "", "the task is gone (completed, or its run ended)")
		} else if err != nil {
			return nil, fmt.Errorf("read task %d: %w", k.taskID, err)
		}
		return nil, refused
	case err != nil:
		return nil, fmt.Errorf("read the claim of task %d: %w", k.taskID, err)
	case k.fence < c.Token:
		return nil, errLost(c.TaskID, c.RunID, "the task was claimed again")
	case k.fence != c.Token:
		return nil, refused
	}
	// Both compared whatever the first says: the time taken tells
	// nothing either.
	secretOK := k.matches(c.SecretHash)
	callerOK := Caller(ctx) == c.Principal
	if !secretOK || !callerOK {
		return nil, refused
	}
	return c, nil
}

// timedOut records the timeout of an attempt that ran past its deadline,
// as a step whose code runs past its timeout is stopped and failed (and
// retried per its policy), and reports the lease as lost.
func (r *Runtime) timedOut(ctx context.Context, c *store.RemoteClaim, details json.RawMessage) (bool, error) {
	const why = "the attempt ran past its deadline"
	err := r.outcome(ctx, c, func(t *store.Task) error {
		return r.fail(ctx, t, c, why, true, details)
	})
	switch {
	case err == nil:
		return false, errLost(c.TaskID, c.RunID, why+"; its timeout was recorded")
	case errors.Is(err, ErrTaskLost):
		return r.lostOrCancelled(ctx, c, "")
	}
	return false, err
}

// lostOrCancelled tells why a claim's lease is gone: its run was
// cancelled (true), or ErrTaskLost.
func (r *Runtime) lostOrCancelled(ctx context.Context, c *store.RemoteClaim, why string) (bool, error) {
	if _, err := r.cfg.Store.GetTask(ctx, c.TaskID); errors.Is(err, store.ErrTaskNotFound) {
		run, err := r.cfg.Store.GetRun(ctx, c.RunID)
		if err == nil && run.Status == hephtype.StatusCancelled {
			return true, nil
		}
	}
	return false, errLost(c.TaskID, c.RunID, why)
}

func (r *Runtime) fail(ctx context.Context, t *store.Task, c *store.RemoteClaim, msg string, retryable bool, details json.RawMessage) error {
	switch t.Kind {
	case store.TaskStep:
		return r.cfg.Flows.FailRemote(ctx, t, t.Owner, c.ClaimedAt, msg, retryable, details)
	case store.TaskActivity:
		return r.cfg.Workflows.FailRemote(ctx, t, t.Owner, c.ClaimedAt, msg, retryable, details)
	}
	return fmt.Errorf("%w: a %s task is not remote work", ErrInvalidToken, t.Kind)
}

// outcome reads the claim's task back and, while the claim holds it,
// commits an outcome with commit: the change is fenced by the claim's
// lease, so a claim lost between the read and the commit writes nothing
// either. Lost leases are ErrTaskLost. The claim's record is left for
// the next hand-out to prune (PutRemoteClaim deletes the records whose
// task is gone in its own statement): deleting it here was a commit of
// its own for every outcome, and a record whose task is gone authorizes
// nothing (heldTask finds no task: ErrTaskLost, as without a record).
func (r *Runtime) outcome(ctx context.Context, c *store.RemoteClaim, commit func(t *store.Task) error) error {
	t, err := r.heldTask(ctx, c)
	if err != nil {
		return err
	}
	if err := commit(t); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			return errLost(c.TaskID, c.RunID, "")
		}
		return err
	}
	return nil
}

// heldTask reads a claim's task back: ErrTaskLost unless the claim still
// holds it.
func (r *Runtime) heldTask(ctx context.Context, c *store.RemoteClaim) (*store.Task, error) {
	t, err := r.cfg.Store.GetTask(ctx, c.TaskID)
	switch {
	case errors.Is(err, store.ErrTaskNotFound):
		return nil, errLost(c.TaskID, c.RunID, "the task is gone (completed, or its run ended)")
	case err != nil:
		return nil, fmt.Errorf("read task %d: %w", c.TaskID, err)
	case t.RunID != c.RunID:
		return nil, fmt.Errorf("%w: the task is not of the claim's run", ErrInvalidToken)
	case t.Token != c.Token || t.Owner == "":
		return nil, errLost(c.TaskID, c.RunID, "the task was claimed again or given back")
	}
	return t, nil
}

// checkDetails checks heartbeat details from a remote worker.
func (r *Runtime) checkDetails(details json.RawMessage) error {
	if details == nil {
		return nil
	}
	if !json.Valid(details) {
		return fmt.Errorf("%w: the details are not a JSON value", hephtype.ErrInvalidInput)
	}
	return limits.Input(details, r.cfg.MaxPayloadSize, "the heartbeat details")
}

// errLost is ErrTaskLost for a claim's task.
func errLost(taskID int64, runID, why string) error {
	of := fmt.Sprintf("task %d", taskID)
	if runID != "" {
		of += " of run " + runID
	}
	if why == "" {
		return fmt.Errorf("%s: %w", of, ErrTaskLost)
	}
	return fmt.Errorf("%s: %w: %s", of, ErrTaskLost, why)
}

// Logs stores log records of the attempt a token's claim holds, with the
// attempt's step log (run, step or activity, element, attempt, and the
// worker that claimed), attributes named like secrets redacted. Records
// are checked first: a bad one fails the call with an error that wraps
// hephtype.ErrInvalidInput and names it (logs[i].field). Authorized as a
// heartbeat.
func (r *Runtime) Logs(ctx context.Context, tok string, logs []hephtype.RemoteLog) error {
	if len(logs) == 0 {
		return nil
	}
	k, err := decodeToken(tok)
	if err != nil {
		return err
	}
	recs, err := r.checkLogs(logs)
	if err != nil {
		return fmt.Errorf("logs of task %d: %w: %w", k.taskID, hephtype.ErrInvalidInput, err)
	}
	c, err := r.authorize(ctx, k)
	if err != nil {
		return err
	}
	t, err := r.heldTask(ctx, c)
	if err != nil {
		return err
	}
	for i := range recs {
		x := &recs[i]
		x.RunID, x.Step, x.Index, x.Attempt, x.Worker = t.RunID, t.Step, max(t.Index, 0), t.Attempt, t.Owner
	}
	if err := r.cfg.Store.AppendLogs(ctx, &store.AppendLogsParams{Records: recs}); err != nil {
		return fmt.Errorf("logs of task %d: %w", c.TaskID, err)
	}
	return nil
}

// checkLogs validates a remote worker's records and makes them store
// records (without their attempt).
func (r *Runtime) checkLogs(logs []hephtype.RemoteLog) ([]store.LogRecord, error) {
	if len(logs) > hephtype.MaxRemoteLogs {
		return nil, fmt.Errorf("logs: %d records; at most %d per report", len(logs), hephtype.MaxRemoteLogs)
	}
	now := r.cfg.Clock.Now()
	out := make([]store.LogRecord, len(logs))
	for i, l := range logs {
		level := slog.LevelInfo
		if l.Level != "" {
			if err := level.UnmarshalText([]byte(strings.ToUpper(l.Level))); err != nil {
				return nil, fmt.Errorf("logs[%d].level: %q is not one of DEBUG, INFO, WARN and ERROR", i, l.Level)
			}
		}
		at := l.Time
		if at.IsZero() {
			at = now
		}
		rec := store.LogRecord{Time: at, Level: level, Message: l.Message, Attrs: steplog.RedactJSON(l.Attrs)}
		// Checked with a stand-in attempt: the claim's is read later.
		probe := rec
		probe.RunID, probe.Step, probe.Attempt = "-", "-", 1
		if err := probe.Check(); err != nil {
			return nil, fmt.Errorf("logs[%d]: %w", i, err)
		}
		out[i] = rec
	}
	return out, nil
}
