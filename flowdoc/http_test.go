package flowdoc_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// httpServer answers /echo with the request, /status/<n> with status n,
// /slow after the request is cancelled, and /redirect with a redirect to
// elsewhere.example.
func httpServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "body": string(b), "type": r.Header.Get("Content-Type"), "x": r.Header.Get("X-Token"), "idem": r.Header.Get("Idempotency-Key") != ""})
	})
	mux.HandleFunc("/status/{n}", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var n int
		_ = json.Unmarshal([]byte(r.PathValue("n")), &n)
		w.WriteHeader(n)
		_, _ = io.WriteString(w, "status text")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-r.Context().Done()
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Redirect(w, r, "http://elsewhere.example/x", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &calls
}

func httpRegistry(t *testing.T, srv *httptest.Server, timeout time.Duration) *flowdoc.Registry {
	t.Helper()
	reg := tools(t)
	u, _ := url.Parse(srv.URL)
	if err := flowdoc.RegisterHTTP(reg, "http", &flowdoc.HTTPConfig{AllowedHosts: []string{u.Host}, Timeout: timeout}); err != nil {
		t.Fatal(err)
	}
	return reg
}

func runDoc(t *testing.T, reg *flowdoc.Registry, doc string, input any) *hephtest.FlowRun {
	t.Helper()
	f, err := flowdoc.Load("http.yaml", []byte(doc), reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := hephtest.RunFlow(context.Background(), f, input)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHTTPActionRequestAndResponse(t *testing.T) {
	srv, _ := httpServer(t)
	reg := httpRegistry(t, srv, 30*time.Second)
	doc := `
name: h
steps:
  call:
    action: http
    args:
      method: POST
      url: "{{input.base}}/echo"
      headers: {X-Token: "{{input.token}}"}
      body: {topic: "{{input.topic}}", n: 3}
    branch:
      - if: result.status == 200 && result.body.method == "POST"
        then: done
`
	r := runDoc(t, reg, doc, map[string]string{"base": srv.URL, "token": "t0k", "topic": "AI"})
	if r.Status() != hephtype.StatusCompleted {
		t.Fatalf("status %s: %s", r.Status(), r.Err())
	}
	st, _ := r.Step("call")
	var res flowdoc.HTTPResult
	if err := json.Unmarshal(st.Output, &res); err != nil {
		t.Fatal(err)
	}
	body, _ := res.Body.(map[string]any)
	if res.Status != 200 || body["body"] != `{"n":3,"topic":"AI"}` || body["type"] != "application/json" || body["x"] != "t0k" || body["idem"] != true {
		t.Errorf("result %+v", res)
	}
}

func TestHTTPActionStatusMapping(t *testing.T) {
	srv, calls := httpServer(t)
	reg := httpRegistry(t, srv, 30*time.Second)
	// A status listed in ok_status completes the step, for a branch.
	doc := `
name: h
steps:
  call:
    action: http
    args: {url: "{{input.base}}/status/404", ok_status: [200, 404]}
    branch:
      - if: result.status == 404
        then: missing
      - else: done
  missing: {action: echo, args: {body: "{{steps.call.output.body}}"}, done: true}
`
	r := runDoc(t, reg, doc, map[string]string{"base": srv.URL})
	if st, _ := r.Step("missing"); r.Status() != hephtype.StatusCompleted || string(st.Output) != `{"body":"status text"}` {
		t.Errorf("404 routed: status %s (%s), missing %s", r.Status(), r.Err(), st.Output)
	}
	// 5xx is retried; other 4xx fails at once.
	for status, attempts := range map[string]int32{"503": 3, "400": 1} {
		calls.Store(0)
		doc := `
name: h
steps:
  call:
    action: http
    args: {url: "{{input.base}}/status/` + status + `"}
    retry: {max_attempts: 3}
    done: true
`
		r := runDoc(t, reg, doc, map[string]string{"base": srv.URL})
		if r.Status() != hephtype.StatusFailed || calls.Load() != attempts || !strings.Contains(r.Err(), "status "+status) {
			t.Errorf("status %s: run %s after %d requests (%s), want failed after %d", status, r.Status(), calls.Load(), r.Err(), attempts)
		}
	}
}

func TestHTTPActionAllowList(t *testing.T) {
	srv, calls := httpServer(t)
	reg := httpRegistry(t, srv, 30*time.Second)
	// A literal URL elsewhere fails validation, with its position.
	_, err := flowdoc.Load("h.yaml", []byte("name: h\nsteps:\n  call:\n    action: http\n    args: {url: \"http://example.com/x\"}\n    done: true\n"), reg)
	errs := flowdoc.Errors(err)
	if len(errs) != 1 || errs[0].Path != "steps.call.args.url" || errs[0].Line != 5 || !strings.Contains(errs[0].Message, "not in the allow-list") {
		t.Errorf("literal URL off the list: %v", err)
	}
	// A templated one fails the step without retries, and so does a
	// redirect off the list.
	for _, u := range []string{"http://example.com/x", srv.URL + "/redirect", "file:///etc/passwd"} {
		calls.Store(0)
		doc := "name: h\nsteps:\n  call:\n    action: http\n    args: {url: \"{{input.u}}\"}\n    retry: {max_attempts: 3}\n    done: true\n"
		r := runDoc(t, reg, doc, map[string]string{"u": u})
		if r.Status() != hephtype.StatusFailed || r.Calls["call"] != 1 || !strings.Contains(r.Err(), "host not allowed") {
			t.Errorf("%s: run %s after %d calls: %s", u, r.Status(), r.Calls["call"], r.Err())
		}
	}
	if err := flowdoc.RegisterHTTP(flowdoc.NewRegistry(), "http", &flowdoc.HTTPConfig{}); err == nil {
		t.Error("an empty allow-list was accepted")
	}
}

func TestHTTPActionTimeout(t *testing.T) {
	srv, calls := httpServer(t)
	reg := httpRegistry(t, srv, 50*time.Millisecond)
	doc := "name: h\nsteps:\n  call:\n    action: http\n    args: {url: \"{{input.base}}/slow\"}\n    retry: {max_attempts: 2}\n    done: true\n"
	r := runDoc(t, reg, doc, map[string]string{"base": srv.URL})
	if r.Status() != hephtype.StatusFailed || calls.Load() != 2 {
		t.Errorf("run %s after %d requests: %s; want failed after 2 (timeouts are retried)", r.Status(), calls.Load(), r.Err())
	}
}
