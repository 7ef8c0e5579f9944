package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Caller is who the server takes the caller to be (GET /whoami): what
// its authentication says, never what a body claims.
type Caller struct {
	Actor    string   `json:"actor"`
	Groups   []string `json:"groups"`
	Role     string   `json:"role"`
	Via      string   `json:"via"`
	Token    string   `json:"token,omitempty"`
	Insecure bool     `json:"insecure"`
}

// Whoami returns the caller as the server authenticated it.
func (c *Client) Whoami(ctx context.Context) (*Caller, *Response, error) {
	return call[Caller](ctx, c, &request{method: http.MethodGet, path: "/whoami"})
}

// Session is a dashboard session just created; Secret is the value of
// its heph_session cookie, shown this once.
type Session struct {
	Secret    string    `json:"session"`
	Principal string    `json:"principal"`
	Groups    []string  `json:"groups"`
	Role      string    `json:"role"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CreateSession trades the client's token for a session (POST
// /sessions) with the token's principal, groups and role.
func (c *Client) CreateSession(ctx context.Context) (*Session, *Response, error) {
	return call[Session](ctx, c, &request{method: http.MethodPost, path: "/sessions", body: struct{}{}})
}

// DeleteSession ends the session the request carries (DELETE
// /sessions/current): header must hold its heph_session cookie.
func (c *Client) DeleteSession(ctx context.Context, header http.Header) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: "/sessions/current", header: header})
}

// RunSteps returns a run's steps (GET /runs/{id}/steps): a flow's in
// declaration order, then map elements, activities, timers and children.
func (c *Client) RunSteps(ctx context.Context, id string) (*StepList, *Response, error) {
	return call[StepList](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/steps"})
}

// EventWaitList is the answer of GET /runs/{id}/event-waits.
type EventWaitList struct {
	Waits []EventWait `json:"waits"`
}

// RunEventWaits returns a run's waits for events, oldest first.
func (c *Client) RunEventWaits(ctx context.Context, id string) (*EventWaitList, *Response, error) {
	return call[EventWaitList](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/event-waits"})
}

// GetVersionRule returns the rule that chooses the version of a
// definition's new runs; a definition without one is a 404 *Error.
func (c *Client) GetVersionRule(ctx context.Context, name string) (*VersionRule, *Response, error) {
	return call[VersionRule](ctx, c, &request{method: http.MethodGet, path: versionsPath(name) + "/version-rule"})
}

// ReceiveHook posts body to the webhook endpoint POST /hooks/{name},
// with header carrying its signature (X-Hub-Signature-256,
// Stripe-Signature, X-Heph-Signature or Authorization, per the
// endpoint's scheme), and returns the stored event without its data. It is for tests and for relaying: the server
// verifies the signature over the exact bytes sent.
func (c *Client) ReceiveHook(ctx context.Context, name string, body []byte, header http.Header) (*Event, *Response, error) {
	return call[Event](ctx, c, &request{method: http.MethodPost, path: "/hooks/" + seg(name), body: json.RawMessage(body), header: header})
}
