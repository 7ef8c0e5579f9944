package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// SignalStart is the signal of a signal-with-start (StartRequest.Signal).
type SignalStart struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// ID identifies the signal: a repeated request delivers it once
	// (default: derived from the Idempotency-Key).
	ID string `json:"id,omitempty"`
}

// UpdateStart is the update of an update-with-start (StartRequest.Update).
type UpdateStart struct {
	Name    string          `json:"name"`
	Args    json.RawMessage `json:"args,omitempty"`
	ID      string          `json:"id,omitempty"`
	WaitFor string          `json:"wait_for,omitempty"`
	Timeout string          `json:"timeout,omitempty"`
}

// StartedRun is the answer to a start with a signal or an update: the run
// that got the message, and an update's outcome.
type StartedRun struct {
	Run
	Update *UpdateResult `json:"update,omitempty"`
}

// StartWithMessage starts a workflow with a signal or an update (POST /runs
// with req.Signal or req.Update): the message goes to the open run of
// req.WorkflowID, started first if there is none.
func (c *Client) StartWithMessage(ctx context.Context, req *StartRequest, idempotencyKey string) (*StartedRun, *Response, error) {
	r := &request{method: http.MethodPost, path: "/runs", body: req}
	if idempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	return call[StartedRun](ctx, c, r)
}
