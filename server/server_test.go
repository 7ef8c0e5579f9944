package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func TestConfig(t *testing.T) {
	st := backends()[0].open(t)
	c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []*Config{nil, {Store: st}, {Client: c}, {Client: c, Store: st, MaxBodyBytes: -1}, {Client: c, Store: st, RequestTimeout: -time.Second},
		{Client: c, Store: st, MaxStreams: -1}, {Client: c, Store: st, StreamKeepAlive: -time.Second}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	s, err := New(&Config{Client: c, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.MaxBodyBytes != DefaultMaxBodyBytes || s.cfg.RequestTimeout != DefaultRequestTimeout || s.cfg.Logger == nil || s.cfg.Clock == nil ||
		s.cfg.MaxStreams != DefaultMaxStreams || s.cfg.StreamKeepAlive != DefaultStreamKeepAlive {
		t.Errorf("defaults %+v", s.cfg)
	}
	// Stop before Start, Start twice, Stop twice.
	s.Stop()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop()
}

// A handler that panics answers 500 with a problem; the panic is logged.
func TestPanicIs500(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	h := e.server.wrap(&route{method: http.MethodGet, path: "/boom", access: accessPublic, handle: func(c *call) error { panic("boom") }})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/boom", nil))
	r := &resp{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
	r.problem(t, http.StatusInternalServerError)
	// An error the mapping does not know is a 500 that hides its message.
	h = e.server.wrap(&route{method: http.MethodGet, path: "/err", access: accessPublic, handle: func(c *call) error { return errors.New("secret detail") }})
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/err", nil))
	r = &resp{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
	if p := r.problem(t, http.StatusInternalServerError); p.Detail == "secret detail" {
		t.Error("a 500 shows the error's message")
	}
}

// A request whose time is up is a 504 problem.
func TestRequestTimeout(t *testing.T) {
	e := newEnv(t, backends()[0], &Config{Insecure: true, RequestTimeout: time.Nanosecond})
	p := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs"}).problem(t, http.StatusGatewayTimeout)
	if p.Type != ProblemTypeBase+"timeout" {
		t.Fatalf("problem %+v", p)
	}
}

// readyz is 503 when the store does not answer; healthz stays 200.
func TestReadyz(t *testing.T) {
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e := serve(t, st, c, nil)
	e.api.call(http.MethodGet, "/readyz", nil, http.StatusOK, nil)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	e.api.do(req{method: http.MethodGet, path: "/readyz"}).problem(t, http.StatusServiceUnavailable)
	var h map[string]string
	e.api.call(http.MethodGet, "/healthz", nil, http.StatusOK, &h)
	if h["status"] != "ok" {
		t.Fatalf("healthz %v", h)
	}
	var doc map[string]any
	e.api.call(http.MethodGet, "/api/v1/openapi.json", nil, http.StatusOK, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("the served document: %v", doc["openapi"])
	}
	if !json.Valid(OpenAPI()) {
		t.Fatal("OpenAPI() is not JSON")
	}
}
