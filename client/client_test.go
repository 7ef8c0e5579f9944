package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// seen is what the test server received.
type seen struct {
	method, path, rawPath, query, auth, idem, ctype string
	body                                            string
}

// server answers every request with status, content type and body, and
// records the last request.
func server(t *testing.T, status int, ctype, body string) (*apiclient.Client, *seen) {
	t.Helper()
	s := &seen{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*s = seen{method: r.Method, path: r.URL.Path, rawPath: r.URL.EscapedPath(), query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), idem: r.Header.Get("Idempotency-Key"), ctype: r.Header.Get("Content-Type"), body: string(b)}
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	c, err := apiclient.New(&apiclient.Config{Addr: ts.URL + "/", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func TestStartRun(t *testing.T) {
	t.Parallel()
	c, s := server(t, 201, "application/json", `{"id": "order::42", "kind": "flow", "workflow": "order", "version": 2, "status": "running", "created_at": "2025-01-02T03:04:05Z", "updated_at": "2025-01-02T03:04:05Z"}`)
	run, created, resp, err := c.StartRun(t.Context(), &apiclient.StartRequest{Kind: "flow", Name: "order", Input: json.RawMessage(`{"n":1}`), Tags: []string{"a"}}, "key-1")
	if err != nil || !created || run.ID != "order::42" || run.Version != 2 || resp.Status != 201 {
		t.Fatalf("StartRun: %+v %v %v", run, created, err)
	}
	if s.method != "POST" || s.path != "/api/v1/runs" || s.auth != "Bearer tok" || s.idem != "key-1" || s.ctype != "application/json" {
		t.Fatalf("request: %+v", s)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(s.body), &body); err != nil || body["name"] != "order" || body["kind"] != "flow" || body["input"].(map[string]any)["n"] != 1.0 {
		t.Fatalf("body: %s", s.body)
	}
	if _, ok := body["business_value"]; ok {
		t.Fatalf("empty fields sent: %s", s.body)
	}
}

func TestPathsAndQueries(t *testing.T) {
	t.Parallel()
	c, s := server(t, 200, "application/json", `{"runs": [{"id": "a"}], "next": "c2"}`)
	after := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	list, _, err := c.ListRuns(t.Context(), &apiclient.RunFilter{Statuses: []string{"failed", "waiting"}, Workflow: "w", Tags: []string{"x", "y"},
		Metadata: map[string]string{"tenant": "acme"}, CreatedAfter: &after, Text: "boom"}, 10, "c1")
	if err != nil || len(list.Runs) != 1 || list.Next != "c2" {
		t.Fatalf("ListRuns: %+v %v", list, err)
	}
	for _, want := range []string{"status=failed%2Cwaiting", "workflow=w", "tag=x&tag=y", "meta.tenant=acme", "created_after=2025-01-02T03%3A04%3A05Z", "q=boom", "limit=10", "cursor=c1"} {
		if !strings.Contains(s.query, want) {
			t.Errorf("query %q lacks %q", s.query, want)
		}
	}
	// Ids are escaped as one path segment.
	if _, _, err := c.GetRun(t.Context(), "a/b c::d"); err != nil {
		t.Fatal(err)
	}
	if s.rawPath != "/api/v1/runs/a%2Fb%20c::d" {
		t.Fatalf("path %q", s.rawPath)
	}
	if _, _, err := c.History(t.Context(), "r", 7, 30*time.Second); err != nil || s.query != "after=7&wait=30s" {
		t.Fatalf("history query %q, %v", s.query, err)
	}
}

func TestResultStatus(t *testing.T) {
	t.Parallel()
	c, _ := server(t, 202, "application/json", `{"id": "r", "status": "running"}`)
	run, done, _, err := c.Result(t.Context(), "r", time.Second)
	if err != nil || done || run.Status != "running" {
		t.Fatalf("Result 202: %+v %v %v", run, done, err)
	}
	c, _ = server(t, 200, "application/json", `{"id": "r", "status": "failed", "error": "boom"}`)
	run, done, _, err = c.Result(t.Context(), "r", 0)
	if err != nil || !done || run.Error != "boom" {
		t.Fatalf("Result 200: %+v %v %v", run, done, err)
	}
}

func TestProblems(t *testing.T) {
	t.Parallel()
	c, _ := server(t, 404, "application/problem+json", `{"type": "https://hephaestus.dev/problems/not-found", "title": "Not found", "status": 404, "detail": "run x does not exist"}`)
	_, _, err := c.GetRun(t.Context(), "x")
	var e *apiclient.Error
	if !errors.As(err, &e) || e.Status != 404 || e.Kind != "not-found" || err.Error() != "Not found: run x does not exist" || !apiclient.IsStatus(err, 404) {
		t.Fatalf("404: %#v", err)
	}
	c, _ = server(t, 422, "application/problem+json", `{"type": "https://hephaestus.dev/problems/unprocessable", "title": "Invalid document", "status": 422,
		"errors": [{"line": 3, "column": 5, "path": "steps.a", "message": "bad"}]}`)
	_, err = c.ValidateDocument(t.Context(), "yaml", "x")
	if !errors.As(err, &e) || len(e.Errors) != 1 || e.Errors[0].Line != 3 || e.Errors[0].Path != "steps.a" {
		t.Fatalf("422: %#v", err)
	}
	// Not problem+json: the status and the start of the body.
	c, _ = server(t, 502, "text/html", "<html>bad gateway</html>")
	_, _, err = c.Workers(t.Context())
	if !errors.As(err, &e) || e.Status != 502 || err.Error() != "Bad Gateway: <html>bad gateway</html>" {
		t.Fatalf("502: %v", err)
	}
}

func TestLists(t *testing.T) {
	t.Parallel()
	// A bare array, or an object with the array under a key.
	for _, body := range []string{`[{"id": "w1"}, {"id": "w2"}]`, `{"workers": [{"id": "w1"}, {"id": "w2"}]}`} {
		c, _ := server(t, 200, "application/json", body)
		ws, _, err := c.Workers(t.Context())
		if err != nil || len(ws) != 2 || ws[1].ID != "w2" {
			t.Fatalf("Workers from %s: %+v %v", body, ws, err)
		}
	}
	c, _ := server(t, 200, "application/json", `{"entries": [{"id": 3, "action": "runs.start"}], "next": "2"}`)
	page, _, err := c.Audit(t.Context(), 1, "")
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Action != "runs.start" || page.Next != "2" {
		t.Fatalf("Audit: %+v %v", page, err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, err := apiclient.New(&apiclient.Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.GetRun(t.Context(), "r")
	if !errors.Is(err, apiclient.ErrUnreachable) {
		t.Fatalf("GetRun of a closed port: %v", err)
	}
	// A cancelled call is not "unreachable".
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err = c.GetRun(ctx, "r"); errors.Is(err, apiclient.ErrUnreachable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("GetRun cancelled: %v", err)
	}
}

func TestNewChecksAddr(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"", "ftp://x", "http://"} {
		if _, err := apiclient.New(&apiclient.Config{Addr: addr}); err == nil {
			t.Errorf("New(%q) accepted", addr)
		}
	}
	c, err := apiclient.New(&apiclient.Config{Addr: "example.com:7070/base/"})
	if err != nil || c.Addr() != "http://example.com:7070/base" {
		t.Fatalf("New: %v %v", c, err)
	}
}
