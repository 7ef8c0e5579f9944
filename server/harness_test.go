package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The tests run the API on a real http.Server on loopback, over a real,
// started hephaestus.Client on a real store: an SQLite file and a
// PostgreSQL database of the test's own (internal/pgtest). Every request
// the tests send and every response they get is checked against the
// OpenAPI document by the harness's client (apiClient.do), so no test can
// skip it.
//
// The checker is github.com/pb33f/libopenapi-validator: it implements
// OpenAPI 3.1 (JSON Schema 2020-12, type arrays, examples), where
// kin-openapi's openapi3 package targets 3.0 and its 3.1 support is
// partial; it builds on santhosh-tekuri/jsonschema, which the module uses
// already for flow documents.

// backend opens a store for one test.
type backend struct {
	name string
	open func(t testing.TB) store.Store
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t testing.TB) store.Store {
			st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"postgres", func(t testing.TB) store.Store {
			st, err := postgres.Open(context.Background(), &postgres.Config{DSN: pgtest.DSN(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}

// forEach runs a test on every backend, in parallel.
func forEach(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

func quietLogger() *slog.Logger {
	if os.Getenv("HEPH_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// The definitions every test server has.

// greetFlow greets its input's name.
func greetFlow() *flow.Flow {
	b := flow.New("greet")
	flow.Step(b, "hello", func(ctx context.Context, in struct {
		Name string `json:"name"`
	}) (string, error) {
		return "hello " + in.Name, nil
	})
	return b.MustBuild()
}

// gateFlow waits at its first step until resumed with "go" (or "stop").
func gateFlow() *flow.Flow {
	b := flow.New("gate")
	flow.EventStep(b, "wait", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("go", "stop"), flow.Waits(0))
	flow.Step(b, "after", func(ctx context.Context, in any) (string, error) { return "done", nil })
	return b.Start("wait").Edge("wait", "go", "after").Edge("wait", "stop", flow.Done).Edge("after", flow.EventOK, flow.Done).MustBuild()
}

// flakyFlow is "first" then "second"; second fails for good while fail
// is set.
func flakyFlow(fail *atomic.Bool, firstCalls *atomic.Int32) *flow.Flow {
	b := flow.New("flaky")
	flow.Step(b, "first", func(ctx context.Context, in any) (int, error) {
		firstCalls.Add(1)
		return 1, nil
	})
	flow.Step(b, "second", func(ctx context.Context, in any) (int, error) {
		if fail.Load() {
			return 0, flow.NonRetryable(errors.New("second fails"))
		}
		return 2, nil
	}, flow.DependsOn("first"))
	return b.MustBuild()
}

// remoteFlow's step "shout" runs in a worker outside the process (the
// handler "action:shout"); a worker may upsert its search attribute
// "loudness" with the result.
func remoteFlow() *flow.Flow {
	b := flow.New("remote").SearchAttribute("loudness", flow.AttrInt)
	flow.Remote(b, "shout", "shout")
	return b.MustBuild()
}

// remoteDoc calls the action "upper", which workers outside the process
// run.
const remoteDoc = `
name: remote-doc
steps:
  up:
    action: upper
    args: {text: "{{input.text}}"}
    done: true
`

// counter counts the "add" signals until "done"; the update "set" sets
// the count and answers the old one; the query "count" reads it. It
// declares the search attribute "team", which a start may set.
var (
	counter      = workflow.New("counter", counterFn).SearchAttribute("team", flow.AttrKeyword)
	counterQuery = workflow.NewQuery[struct{}, int]("count")
)

func init() {
	workflow.HandleQuery(counter, counterQuery, func(state int, _ struct{}) (int, error) { return state, nil })
}

func counterFn(ctx workflow.Context, start int) (int, error) {
	workflow.Publish(ctx, start)
	return workflow.Phase(ctx, start,
		workflow.OnSignal("add", func(ctx workflow.Context, n int, count int) workflow.Next[int] {
			workflow.Publish(ctx, count+n)
			return workflow.Continue(count + n)
		}),
		workflow.OnSignal("done", func(ctx workflow.Context, _ struct{}, count int) workflow.Next[int] {
			return workflow.Stop(count)
		}),
		workflow.OnUpdate("set", func(ctx workflow.Context, v int, count int) (workflow.Reply[int, int], error) {
			if v < 0 {
				return workflow.Reply[int, int]{}, errors.New("negative count")
			}
			workflow.Publish(ctx, v)
			return workflow.Respond(v, count), nil
		}),
	)
}

// emailJob is a job kind that completes at once.
var emailJob = job.MustNew("email", func(ctx context.Context, j *job.Job[struct {
	To string `json:"to"`
}]) error {
	return nil
}, nil)

// approvalDoc is a document with an approval gate before an action,
// which the callers of the tests may decide (insecure, or the token
// named admin); approvalAnnDoc's gate only ann may decide.
const approvalDoc = `
name: approval
steps:
  review:
    approval:
      prompt: "Ship it?"
      assignees: {users: [insecure, admin]}
    on: {approved: ship, rejected: done}
  ship:
    action: echo
    args: {title: "{{input.title}}"}
    done: true
`

var approvalAnnDoc = strings.ReplaceAll(strings.Replace(approvalDoc, "[insecure, admin]", "[ann]", 1), "name: approval", "name: approval-ann")

// env is a server under test.
type env struct {
	t testing.TB
	// fail makes the flaky flow fail; firstCalls counts its first step.
	fail       *atomic.Bool
	firstCalls *atomic.Int32
	store      store.Store
	client     *heph.Client
	server     *Server
	http       *httptest.Server
	api        *apiClient
}

// newEnv starts a client with the test definitions on a new store of the
// backend, and a server over it. cfg, when not nil, adjusts the server's
// Config (Client and Store are set).
func newEnv(t testing.TB, b backend, cfg *Config) *env { return newEnvWith(t, b, cfg, nil) }

// newEnvWith is newEnv with the client's config changed by mod first.
func newEnvWith(t testing.TB, b backend, cfg *Config, mod func(*heph.Config)) *env {
	t.Helper()
	hc := &heph.Config{Store: b.open(t), Logger: quietLogger(), SecretKeys: testKeys(t, "k1:1")}
	if mod != nil {
		mod(hc)
	}
	c, err := heph.New(hc)
	if err != nil {
		t.Fatal(err)
	}
	fail, firstCalls := &atomic.Bool{}, &atomic.Int32{}
	if err := c.Register(greetFlow(), gateFlow(), flakyFlow(fail, firstCalls), remoteFlow()); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(counter, inbox); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterJobs(emailJob); err != nil {
		t.Fatal(err)
	}
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "echo", func(ctx context.Context, call flowdoc.ActionCall, in map[string]any) (map[string]any, error) {
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(flowdoc.RemoteAction("upper")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, doc := range map[string]string{"approval": approvalDoc, "approval-ann": approvalAnnDoc, "remote-doc": remoteDoc} {
		if _, err := c.PutDocument(ctx, name, heph.DocumentYAML, []byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	e := serve(t, c.Store(), c, cfg)
	e.fail, e.firstCalls = fail, firstCalls
	return e
}

// serve starts a server over a client and its store.
func serve(t testing.TB, st store.Store, c *heph.Client, cfg *Config) *env {
	t.Helper()
	var sc Config
	if cfg != nil {
		sc = *cfg
	} else {
		sc.Insecure = true
	}
	sc.Client, sc.Store = c, st
	if sc.Logger == nil {
		sc.Logger = quietLogger()
	}
	srv, err := New(&sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &env{t: t, store: st, client: c, server: srv, http: hs, api: &apiClient{t: t, base: hs.URL, hc: hs.Client()}}
}

// newEnvOn starts a second server (insecure) over the client and store of
// e: another server sharing the database.
func newEnvOn(t testing.TB, e *env) *env {
	t.Helper()
	return serve(t, e.store, e.client, nil)
}

// The OpenAPI checker, built once.
var (
	oasOnce sync.Once
	oasVal  validator.Validator
	oasErr  error
	oasMu   sync.Mutex // the checker is not documented as safe for concurrent use
)

func openAPIValidator() (validator.Validator, error) {
	oasOnce.Do(func() {
		doc, err := libopenapi.NewDocument(openAPI)
		if err != nil {
			oasErr = err
			return
		}
		// Security is checked by the tests themselves (missing, unknown
		// and revoked tokens are requests made on purpose).
		v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(), config.WithFormatAssertions())
		if len(errs) > 0 {
			oasErr = errors.Join(errs...)
			return
		}
		if ok, verrs := v.ValidateDocument(); !ok {
			oasErr = fmt.Errorf("the OpenAPI document is invalid: %s", describe(verrs))
			return
		}
		oasVal = v
	})
	return oasVal, oasErr
}

func describe[E interface{ Error() string }](errs []E) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n  - " + e.Error())
		if ve, ok := any(e).(interface{ GetReason() string }); ok {
			b.WriteString(" (" + ve.GetReason() + ")")
		}
	}
	return b.String()
}

// apiClient sends requests to the server and checks each request and its
// response against the OpenAPI document.
type apiClient struct {
	t     testing.TB
	base  string
	hc    *http.Client
	token string
}

// req is one request.
type req struct {
	method, path string
	// body is sent as JSON unless it is a string or []byte (sent as is).
	body any
	// header adds headers.
	header map[string]string
	// token overrides the client's token ("-" sends none).
	token string
	// invalid marks a request the test sends on purpose against the
	// document (an unknown field, a wrong type): the checker must refuse
	// it, and the server too.
	invalid bool
	// unchecked marks a request the test sends whether or not the
	// document allows it (the bad parameters of a table, a fuzzer's): the
	// checker does not judge it, but the response is still checked.
	unchecked bool
}

// resp is a response, with its body read.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r *resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// problemJSON is a Problem as a test reads it (not an error, so that a
// test may ignore it).
type problemJSON Problem

// problem decodes a problem+json body and checks its type and status.
func (r *resp) problem(t testing.TB, status int) *problemJSON {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("an error with Content-Type %q, want application/problem+json: %s", ct, r.body)
	}
	var p problemJSON
	r.decode(t, &p)
	if p.Status != status || !strings.HasPrefix(p.Type, ProblemTypeBase) || p.Title == "" {
		t.Fatalf("a bad problem body: %s", r.body)
	}
	return &p
}

// do sends rq and checks it and its response against the document; it
// fails the test on an error.
func (a *apiClient) do(rq req) *resp {
	a.t.Helper()
	r, err := a.send(rq)
	if err != nil {
		a.t.Fatal(err)
	}
	return r
}

// send is do for any goroutine: it returns its errors.
func (a *apiClient) send(rq req) (*resp, error) {
	var body []byte
	switch b := rq.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newReq := func() *http.Request {
		r, err := http.NewRequestWithContext(ctx, rq.method, a.base+rq.path, bytes.NewReader(body))
		if err != nil {
			panic(err) // a method or path that does not parse: a bug of the test
		}
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		tok := a.token
		if rq.token != "" {
			tok = rq.token
		}
		if tok != "" && tok != "-" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		for k, v := range rq.header {
			r.Header.Set(k, v)
		}
		return r
	}
	v, err := openAPIValidator()
	if err != nil {
		return nil, err
	}
	oasMu.Lock()
	ok, verrs := v.ValidateHttpRequest(newReq())
	oasMu.Unlock()
	switch {
	case rq.unchecked:
	case !ok && !rq.invalid:
		return nil, fmt.Errorf("%s %s: the request does not match the OpenAPI document:%s", rq.method, rq.path, describe(verrs))
	case ok && rq.invalid:
		return nil, fmt.Errorf("%s %s: a request sent as invalid passes the OpenAPI document's checks", rq.method, rq.path)
	}
	hr := newReq()
	res, err := a.hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", rq.method, rq.path, err)
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the response: %w", rq.method, rq.path, err)
	}
	res.Body = io.NopCloser(bytes.NewReader(rb))
	oasMu.Lock()
	ok, verrs = v.ValidateHttpResponse(newReq(), res)
	oasMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%s %s: the response %d does not match the OpenAPI document:%s\nbody: %s", rq.method, rq.path, res.StatusCode, describe(verrs), rb)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: rb}, nil
}

// call sends a request that must succeed with want, decoding the body
// into out when it is not nil.
func (a *apiClient) call(method, path string, body any, want int, out any) *resp {
	a.t.Helper()
	r := a.do(req{method: method, path: path, body: body})
	if r.status != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if out != nil {
		r.decode(a.t, out)
	}
	return r
}

// callAs is call with a token ("-" for none).
func (a *apiClient) callAs(token, method, path string, body any, want int, out any) *resp {
	a.t.Helper()
	r := a.do(req{method: method, path: path, body: body, token: token})
	if r.status != want {
		a.t.Fatalf("%s %s as %.12s…: status %d, want %d: %s", method, path, token, r.status, want, r.body)
	}
	if out != nil {
		r.decode(a.t, out)
	}
	return r
}

// waitStatus polls a run until it has the status (30 seconds at most).
func (e *env) waitStatus(id string, want heph.RunStatus) *Run {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+id, nil, http.StatusOK, &r)
		if r.Status == string(want) {
			return &r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s after 30s, want %s", id, r.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// admin is the env's store as the admin seam (both backends are one).
func (e *env) admin() store.Admin { return e.store.(store.Admin) }
