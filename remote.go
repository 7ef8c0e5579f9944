package hephaestus

import (
	"context"
	"encoding/json"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/remote"
)

// Remote work: the steps of flows declared with flow.Remote (and
// flow.RemoteMap), the actions of documents that are remote
// (flowdoc.RemoteAction), and the activities of code-first workflows, run
// by workers outside this process: the server's HTTP workers, in any
// language. A worker claims tasks by the names it handles (ClaimRemote),
// heartbeats while it works (HeartbeatRemote), and completes or fails
// each (CompleteRemote, FailRemote) with the task's token.
//
// The runtime behind these methods is internal/remote. Everything goes
// through the task seam that in-process workers use: claims are the
// store's, strict (only the listed handlers; never a workflow timer or an
// operation) and within the queues' flow control; every outcome is the
// same fenced change as an in-process step's or activity's, so retries,
// timeouts, the decision that follows and exactly-once hold alike.
//
// A token is a capability: it carries a random secret of the claim, whose
// facts (the fence, the identity that claimed, the attempt's deadline and
// lease) the store keeps, never the token. It is accepted only from the
// identity that claimed (RemoteClaim.Principal; WithRemoteCaller names
// the caller of a report), and only while its claim holds the task: once
// its lease is lost (it expired and another worker claimed the task, or
// the run was cancelled), reporting with it writes nothing and fails with
// ErrTaskLost.

// Errors of remote work.
var (
	// ErrTaskLost: the task's lease is no longer held by the token's
	// claim (the lease expired and another worker claimed the task, the
	// run was cancelled or ended, or the attempt was completed already).
	// Nothing was written; the worker drops its result.
	ErrTaskLost = hephtype.ErrTaskLost
	// ErrInvalidToken: the token is not one that ClaimRemote handed out
	// for the task's current claim, or the caller is not the identity
	// that claimed (WithRemoteCaller). A token of an older server
	// (version 1) is refused too: its holder claims the task again.
	// Nothing was written.
	ErrInvalidToken = hephtype.ErrInvalidToken
	// ErrTokenRefused (an ErrInvalidToken): the token is well-formed but
	// does not grant its caller the task's current claim: it was made up
	// or edited, or the caller is not the identity that claimed. The same
	// error for each, so that a made-up token cannot be told from a
	// stolen one. Nothing was written.
	ErrTokenRefused = hephtype.ErrTokenRefused
)

// Limits of a remote claim.
const (
	// MaxRemoteClaim bounds RemoteClaim.Max.
	MaxRemoteClaim = hephtype.MaxRemoteClaim
)

// RemoteClaim asks for tasks for a worker outside the process
// (hephtype.RemoteClaim documents the fields).
type RemoteClaim = hephtype.RemoteClaim

// RemoteTask is a task handed to a worker outside the process
// (hephtype.RemoteTask documents the fields).
type RemoteTask = hephtype.RemoteTask

// The kinds of RemoteTask.
const (
	RemoteStep     = hephtype.RemoteStep
	RemoteActivity = hephtype.RemoteActivity
)

// WithRemoteCaller returns ctx naming the identity that heartbeats,
// completes or fails a remote task: a server passes the principal of the
// API credentials the worker called with. A report is accepted only from
// the identity that claimed the task (RemoteClaim.Principal); without
// WithRemoteCaller the caller is "", as a claim without a Principal.
func WithRemoteCaller(ctx context.Context, principal string) context.Context {
	return remote.WithCaller(ctx, principal)
}

// ClaimRemote leases up to p.Max ready tasks that the worker p names can
// run, and returns them; with p.Wait it waits for some until p.Wait has
// passed (an empty list then) or ctx ends. It records the worker in the
// worker registry, live until its lease and wait are over. A task that
// cannot be handed out (its flow does not load here, or the step's
// RemotePrepare fails, which fails the attempt) is left out.
func (c *Client) ClaimRemote(ctx context.Context, p *RemoteClaim) ([]*RemoteTask, error) {
	return c.remote.Claim(ctx, p)
}

// HeartbeatRemote extends the lease of a remote task by the claim's
// Lease and records details (when not nil: a JSON value, at most
// Config.MaxPayloadSize) for a retry to resume from. cancelled is true
// when the run was cancelled: the task is gone, and the worker stops.
// A lease lost for another reason is ErrTaskLost. A heartbeat after the
// attempt's deadline records the attempt's timeout (retried per the
// policy) and is ErrTaskLost. The caller is the one WithRemoteCaller
// names in ctx.
func (c *Client) HeartbeatRemote(ctx context.Context, token string, details json.RawMessage) (cancelled bool, err error) {
	return c.remote.Heartbeat(ctx, token, details)
}

// CompleteRemote commits the output (a JSON value; empty is null) of a
// remote task: the step's output (through its RemoteFinish hook: a
// document's branch conditions) or the activity's result, and the
// decision that follows, in one change fenced by the token's claim. A
// stale token fails with ErrTaskLost and writes nothing; output that is
// not JSON fails with ErrInvalidInput. After the attempt's deadline (as
// the server recorded it at the claim) the attempt is recorded as timed
// out instead (retried per the policy), and the output dropped:
// ErrTaskLost. The caller is the one WithRemoteCaller names in ctx.
func (c *Client) CompleteRemote(ctx context.Context, token string, output json.RawMessage) error {
	return c.remote.Complete(ctx, token, output, nil)
}

// CompleteOptions are the optional parts of a remote completion.
type CompleteOptions struct {
	// SearchAttributes are upserted on the run with the result, in the
	// same fenced commit (as flow.SetSearchAttributes and
	// workflow.UpsertActivitySearchAttributes do in Go code): of those
	// the flow, job kind or workflow declares, with values of their
	// types. A name not declared, or a value of another type, fails the
	// call with ErrInvalidInput, naming it, and writes nothing: the claim
	// still holds, so the worker can complete again or fail the task.
	SearchAttributes map[string]any
}

// CompleteRemoteWith is CompleteRemote with options.
func (c *Client) CompleteRemoteWith(ctx context.Context, token string, output json.RawMessage, opts *CompleteOptions) error {
	var attrs map[string]any
	if opts != nil {
		attrs = opts.SearchAttributes
	}
	return c.remote.Complete(ctx, token, output, attrs)
}

// FailRemote commits the failure of a remote task's attempt: retried per
// the step's or activity's policy when retryable, failed for good (and
// the run with it, unless a flow routes the step's failure) otherwise.
// details (when not nil) are recorded for the retry to resume from.
// Fenced and bound to the caller as CompleteRemote.
func (c *Client) FailRemote(ctx context.Context, token, msg string, retryable bool, details json.RawMessage) error {
	return c.remote.Fail(ctx, token, msg, retryable, details)
}

// RemoteLog is a record a remote worker logged (hephtype.RemoteLog
// documents the fields).
type RemoteLog = hephtype.RemoteLog

// MaxRemoteLogs bounds the records of one LogRemote call.
const MaxRemoteLogs = hephtype.MaxRemoteLogs

// LogRemote stores records a remote worker logged in the attempt its
// token's claim holds, with the attempt's step log (RunLogs reads them):
// the server calls it with the "logs" of a heartbeat, completion or
// failure, before the report. Attributes named like secrets are
// redacted; a bad record fails the call with an error that wraps
// ErrInvalidInput and names it, and nothing is stored. The token and
// caller are checked as HeartbeatRemote checks them.
func (c *Client) LogRemote(ctx context.Context, token string, logs []RemoteLog) error {
	return c.remote.Logs(ctx, token, logs)
}
