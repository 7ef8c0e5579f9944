package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// StartRun starts a run (POST /runs). A non-empty idempotencyKey is sent
// as the Idempotency-Key header: a repeat returns the same run. created
// is false when the server returned an existing run (200, not 201).
func (c *Client) StartRun(ctx context.Context, req *StartRequest, idempotencyKey string) (run *Run, created bool, resp *Response, err error) {
	r := &request{method: http.MethodPost, path: "/runs", body: req}
	if idempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	run, resp, err = call[Run](ctx, c, r)
	return run, err == nil && resp.Status == http.StatusCreated, resp, err
}

// ListRuns lists runs (GET /runs) of the filter, limit per page (0: the
// server's default), from cursor ("" for the first page).
func (c *Client) ListRuns(ctx context.Context, f *RunFilter, limit int, cursor string) (*RunList, *Response, error) {
	q := FilterQuery(f)
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return call[RunList](ctx, c, &request{method: http.MethodGet, path: "/runs", query: q})
}

// FilterQuery is f as the query of GET /runs.
func FilterQuery(f *RunFilter) url.Values {
	q := url.Values{}
	if f == nil {
		return q
	}
	if len(f.Statuses) > 0 {
		s := ""
		for i, st := range f.Statuses {
			if i > 0 {
				s += ","
			}
			s += st
		}
		q.Set("status", s)
	}
	if f.Workflow != "" {
		q.Set("workflow", f.Workflow)
	}
	if f.Queue != "" {
		q.Set("queue", f.Queue)
	}
	for _, t := range f.Tags {
		q.Add("tag", t)
	}
	for k, v := range f.Metadata {
		q.Set("meta."+k, v)
	}
	if f.CreatedAfter != nil {
		q.Set("created_after", f.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if f.CreatedBefore != nil {
		q.Set("created_before", f.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if f.Text != "" {
		q.Set("q", f.Text)
	}
	if f.Version != 0 {
		q.Set("version", strconv.Itoa(f.Version))
	}
	if f.Parent != "" {
		q.Set("parent", f.Parent)
	}
	if f.Build != "" {
		q.Set("build", f.Build)
	}
	for _, id := range f.IDs {
		q.Add("id", id)
	}
	if f.Where != "" {
		q.Set("where", f.Where)
	}
	return q
}

// GetRun returns a run (GET /runs/{id}).
func (c *Client) GetRun(ctx context.Context, id string) (*Run, *Response, error) {
	return call[Run](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id)})
}

// History returns the run's history events after seq after; with wait > 0
// the server holds the request until there is one or wait passes.
func (c *Client) History(ctx context.Context, id string, after int64, wait time.Duration) (*History, *Response, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	return call[History](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/history", query: q})
}

// ExportHistory returns a workflow run's history as
// hephaestus.Client.ExportHistory writes it (GET
// /runs/{id}/history/export): the JSON that heph replay reads.
func (c *Client) ExportHistory(ctx context.Context, id string) (json.RawMessage, *Response, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/history/export"})
	if err != nil {
		return nil, resp, err
	}
	return json.RawMessage(resp.Body), resp, nil
}

// Result returns the run once it has ended (done true), waiting up to wait
// on the server; done is false (and run the run as it is) when it has
// not ended by then.
func (c *Client) Result(ctx context.Context, id string, wait time.Duration) (run *Run, done bool, resp *Response, err error) {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	run, resp, err = call[Run](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/result", query: q})
	return run, err == nil && resp.Status == http.StatusOK, resp, err
}

// State returns the run's published state (GET /runs/{id}/state:
// {"state": ...}).
func (c *Client) State(ctx context.Context, id string) (json.RawMessage, *Response, error) {
	v, resp, err := call[struct {
		State json.RawMessage `json:"state"`
	}](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/state"})
	if err != nil {
		return nil, resp, err
	}
	return v.State, resp, nil
}

// Signal sends a signal to a workflow run.
func (c *Client) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/signals/" + seg(name),
		body: struct {
			Payload json.RawMessage `json:"payload,omitempty"`
		}{payload}})
}

// Update sends an update to a workflow run and waits for waitFor
// ("accepted" or "completed"; "" is the server's default, completed).
func (c *Client) Update(ctx context.Context, id, name string, args json.RawMessage, waitFor string, timeout time.Duration) (*UpdateResult, *Response, error) {
	body := struct {
		Args    json.RawMessage `json:"args,omitempty"`
		WaitFor string          `json:"wait_for,omitempty"`
		Timeout string          `json:"timeout,omitempty"`
	}{Args: args, WaitFor: waitFor}
	if timeout > 0 {
		body.Timeout = timeout.String()
	}
	return call[UpdateResult](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/updates/" + seg(name), body: body})
}

// Query runs a named query of a workflow run.
func (c *Client) Query(ctx context.Context, id, name string, args json.RawMessage) (*QueryResult, *Response, error) {
	return call[QueryResult](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/queries/" + seg(name),
		body: struct {
			Args json.RawMessage `json:"args,omitempty"`
		}{args}})
}

// Resume resumes a waiting step of a run with an event.
func (c *Client) Resume(ctx context.Context, id, step, event string, payload json.RawMessage) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/resume",
		body: struct {
			Step    string          `json:"step,omitempty"`
			Event   string          `json:"event"`
			Payload json.RawMessage `json:"payload,omitempty"`
		}{step, event, payload}})
}

// Decide approves (approve true) or rejects an approval gate.
func (c *Client) Decide(ctx context.Context, id, step string, approve bool, comment string) (*Decision, *Response, error) {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	return call[Decision](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/steps/" + seg(step) + "/" + verb,
		body: struct {
			Comment string `json:"comment,omitempty"`
		}{comment}})
}

// Cancel cancels a run.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*Run, *Response, error) {
	return call[Run](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/cancel",
		body: struct {
			Reason string `json:"reason,omitempty"`
		}{reason}})
}

// Pause pauses a run: none of its tasks is claimed until Unpause;
// cancelRunning stops its running tasks too (they run again after
// unpause). Pausing a paused run records nothing.
func (c *Client) Pause(ctx context.Context, id string, cancelRunning bool) (*Run, *Response, error) {
	return call[Run](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/pause",
		body: struct {
			CancelRunning bool `json:"cancel_running,omitempty"`
		}{cancelRunning}})
}

// Unpause unpauses a paused run.
func (c *Client) Unpause(ctx context.Context, id string) (*Run, *Response, error) {
	return call[Run](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/unpause", body: struct{}{}})
}

// Reset runs a flow, document or job run again from step (empty for a
// job): the step and every step after it run again, the other steps keep
// their outputs. key, when set, is sent as the Idempotency-Key: a repeated
// call with it resets once.
func (c *Client) Reset(ctx context.Context, id, step, key string) (*Run, *Response, error) {
	rq := &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/reset",
		body: struct {
			Step string `json:"step,omitempty"`
		}{step}}
	if key != "" {
		rq.header = http.Header{"Idempotency-Key": {key}}
	}
	return call[Run](ctx, c, rq)
}

// Retry runs a failed run's failed steps again.
func (c *Client) Retry(ctx context.Context, id string) (*Run, *Response, error) {
	return call[Run](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/retry", body: struct{}{}})
}

// PendingApprovals lists the approval gates waiting for a decision
// (assignee "" for all).
func (c *Client) PendingApprovals(ctx context.Context, assignee string) ([]PendingApproval, *Response, error) {
	q := url.Values{}
	if assignee != "" {
		q.Set("assignee", assignee)
	}
	return list[PendingApproval](ctx, c, &request{method: http.MethodGet, path: "/approvals", query: q})
}

// StartOperation starts a bulk cancel, retry or delete.
func (c *Client) StartOperation(ctx context.Context, req *OperationRequest) (*Operation, *Response, error) {
	return call[Operation](ctx, c, &request{method: http.MethodPost, path: "/operations", body: req})
}

// GetOperation returns a bulk operation.
func (c *Client) GetOperation(ctx context.Context, id string) (*Operation, *Response, error) {
	return call[Operation](ctx, c, &request{method: http.MethodGet, path: "/operations/" + seg(id)})
}

// ListOperations lists the bulk operations, newest first.
func (c *Client) ListOperations(ctx context.Context) ([]Operation, *Response, error) {
	return list[Operation](ctx, c, &request{method: http.MethodGet, path: "/operations"})
}

// listOf decodes a JSON array, or an object holding one array under any
// key (such as {"operations": [...]}).
type listOf[T any] struct{ items []T }

func (l *listOf[T]) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &l.items); err == nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	for _, v := range obj {
		var items []T
		if len(v) > 0 && v[0] == '[' && json.Unmarshal(v, &items) == nil {
			l.items = items
			return nil
		}
	}
	return nil
}

// ResetWorkflowOptions is the body of POST /runs/{id}/reset-workflow.
type ResetWorkflowOptions struct {
	// Point: "first", "last_good" ("" for the server's default,
	// last_good) or a decision number.
	Point          string `json:"point,omitempty"`
	ReapplySignals bool   `json:"reapply_signals,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// ResetWorkflow resets a code-first workflow run to a point of its
// history and returns the new run that carries it on.
func (c *Client) ResetWorkflow(ctx context.Context, id string, opts *ResetWorkflowOptions) (*Run, *Response, error) {
	return call[Run](ctx, c, &request{method: http.MethodPost, path: "/runs/" + seg(id) + "/reset-workflow", body: opts})
}
