package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Health reports whether the server answers (GET /healthz).
func (c *Client) Health(ctx context.Context) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodGet, path: "/healthz"})
}

// Ready reports whether the server and its store answer (GET /readyz).
func (c *Client) Ready(ctx context.Context) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodGet, path: "/readyz"})
}

// Definitions lists what the server can start.
func (c *Client) Definitions(ctx context.Context) ([]Definition, *Response, error) {
	return list[Definition](ctx, c, &request{method: http.MethodGet, path: "/definitions"})
}

// Definition returns one definition (kind, when not empty, picks one of
// several with the name).
func (c *Client) Definition(ctx context.Context, kind, name string) (*DefinitionDetail, *Response, error) {
	q := url.Values{}
	if kind != "" {
		q.Set("kind", kind)
	}
	return call[DefinitionDetail](ctx, c, &request{method: http.MethodGet, path: "/definitions/" + seg(name), query: q})
}

// GraphJSON returns a definition's graph for drawing (version 0: the
// latest).
func (c *Client) GraphJSON(ctx context.Context, name string, version int) (*Graph, *Response, error) {
	return call[Graph](ctx, c, &request{method: http.MethodGet, path: "/definitions/" + seg(name) + "/graph", query: graphQuery(version, "json")})
}

// GraphText returns a definition's graph as Mermaid ("mermaid") or
// Graphviz DOT ("dot") text.
func (c *Client) GraphText(ctx context.Context, name string, version int, format string) (string, *Response, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/definitions/" + seg(name) + "/graph", query: graphQuery(version, format)})
	if err != nil {
		return "", resp, err
	}
	return string(resp.Body), resp, nil
}

func graphQuery(version int, format string) url.Values {
	q := url.Values{"format": {format}}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	return q
}

// PutDocument stores a flow document (a new version when its content
// changed).
func (c *Client) PutDocument(ctx context.Context, req *DocumentRequest) (*Document, *Response, error) {
	return call[Document](ctx, c, &request{method: http.MethodPost, path: "/documents", body: req})
}

// ValidateDocument checks a flow document; an invalid one is an *Error
// with status 422 and its Errors.
func (c *Client) ValidateDocument(ctx context.Context, format, content string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodPost, path: "/documents/validate", body: &DocumentRequest{Format: format, Content: content}})
}

// ListDocuments lists a page of the stored documents (name "" for all),
// from cursor; next continues the list ("" at its end).
func (c *Client) ListDocuments(ctx context.Context, name, cursor string) (docs []Document, next string, resp *Response, err error) {
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	v, resp, err := call[page[Document]](ctx, c, &request{method: http.MethodGet, path: "/documents", query: q})
	if v == nil {
		return nil, "", resp, err
	}
	return v.items.items, v.next, resp, err
}

// GetDocument returns a stored document with its content (version 0: the
// latest).
func (c *Client) GetDocument(ctx context.Context, name string, version int) (*Document, *Response, error) {
	q := url.Values{}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	return call[Document](ctx, c, &request{method: http.MethodGet, path: "/documents/" + seg(name), query: q})
}

// Schedules lists a page of the schedules, by id after after; next
// continues the list ("" at its end).
func (c *Client) Schedules(ctx context.Context, after string) (ss []Schedule, next string, resp *Response, err error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	v, resp, err := call[page[Schedule]](ctx, c, &request{method: http.MethodGet, path: "/schedules", query: q})
	if v == nil {
		return nil, "", resp, err
	}
	return v.items.items, v.next, resp, err
}

// GetSchedule returns a schedule.
func (c *Client) GetSchedule(ctx context.Context, id string) (*Schedule, *Response, error) {
	return call[Schedule](ctx, c, &request{method: http.MethodGet, path: "/schedules/" + seg(id)})
}

// CreateSchedule creates a schedule; body is its JSON.
func (c *Client) CreateSchedule(ctx context.Context, body json.RawMessage) (*Schedule, *Response, error) {
	return call[Schedule](ctx, c, &request{method: http.MethodPost, path: "/schedules", body: body})
}

// UpdateSchedule replaces a schedule; body is its JSON.
func (c *Client) UpdateSchedule(ctx context.Context, id string, body json.RawMessage) (*Schedule, *Response, error) {
	return call[Schedule](ctx, c, &request{method: http.MethodPut, path: "/schedules/" + seg(id), body: body})
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, id string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: "/schedules/" + seg(id)})
}

// ScheduleAction pauses, resumes or triggers a schedule (action "pause",
// "resume", "trigger").
func (c *Client) ScheduleAction(ctx context.Context, id, action string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodPost, path: "/schedules/" + seg(id) + "/" + action, body: struct{}{}})
}

// Backfill starts the runs of a schedule's ticks in [from, to).
func (c *Client) Backfill(ctx context.Context, id string, from, to time.Time) ([]string, *Response, error) {
	v, resp, err := call[struct {
		RunIDs []string `json:"run_ids"`
	}](ctx, c, &request{method: http.MethodPost, path: "/schedules/" + seg(id) + "/backfill",
		body: map[string]string{"from": from.UTC().Format(time.RFC3339Nano), "to": to.UTC().Format(time.RFC3339Nano)}})
	if v == nil {
		return nil, resp, err
	}
	return v.RunIDs, resp, err
}

// NextFires returns a schedule's next n fire times.
func (c *Client) NextFires(ctx context.Context, id string, n int) ([]time.Time, *Response, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("n", strconv.Itoa(n))
	}
	return list[time.Time](ctx, c, &request{method: http.MethodGet, path: "/schedules/" + seg(id) + "/next", query: q})
}

// ScheduleRuns lists the runs a schedule started, newest first.
func (c *Client) ScheduleRuns(ctx context.Context, id string, limit int) ([]ScheduleRun, *Response, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return list[ScheduleRun](ctx, c, &request{method: http.MethodGet, path: "/schedules/" + seg(id) + "/runs", query: q})
}

// Queues lists the queues with their figures.
func (c *Client) Queues(ctx context.Context) ([]Queue, *Response, error) {
	return list[Queue](ctx, c, &request{method: http.MethodGet, path: "/queues"})
}

// GetQueue returns a queue.
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, *Response, error) {
	return call[Queue](ctx, c, &request{method: http.MethodGet, path: "/queues/" + seg(name)})
}

// SetQueue sets a queue's flow-control options.
func (c *Client) SetQueue(ctx context.Context, name string, opts *QueueOptions) (*Queue, *Response, error) {
	return call[Queue](ctx, c, &request{method: http.MethodPut, path: "/queues/" + seg(name), body: opts})
}

// PauseQueue pauses (pause true) or resumes a queue.
func (c *Client) PauseQueue(ctx context.Context, name string, pause bool) (*Response, error) {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	return c.do(ctx, &request{method: http.MethodPost, path: "/queues/" + seg(name) + "/" + verb, body: struct{}{}})
}

// Workers lists the live workers.
func (c *Client) Workers(ctx context.Context) ([]Worker, *Response, error) {
	return list[Worker](ctx, c, &request{method: http.MethodGet, path: "/workers"})
}

// Tokens lists the API tokens.
func (c *Client) Tokens(ctx context.Context) ([]Token, *Response, error) {
	return list[Token](ctx, c, &request{method: http.MethodGet, path: "/tokens"})
}

// CreateTokenParams are the body of POST /tokens.
type CreateTokenParams struct {
	Principal string `json:"principal,omitempty"`
	Name      string `json:"name,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Groups, when not nil, become the principal's groups.
	Groups   *[]string `json:"groups,omitempty"`
	Role     string    `json:"role"`
	Queues   []string  `json:"queues,omitempty"`
	Handlers []string  `json:"handlers,omitempty"`
	ActAs    bool      `json:"act_as,omitempty"`
	// Payloads is "allow" or "deny" (reading payloads on a server that
	// encrypts them); "": the role's.
	Payloads string `json:"payloads,omitempty"`
}

// CreateToken creates a token of a role for a principal (created when
// missing); the answer holds its secret, shown this once.
func (c *Client) CreateToken(ctx context.Context, p *CreateTokenParams) (*Token, *Response, error) {
	return call[Token](ctx, c, &request{method: http.MethodPost, path: "/tokens", body: p})
}

// Principals lists the principals.
func (c *Client) Principals(ctx context.Context) ([]Principal, *Response, error) {
	return list[Principal](ctx, c, &request{method: http.MethodGet, path: "/principals"})
}

// SetGroups replaces a principal's groups.
func (c *Client) SetGroups(ctx context.Context, name string, groups []string) (*Principal, *Response, error) {
	if groups == nil {
		groups = []string{}
	}
	return call[Principal](ctx, c, &request{method: http.MethodPut, path: "/principals/" + seg(name) + "/groups", body: map[string][]string{"groups": groups}})
}

// DisablePrincipal disables a principal: its tokens are revoked, its
// sessions ended.
func (c *Client) DisablePrincipal(ctx context.Context, name string) (*Principal, *Response, error) {
	return call[Principal](ctx, c, &request{method: http.MethodPost, path: "/principals/" + seg(name) + "/disable"})
}

// RevokeToken revokes a token.
func (c *Client) RevokeToken(ctx context.Context, id string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: "/tokens/" + seg(id)})
}

// Audit returns a page of the audit log, newest first.
func (c *Client) Audit(ctx context.Context, limit int, cursor string) (*AuditPage, *Response, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	v, resp, err := call[page[AuditEntry]](ctx, c, &request{method: http.MethodGet, path: "/audit", query: q})
	if v == nil {
		return nil, resp, err
	}
	return &AuditPage{Entries: v.items.items, Next: v.next}, resp, err
}

// page decodes a page of a list: an array, or an object with the array
// under any key and the cursor of the next page under "next".
type page[T any] struct {
	items listOf[T]
	next  string
}

func (p *page[T]) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &p.items); err != nil {
		return err
	}
	var obj struct {
		Next string `json:"next"`
	}
	_ = json.Unmarshal(b, &obj) // an array has no cursor
	p.next = obj.Next
	return nil
}

// list calls r and decodes a list of T.
func list[T any](ctx context.Context, c *Client, r *request) ([]T, *Response, error) {
	v, resp, err := call[listOf[T]](ctx, c, r)
	if v == nil {
		return nil, resp, err
	}
	return v.items, resp, err
}

// OpenAPI returns the API's OpenAPI 3.1 document.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: "/openapi.json"})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// StatsQuery chooses the window and the runs of Stats; zero fields take
// the server's defaults.
type StatsQuery struct {
	Since, Until       time.Time
	Bucket, StaleAfter time.Duration
	Workflow           string
}

// Stats returns the overview's figures (GET /stats).
func (c *Client) Stats(ctx context.Context, sq *StatsQuery) (*Stats, *Response, error) {
	q := url.Values{}
	if sq != nil {
		if !sq.Since.IsZero() {
			q.Set("since", sq.Since.UTC().Format(time.RFC3339Nano))
		}
		if !sq.Until.IsZero() {
			q.Set("until", sq.Until.UTC().Format(time.RFC3339Nano))
		}
		if sq.Bucket > 0 {
			q.Set("bucket", sq.Bucket.String())
		}
		if sq.StaleAfter > 0 {
			q.Set("stale_after", sq.StaleAfter.String())
		}
		if sq.Workflow != "" {
			q.Set("workflow", sq.Workflow)
		}
	}
	return call[Stats](ctx, c, &request{method: http.MethodGet, path: "/stats", query: q})
}
