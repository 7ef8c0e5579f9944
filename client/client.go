// Package client is a client of the HTTP API that heph server serves
// under /api/v1: one method per route, answers decoded into the types of
// this package, and problem+json error answers (RFC 9457) into *Error.
//
// Every method also returns the *Response it decoded, so that a caller
// (the heph command line with -o json) can print the server's JSON as the
// server wrote it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// ErrUnreachable is wrapped by the errors of calls that got no answer from
// the server: it refused the connection, the name did not resolve, the
// connection broke before the response.
var ErrUnreachable = errors.New("server unreachable")

// MaxResponseBytes bounds the body of a response the client reads.
const MaxResponseBytes = 64 << 20

// Config configures a Client.
type Config struct {
	// Addr is the server's base URL, such as http://127.0.0.1:7070 or
	// https://heph.example.com/prefix. A bare host:port means http.
	// Required.
	Addr string
	// Token is sent as "Authorization: Bearer <Token>". Defaults to none.
	Token string
	// HTTPClient sends the requests. Defaults to a client without an
	// overall timeout: the context of each call bounds it.
	HTTPClient *http.Client
	// UserAgent is sent with every request. Defaults to "heph-go-client".
	UserAgent string
}

// Client calls the API. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	agent string
}

// New returns a client of the server at cfg.Addr.
func New(cfg *Config) (*Client, error) {
	addr := strings.TrimSpace(cfg.Addr)
	if addr == "" {
		return nil, errors.New("Config.Addr is required")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("Config.Addr %q: %w", cfg.Addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("Config.Addr %q: the scheme must be http or https", cfg.Addr)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("Config.Addr %q: no host", cfg.Addr)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, token: cfg.Token, http: cfg.HTTPClient, agent: cfg.UserAgent}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.agent == "" {
		c.agent = "heph-go-client"
	}
	return c, nil
}

// Addr is the server's base URL.
func (c *Client) Addr() string { return c.base.String() }

// Response is an answer of the server.
type Response struct {
	Status int
	Header http.Header
	// Body is the response body as the server sent it.
	Body json.RawMessage
}

// Error is an error answer of the server: its problem details (RFC 9457).
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Type is the problem type URI; Kind is its last path segment
	// ("not-found", "conflict", "lease-lost", ...).
	Type, Kind string
	Title      string
	Detail     string
	Instance   string
	// Fix says what to do about it, when the server knows.
	Fix string
	// Errors are the problems of an invalid flow document (422).
	Errors []DocumentError
	// Body is the response body as the server sent it.
	Body json.RawMessage
}

// DocumentError is one problem of an invalid flow document.
type DocumentError struct {
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Path    string `json:"path"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

func (e *Error) Error() string {
	title := e.Title
	if title == "" {
		title = http.StatusText(e.Status)
	}
	if e.Detail == "" {
		return title
	}
	return title + ": " + e.Detail
}

// IsStatus reports whether err is an *Error with one of the statuses.
func IsStatus(err error, statuses ...int) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	for _, s := range statuses {
		if e.Status == s {
			return true
		}
	}
	return false
}

// request is one call.
type request struct {
	method, path string
	query        url.Values
	body         any // encoded as JSON; nil sends no body
	header       http.Header
}

// Do sends a request to path (below /api/v1, or absolute from the server
// root when it starts with "/healthz", "/readyz" or "/hooks/") and returns the
// answer. An answer with a status of 400 or more is returned as *Error.
// body, when not nil, is sent as JSON ([]byte and json.RawMessage as
// they are).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any, header http.Header) (*Response, error) {
	return c.do(ctx, &request{method: method, path: path, query: query, body: body, header: header})
}

func (c *Client) do(ctx context.Context, r *request) (*Response, error) {
	p := r.path
	if !strings.HasPrefix(p, "/healthz") && !strings.HasPrefix(p, "/readyz") && !strings.HasPrefix(p, "/hooks/") {
		p = "/api/v1" + p
	}
	target := c.base.String() + p // p's segments are escaped by the methods
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var rd io.Reader
	if r.body != nil {
		var b []byte
		switch v := r.body.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, fmt.Errorf("encode request: %w", err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.agent)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
		}
		return nil, fmt.Errorf("%s %s: %w: %w", r.method, req.URL.Redacted(), ErrUnreachable, unwrapURL(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err == nil && len(b) > MaxResponseBytes {
		err = fmt.Errorf("the response is larger than %d bytes", MaxResponseBytes)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
		}
		return nil, fmt.Errorf("%s %s: read response: %w: %w", r.method, r.path, ErrUnreachable, err)
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if resp.StatusCode >= 400 {
		return out, problem(resp, b)
	}
	return out, nil
}

// unwrapURL drops the *url.Error around a transport error, whose text
// repeats the method and URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// problem decodes an error answer.
func problem(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, Body: body}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var p struct {
			Type     string          `json:"type"`
			Title    string          `json:"title"`
			Detail   string          `json:"detail"`
			Instance string          `json:"instance"`
			Fix      string          `json:"fix"`
			Errors   []DocumentError `json:"errors"`
		}
		if json.Unmarshal(body, &p) == nil {
			e.Type, e.Title, e.Detail, e.Instance, e.Fix, e.Errors = p.Type, p.Title, p.Detail, p.Instance, p.Fix, p.Errors
			if i := strings.LastIndexByte(p.Type, '/'); i >= 0 {
				e.Kind = p.Type[i+1:]
			}
			return e
		}
	}
	e.Title = http.StatusText(resp.StatusCode)
	e.Detail = strings.TrimSpace(string(body))
	if len(e.Detail) > 200 {
		e.Detail = e.Detail[:200] + "…"
	}
	return e
}

// call sends r and decodes a successful answer's body into a new T
// (unless the body is empty).
func call[T any](ctx context.Context, c *Client, r *request) (*T, *Response, error) {
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, resp, err
	}
	v := new(T)
	if len(bytes.TrimSpace(resp.Body)) > 0 {
		if err := json.Unmarshal(resp.Body, v); err != nil {
			return nil, resp, fmt.Errorf("%s %s: decode response: %w", r.method, r.path, err)
		}
	}
	return v, resp, nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
