package flowdoc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
)

// HTTPConfig configures the built-in HTTP action (RegisterHTTP).
type HTTPConfig struct {
	// AllowedHosts lists the hosts requests may go to, as "host" (any
	// port) or "host:port"; a request (or redirect) to any other host
	// fails without retries. Required: an empty list allows nothing.
	AllowedHosts []string
	// Timeout bounds each request. Defaults to 30 seconds (the step's own
	// timeout bounds it too).
	Timeout time.Duration
	// MaxResponseSize bounds the response body read, in bytes. Defaults to
	// 1 MiB.
	MaxResponseSize int64
	// Transport, when set, makes the requests. Defaults to
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// HTTPArgs are the arguments of the HTTP action.
type HTTPArgs struct {
	// Method defaults to GET.
	Method string `json:"method"`
	// URL is required: http or https, on an allowed host.
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// Body is sent as JSON (Content-Type application/json) unless it is a
	// string, sent as it is.
	Body any `json:"body"`
	// OKStatus lists the statuses that complete the step with the
	// response as output, for a branch to route (e.g. [200, 404]).
	// Defaults to every 2xx status. Any other status fails the step: 408,
	// 429 and 5xx are retried per the step's policy, the rest fail at
	// once.
	OKStatus []int `json:"ok_status"`
}

// HTTPResult is the HTTP action's output.
type HTTPResult struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the response decoded as JSON, or the text when it is not
	// JSON.
	Body any `json:"body"`
}

// ErrHostNotAllowed is wrapped by the HTTP action for a URL whose host is
// not in HTTPConfig.AllowedHosts.
var ErrHostNotAllowed = errors.New("host not allowed")

// HTTPStatusError is a response whose status is not among the step's
// OKStatus.
type HTTPStatusError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *HTTPStatusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.Method, e.URL, e.Status, e.Body)
}

// RegisterHTTP registers the built-in HTTP action as name (usually
// "http"). A document naming a literal URL on a host outside the
// allow-list fails validation; a templated URL is checked when the step
// runs. Its url and headers may read secrets ({{secret.NAME}}), which
// the response and errors of the action have replaced by [secret:NAME].
func RegisterHTTP(r *Registry, name string, cfg *HTTPConfig) error {
	if cfg == nil || len(cfg.AllowedHosts) == 0 {
		return fmt.Errorf("flowdoc: register HTTP action %q: HTTPConfig.AllowedHosts is empty; list the hosts its requests may reach", name)
	}
	c := *cfg
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxResponseSize <= 0 {
		c.MaxResponseSize = 1 << 20
	}
	if c.Transport == nil {
		c.Transport = http.DefaultTransport
	}
	client := &http.Client{
		Transport: c.Transport,
		Timeout:   c.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return flow.NonRetryable(errors.New("stopped after 5 redirects"))
			}
			return c.allowed(req.URL)
		},
	}
	params := paramsOf(httpArgsType)
	params["url"] = func(v json.RawMessage) error {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		u, err := url.Parse(s)
		if err != nil {
			return err
		}
		return c.allowed(u)
	}
	params["method"] = func(v json.RawMessage) error {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}, strings.ToUpper(s)) {
			return fmt.Errorf("%q is not one of GET, HEAD, POST, PUT, PATCH, DELETE", s)
		}
		return nil
	}
	return r.Register(&Action{Name: name, Params: params, Invoke: func(ctx context.Context, call ActionCall, raw json.RawMessage) (json.RawMessage, error) {
		var a HTTPArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, &ArgsError{Action: name, Step: call.Step, Err: err}
		}
		res, err := c.do(ctx, client, call, &a)
		if err != nil {
			return nil, call.redactError(fmt.Errorf("step %q: action %q: %w", call.Step, name, err))
		}
		out, err := json.Marshal(res)
		return call.redactJSON(out), err
	}, secretArgs: []string{"url", "headers"}})
}

var httpArgsType = reflectTypeOf[HTTPArgs]()

func (c *HTTPConfig) allowed(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return flow.NonRetryable(fmt.Errorf("%w: %q: the scheme must be http or https", ErrHostNotAllowed, u.Redacted()))
	}
	host := u.Hostname()
	port := u.Port()
	for _, h := range c.AllowedHosts {
		hh, hp, err := net.SplitHostPort(h)
		if err != nil {
			hh, hp = h, ""
		}
		if strings.EqualFold(hh, host) && (hp == "" || hp == port) {
			return nil
		}
	}
	return flow.NonRetryable(fmt.Errorf("%w: %q is not in the allow-list (%s)", ErrHostNotAllowed, u.Host, strings.Join(c.AllowedHosts, ", ")))
}

func (c *HTTPConfig) do(ctx context.Context, client *http.Client, call ActionCall, a *HTTPArgs) (*HTTPResult, error) {
	method := strings.ToUpper(a.Method)
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(a.URL)
	if err != nil || a.URL == "" {
		return nil, flow.NonRetryable(fmt.Errorf("url %q is not a URL", a.URL))
	}
	if err := c.allowed(u); err != nil {
		return nil, err
	}
	var body io.Reader
	contentType := ""
	switch b := a.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, flow.NonRetryable(err)
		}
		body, contentType = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, flow.NonRetryable(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if call.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", call.IdempotencyKey)
	}
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, ErrHostNotAllowed) {
			return nil, flow.NonRetryable(err)
		}
		return nil, err // network errors and timeouts are retried
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxResponseSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > c.MaxResponseSize {
		return nil, flow.NonRetryable(fmt.Errorf("%s %s: the response exceeds %d bytes", method, u.Redacted(), c.MaxResponseSize))
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if len(a.OKStatus) > 0 {
		ok = slices.Contains(a.OKStatus, resp.StatusCode)
	}
	if !ok {
		text := string(data)
		if len(text) > 512 {
			text = text[:512] + "…"
		}
		se := &HTTPStatusError{Method: method, URL: u.Redacted(), Status: resp.StatusCode, Body: text}
		if resp.StatusCode == 408 || resp.StatusCode == 429 || resp.StatusCode >= 500 {
			return nil, se
		}
		return nil, flow.NonRetryable(se)
	}
	res := &HTTPResult{Status: resp.StatusCode, Headers: map[string]string{}}
	for k := range resp.Header {
		res.Headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	var v any
	if len(data) > 0 && json.Unmarshal(data, &v) == nil {
		res.Body = v
	} else if len(data) > 0 {
		res.Body = string(data)
	}
	return res, nil
}
