package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fuzzBody sends body to a route of the server directly (no network) and
// checks that the answer is a success or a 4xx problem: never a panic,
// never a 5xx.
func fuzzBody(t *testing.T, srv *Server, method, path string, body []byte) {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	if w.Code >= 500 {
		t.Fatalf("%s %s with %q: %d %s", method, path, body, w.Code, w.Body)
	}
	if w.Code < 400 {
		return
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%q: a %d with Content-Type %q", body, w.Code, ct)
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != w.Code || !strings.HasPrefix(p.Type, ProblemTypeBase) || p.Title == "" {
		t.Fatalf("%q: a bad problem body %s (%v)", body, w.Body, err)
	}
}

// FuzzDecodeStart feeds POST /runs arbitrary bodies. The seed corpus is in
// testdata/fuzz/FuzzDecodeStart. A valid body starts a run in the SQLite
// store, so an execution costs a write: fuzz with a short
// -fuzzminimizetime (2s), or minimizing an input stalls the run for long.
func FuzzDecodeStart(f *testing.F) {
	f.Add([]byte(`{"name": "greet", "input": {"name": "ann"}}`))
	f.Add([]byte(`{"kind": "workflow", "name": "counter", "input": 1, "workflow_id": "w-1"}`))
	f.Add([]byte(`{"kind": "workflow", "name": "inbox", "workflow_id": "w-2", "signal": {"name": "msg", "payload": "a", "id": "s-1"}}`))
	f.Add([]byte(`{"kind": "workflow", "name": "inbox", "workflow_id": "w-3", "update": {"name": "ask", "args": "b", "wait_for": "accepted"}}`))
	e := newEnv(f, backends()[0], &Config{Insecure: true, MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBody(t, e.server, http.MethodPost, "/api/v1/runs", body)
	})
}

// FuzzDecodeSchedule feeds POST /schedules arbitrary bodies: durations,
// times, nested objects. The seed corpus is in
// testdata/fuzz/FuzzDecodeSchedule.
func FuzzDecodeSchedule(f *testing.F) {
	f.Add([]byte(`{"id": "s", "target_kind": "flow", "target_name": "greet", "every": "1h", "anchor": "2025-01-01T00:00:00Z", "catch_up": {"ticks": 1, "within": "1h"}}`))
	e := newEnv(f, backends()[0], &Config{Insecure: true, MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzBody(t, e.server, http.MethodPost, "/api/v1/schedules", body)
	})
}
