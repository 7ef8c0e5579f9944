package hephtype

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors and limits of remote work (workers outside the process), defined
// here so that the remote runtime and package hephaestus share them.
var (
	// ErrTaskLost: the task's lease is no longer held by the token's
	// claim (the lease expired and another worker claimed the task, the
	// run was cancelled or ended, or the attempt was completed already).
	// Nothing was written; the worker drops its result.
	ErrTaskLost = errors.New("task lost: the token's claim no longer holds the task")
	// ErrInvalidToken: the token is not one that a claim handed out for
	// the task's current claim, or the caller is not the identity that
	// claimed. A token of an older server (version 1) is refused too: its
	// holder claims the task again. Nothing was written.
	ErrInvalidToken = errors.New("invalid task token")
	// ErrTokenRefused (an ErrInvalidToken): the token is well-formed but
	// does not grant its caller the task's current claim: it was made up
	// or edited, or the caller is not the identity that claimed. One
	// error for all, so that a made-up token cannot be told from a stolen
	// one. Nothing was written.
	ErrTokenRefused = fmt.Errorf("%w: the token does not grant this caller the task's current claim", ErrInvalidToken)
)

// MaxRemoteClaim bounds the tasks one remote claim takes.
const MaxRemoteClaim = 100

// The kinds of remote tasks: a remote step or document action (for a map
// step, one element), or a workflow activity.
const (
	RemoteStep     = "step"
	RemoteActivity = "activity"
)

// RemoteClaim asks for tasks for a worker outside the process (the
// client's ClaimRemote; the server's POST /api/v1/tasks/claim).
type RemoteClaim struct {
	// WorkerID names the worker: it holds the leases and appears in the
	// worker registry (ListWorkers) and in the history's step_started
	// entries. Required; it must differ from the claiming client's WorkerID.
	WorkerID string
	// Principal is the identity that claims (the principal of the API
	// credentials a server's worker called with): only a caller naming the
	// same identity (WithRemoteCaller) may heartbeat, complete or fail the
	// tasks handed out. Defaults to "": a caller in the process. At most
	// 1024 bytes.
	Principal string
	// Actions are the remote steps and document actions the worker runs
	// (tasks of handler "action:<name>").
	Actions []string
	// Activities are the workflow activities the worker runs (tasks of
	// handler "activity:<name>"). At least one action or activity is
	// required.
	Activities []string
	// Queues to claim from. Defaults to ["default"].
	Queues []string
	// Max bounds the tasks claimed. Defaults to 1; at most MaxRemoteClaim.
	Max int
	// Lease is how long a task stays leased without a heartbeat: the
	// heartbeat timeout of the worker. Defaults to the client's Config.LeaseDuration.
	Lease time.Duration
	// Wait, when positive, long-polls: ClaimRemote waits up to Wait for a
	// task when none is ready. Defaults to 0: answer at once.
	Wait time.Duration
}

// RemoteTask is a task handed to a worker outside the process.
type RemoteTask struct {
	// Token is the claim's capability: pass it to the client's HeartbeatRemote,
	// CompleteRemote and FailRemote. Opaque (base64url), carrying a random
	// secret; nothing about the attempt (times, run) can be read from or
	// changed in it.
	Token string
	RunID string
	// Kind is "step" (a remote step or document action; for a map step,
	// one element) or "activity".
	Kind string
	// Name is the action or activity: what the worker registered.
	Name string
	// Workflow and Version name the flow, document or workflow of the run.
	Workflow string
	Version  int
	// Step is the step (the activity, for an activity); Index the element
	// of a map step (-1 otherwise), or an activity's sequence number in
	// its workflow.
	Step    string
	Index   int
	Attempt int
	// Input is what the worker works on: a document action's resolved
	// arguments, a remote step's input (flow.RemotePrepare), a map
	// element, or an activity's input.
	Input json.RawMessage
	// Details are the heartbeat details recorded last for the task (by an
	// earlier attempt, or a worker that lost its lease), to resume from.
	Details json.RawMessage
	// Deadline is when the attempt must be done: a completion after it is
	// recorded as a timeout failure. The server keeps it with the claim.
	Deadline time.Time
	// LeaseUntil is when the lease ends unless a heartbeat extends it;
	// Lease is how far each heartbeat extends it.
	LeaseUntil time.Time
	Lease      time.Duration
	Queue      string
	// TraceParent is the W3C traceparent of the run's root span ("" when
	// the run is not traced): a worker parents its own spans with it to
	// put them in the run's trace. The attempt's span is made when its
	// outcome commits (docs/observability.md#traces).
	TraceParent string
}

// MaxRemoteLogs bounds the log records of one report of a remote worker
// (a heartbeat, a completion or a failure).
const MaxRemoteLogs = 1000

// RemoteLog is a record a remote worker logged in the attempt it reports
// on: stored with the attempt's step log (the client's LogRemote; the
// "logs" of the server's heartbeat, complete and fail requests).
type RemoteLog struct {
	// Time is when it was logged; zero: when the server received it.
	Time time.Time `json:"time,omitzero"`
	// Level is DEBUG, INFO, WARN or ERROR (any case). Defaults to INFO.
	Level   string `json:"level,omitempty"`
	Message string `json:"message"`
	// Attrs is a JSON object, or absent.
	Attrs json.RawMessage `json:"attrs,omitempty"`
}
