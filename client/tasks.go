package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Claim is the body of POST /tasks/claim: what a worker outside the
// server runs and how many tasks it takes.
type Claim struct {
	WorkerID   string   `json:"worker_id"`
	Actions    []string `json:"actions,omitempty"`
	Activities []string `json:"activities,omitempty"`
	// Queues defaults to ["default"] on the server.
	Queues []string `json:"queues,omitempty"`
	// MaxTasks defaults to 1 (at most 100).
	MaxTasks int `json:"max_tasks,omitempty"`
	// Wait is how long the server holds the claim for tasks (default 30s,
	// at most 60s); Lease how long a task stays leased without a
	// heartbeat.
	Wait  string `json:"wait,omitempty"`
	Lease string `json:"lease,omitempty"`
}

// Task is a task a worker claimed.
type Task struct {
	// Token identifies the task and its lease: pass it to Heartbeat,
	// CompleteTask and FailTask.
	Token    string `json:"token"`
	RunID    string `json:"run_id"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Workflow string `json:"workflow"`
	Version  int    `json:"version"`
	Step     string `json:"step"`
	Index    int    `json:"index"`
	Attempt  int    `json:"attempt"`
	Queue    string `json:"queue,omitempty"`
	// Input is the action's resolved arguments, the step's or the
	// activity's input.
	Input            json.RawMessage `json:"input"`
	Deadline         time.Time       `json:"deadline"`
	HeartbeatTimeout string          `json:"heartbeat_timeout"`
	LeaseUntil       time.Time       `json:"lease_until"`
	Details          json.RawMessage `json:"details,omitempty"`
	// TraceParent is the run's root span (W3C traceparent), when traced.
	TraceParent string `json:"traceparent,omitempty"`
}

// ClaimTasks claims tasks for a worker, long-polling up to claim.Wait;
// none at the deadline is an empty list.
func (c *Client) ClaimTasks(ctx context.Context, claim *Claim) ([]Task, *Response, error) {
	v, resp, err := call[struct {
		Tasks []Task `json:"tasks"`
	}](ctx, c, &request{method: http.MethodPost, path: "/tasks/claim", body: claim})
	if v == nil {
		return nil, resp, err
	}
	return v.Tasks, resp, err
}

// Heartbeat extends a task's lease and records details; cancelled says
// the run was cancelled (stop the work). A lease lost otherwise is an
// *Error with status 409.
func (c *Client) Heartbeat(ctx context.Context, token string, details json.RawMessage) (cancelled bool, resp *Response, err error) {
	v, resp, err := call[struct {
		Cancelled bool `json:"cancelled"`
	}](ctx, c, &request{method: http.MethodPost, path: "/tasks/heartbeat", body: struct {
		Token   string          `json:"token"`
		Details json.RawMessage `json:"details,omitempty"`
	}{token, details}})
	if v == nil {
		return false, resp, err
	}
	return v.Cancelled, resp, err
}

// CompleteTask reports a task's output.
func (c *Client) CompleteTask(ctx context.Context, token string, output json.RawMessage) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodPost, path: "/tasks/complete", body: struct {
		Token  string          `json:"token"`
		Output json.RawMessage `json:"output,omitempty"`
	}{token, output}})
}

// FailTask reports a task's failure; a retryable one is tried again as
// the step's or activity's retry policy says.
func (c *Client) FailTask(ctx context.Context, token, msg string, retryable bool, details json.RawMessage) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodPost, path: "/tasks/fail", body: struct {
		Token     string          `json:"token"`
		Error     string          `json:"error"`
		Retryable bool            `json:"retryable"`
		Details   json.RawMessage `json:"details,omitempty"`
	}{token, msg, retryable, details}})
}
