package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Event is an event sent to the engine.
type Event struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Data      json.RawMessage `json:"data,omitempty"`
	At        time.Time       `json:"at"`
	Seq       int64           `json:"seq"`
	Duplicate bool            `json:"duplicate,omitempty"`
	Firings   []Firing        `json:"firings,omitempty"`
	// Waits are the runs' waits the event matched.
	Waits []EventWait `json:"waits,omitempty"`
}

// EventWait is a run's wait for an event.
type EventWait struct {
	ID             string    `json:"id"`
	RunID          string    `json:"run_id"`
	Step           string    `json:"step,omitempty"`
	Kind           string    `json:"kind"`
	Event          string    `json:"event"`
	Match          string    `json:"match,omitempty"`
	From           time.Time `json:"from"`
	Until          time.Time `json:"until,omitzero"`
	CreatedAt      time.Time `json:"created_at"`
	MatchedEventID string    `json:"matched_event_id,omitempty"`
	MatchedAt      time.Time `json:"matched_at,omitzero"`
	DeliveredAt    time.Time `json:"delivered_at,omitzero"`
}

// Firing is what a trigger did with an event.
type Firing struct {
	Trigger string `json:"trigger"`
	Status  string `json:"status"`
	RunID   string `json:"run_id,omitempty"`
	Error   string `json:"error,omitempty"`
}

// EventList is a page of events, newest first; Next is the BeforeSeq of
// the next page (0 on the last).
type EventList struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
}

// ListEventsParams filter Events.
type ListEventsParams struct {
	Name          string
	After, Before time.Time
	BeforeSeq     int64
	Field, Value  string
	Limit         int
}

// SendEvent stores an event (POST /events); id may be empty.
func (c *Client) SendEvent(ctx context.Context, name string, data json.RawMessage, id string) (*Event, *Response, error) {
	body := map[string]any{"name": name}
	if len(data) > 0 {
		body["data"] = data
	}
	if id != "" {
		body["id"] = id
	}
	return call[Event](ctx, c, &request{method: http.MethodPost, path: "/events", body: body})
}

// GetEvent returns an event.
func (c *Client) GetEvent(ctx context.Context, id string) (*Event, *Response, error) {
	return call[Event](ctx, c, &request{method: http.MethodGet, path: "/events/" + seg(id)})
}

// Events lists events, one page.
func (c *Client) Events(ctx context.Context, p *ListEventsParams) (*EventList, *Response, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("name", p.Name)
	if !p.After.IsZero() {
		q.Set("after", p.After.Format(time.RFC3339Nano))
	}
	if !p.Before.IsZero() {
		q.Set("before", p.Before.Format(time.RFC3339Nano))
	}
	if p.BeforeSeq > 0 {
		q.Set("before_seq", strconv.FormatInt(p.BeforeSeq, 10))
	}
	set("field", p.Field)
	set("value", p.Value)
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return call[EventList](ctx, c, &request{method: http.MethodGet, path: "/events", query: q})
}

// Trigger is a stored trigger: declared in code, or managed through the
// API (PutTrigger).
type Trigger struct {
	Name           string           `json:"name"`
	Event          string           `json:"event"`
	TargetKind     string           `json:"target_kind"`
	TargetName     string           `json:"target_name"`
	Filter         string           `json:"filter,omitempty"`
	Input          string           `json:"input,omitempty"`
	BusinessKey    string           `json:"business_key,omitempty"`
	ConcurrencyKey string           `json:"concurrency_key,omitempty"`
	Key            string           `json:"key,omitempty"`
	Debounce       string           `json:"debounce,omitempty"`
	Throttle       *TriggerThrottle `json:"throttle,omitempty"`
	Batch          *TriggerBatch    `json:"batch,omitempty"`
	Declared       bool             `json:"declared"`
	CreatedAt      time.Time        `json:"created_at"`
	UpdatedAt      time.Time        `json:"updated_at"`
}

// TriggerList is every stored trigger, by name.
type TriggerList struct {
	Triggers []Trigger `json:"triggers"`
}

// TriggerInput is a managed trigger to put.
type TriggerInput struct {
	Event          string           `json:"event"`
	TargetKind     string           `json:"target_kind"`
	TargetName     string           `json:"target_name"`
	Filter         string           `json:"filter,omitempty"`
	Input          string           `json:"input,omitempty"`
	BusinessKey    string           `json:"business_key,omitempty"`
	ConcurrencyKey string           `json:"concurrency_key,omitempty"`
	Key            string           `json:"key,omitempty"`
	Debounce       string           `json:"debounce,omitempty"`
	Throttle       *TriggerThrottle `json:"throttle,omitempty"`
	Batch          *TriggerBatch    `json:"batch,omitempty"`
}

// TriggerThrottle starts at most Limit runs per Period ("1m") per key.
type TriggerThrottle struct {
	Limit  int    `json:"limit"`
	Period string `json:"period"`
}

// TriggerBatch collects up to Size events, or those within Window ("30s")
// of the first, into one run.
type TriggerBatch struct {
	Size   int    `json:"size"`
	Window string `json:"window"`
}

// Triggers lists the stored triggers (GET /triggers).
func (c *Client) Triggers(ctx context.Context) (*TriggerList, *Response, error) {
	return call[TriggerList](ctx, c, &request{method: http.MethodGet, path: "/triggers"})
}

// GetTrigger returns a trigger.
func (c *Client) GetTrigger(ctx context.Context, name string) (*Trigger, *Response, error) {
	return call[Trigger](ctx, c, &request{method: http.MethodGet, path: "/triggers/" + seg(name)})
}

// PutTrigger creates or replaces a managed trigger (PUT /triggers/{name}).
func (c *Client) PutTrigger(ctx context.Context, name string, in *TriggerInput) (*Trigger, *Response, error) {
	return call[Trigger](ctx, c, &request{method: http.MethodPut, path: "/triggers/" + seg(name), body: in})
}

// DeleteTrigger deletes a trigger and its pending firings.
func (c *Client) DeleteTrigger(ctx context.Context, name string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: "/triggers/" + seg(name)})
}

// TriggerGroup is a group of events of one key of a trigger that
// debounces, throttles or batches them; it starts one run when due.
type TriggerGroup struct {
	ID      int64  `json:"id"`
	Trigger string `json:"trigger"`
	Key     string `json:"key"`
	// Status is open, started, failed or skipped.
	Status  string     `json:"status"`
	Closed  bool       `json:"closed"`
	DueAt   time.Time  `json:"due_at"`
	RunID   string     `json:"run_id,omitempty"`
	Error   string     `json:"error,omitempty"`
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// Events are the ids of the group's events, in the order stored.
	Events []string `json:"events"`
}

// TriggerGroupPage is a page of a trigger's groups, oldest first; Next
// is the After of the next page, 0 on the last.
type TriggerGroupPage struct {
	Groups []TriggerGroup `json:"groups"`
	Next   int64          `json:"next"`
}

// ListTriggerGroupsParams page and filter TriggerGroups.
type ListTriggerGroupsParams struct {
	Status string
	After  int64
	Limit  int
}

// TriggerGroups lists a page of a trigger's groups (GET
// /triggers/{name}/groups).
func (c *Client) TriggerGroups(ctx context.Context, name string, p *ListTriggerGroupsParams) (*TriggerGroupPage, *Response, error) {
	q := url.Values{}
	if p.Status != "" {
		q.Set("status", p.Status)
	}
	if p.After > 0 {
		q.Set("after", strconv.FormatInt(p.After, 10))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return call[TriggerGroupPage](ctx, c, &request{method: http.MethodGet, path: "/triggers/" + seg(name) + "/groups", query: q})
}
