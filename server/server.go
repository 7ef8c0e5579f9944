// Package server is the HTTP JSON API of Hephaestus: runs,
// their interactions, definitions and documents, schedules, queues,
// workers, tokens, the audit log, bulk operations and the worker protocol
// for workers in any language, all under /api/v1, described by the
// OpenAPI 3.1 document it serves at /api/v1/openapi.json.
//
// A Server is an http.Handler over a started hephaestus.Client. It never
// does what the client does itself: each handler decodes its request
// strictly, calls the client, and writes JSON, or an RFC 9457 problem
// whose status one function (statusOf) derives from the error.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 4 << 20
	DefaultRequestTimeout = 60 * time.Second
	DefaultSessionTTL     = 12 * time.Hour
	// MaxWait bounds every long poll (history, result, task claims).
	MaxWait = 60 * time.Second
)

// Config configures a Server. Client and Store are required.
type Config struct {
	// Client runs the API's operations. Required. It should be started
	// (Client.Start) for runs to progress and for waits to be served.
	Client *hephaestus.Client
	// Store is the client's store: the server reads it for readiness and
	// the live workers. Required.
	Store store.Store
	// Admin keeps the principals, tokens, sessions, audit log and bulk
	// operations. Defaults to Store when Store implements store.Admin (as
	// both backends do); New fails naming this field otherwise.
	Admin store.Admin
	// SessionTTL is how long a dashboard session lasts after sign-in.
	// Defaults to DefaultSessionTTL (12 hours).
	SessionTTL time.Duration
	// Insecure serves every request without a token, as the principal
	// "insecure" with the admin role and no groups. Only for a server bound to
	// loopback; the binary checks that. Defaults to false.
	Insecure bool
	// MaxBodyBytes bounds a request body; a larger one is refused with
	// 413. Defaults to 4 MiB.
	MaxBodyBytes int64
	// RequestTimeout bounds a request's handling. Long polls wait at most
	// the smaller of it and MaxWait. Defaults to 60 seconds.
	RequestTimeout time.Duration
	// MaxStreams bounds the streams of events open at once (GET
	// /runs/{id}/events, GET /runs/events); one more is refused with 503
	// and Retry-After. Defaults to DefaultMaxStreams (512).
	MaxStreams int
	// StreamKeepAlive is how often a stream with nothing to send writes a
	// comment, so that proxies keep it open and a caller that left is
	// noticed. Defaults to DefaultStreamKeepAlive (15 seconds).
	StreamKeepAlive time.Duration
	// Logger receives the server's logs (internal errors, recovered
	// panics). Defaults to slog.Default().
	Logger *slog.Logger
	// Clock stamps tokens and audit entries. Defaults to the system clock.
	Clock clock.Clock
	// Propagator reads the caller's trace context from each request's
	// headers (W3C traceparent with propagation.TraceContext): a run the
	// request starts is linked to the caller's span, and a decision it
	// causes (a signal, an update) too. Defaults to
	// otel.GetTextMapPropagator(), the global one, which reads nothing
	// unless the program set one; heph server uses W3C trace context and
	// baggage.
	Propagator propagation.TextMapPropagator
	// OIDC, when set, accepts the identity provider's ID tokens as
	// bearer tokens (the caller is the user they name, with the role
	// their groups map to), and lets the dashboard sign users in with the
	// provider (StartSession). Defaults to nil: API tokens and sessions
	// only.
	OIDC *OIDC
	// Hooks are the webhook endpoints, POST /hooks/<name>: each verifies
	// its requests with its scheme and secret and stores them as events.
	// Defaults to none (every /hooks/ path is 404).
	Hooks []Hook
	// MeterProvider records the server's own metrics (the webhook
	// counters heph.hooks.accepted and heph.hooks.refused). Defaults to
	// none.
	MeterProvider metric.MeterProvider
}

// Server serves the API. Create it with New.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	routes []*route
	ops    *processor
	hooks  *hooks
	// csrf refuses the unsafe requests a browser sends from another
	// origin (Sec-Fetch-Site, Origin), whatever their credentials.
	csrf *http.CrossOriginProtection
	// live are the open streams (stream.go).
	live streams
	// auditMu is read-held by each audit entry from its call's answer
	// until it is stored, and taken by FlushAudit (and Stop), which so
	// waits for them; audit holds the entries waiting (audit.go).
	auditMu sync.RWMutex
	audit   auditQueue
}

// SessionCookie is the cookie through which a browser (the dashboard)
// sends its session's secret, when it sends no Authorization header: a
// server-side session (POST /sessions, NewSession), never a token. The
// dashboard sets it HttpOnly and SameSite=Strict; and the server refuses
// every unsafe request (POST, PUT, DELETE) that a browser sends from
// another origin, so a page elsewhere cannot act with it.
const SessionCookie = "heph_session"

// route is one endpoint.
type route struct {
	method, path string // path as registered, under the root
	access       access
	// action names the operation in the audit log ("runs.start"); empty
	// for calls that are not recorded.
	action string
	handle func(c *call) error
	// stream marks a route that streams events: no request timeout.
	stream bool
}

// call is one request being handled.
type call struct {
	w http.ResponseWriter
	r *http.Request
	s *Server
	// actor, groups and role: who calls, from its credential only (the
	// principal's name and groups, the token's or session's role).
	actor  string
	groups []string
	role   role
	// token is the caller's token (nil with a session or insecure);
	// session the hash of its session ("" without).
	token   *store.Token
	session string
	// idToken is set when the caller sent an ID token of the identity
	// provider (Config.OIDC).
	idToken bool
	// target is what the call acted on, and detail how, for the audit
	// log.
	target, detail string
	// wrote is set once a response has been written.
	wrote bool
}

// ctx is the request's context.
func (c *call) ctx() context.Context { return c.r.Context() }

// principal is the name of the caller's principal, from its credential
// ("insecure" on an insecure server): who every decision, start and
// audit entry names.
func (c *call) principal() string { return c.actor }

// New returns a Server for cfg.
func New(cfg *Config) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("server: nil Config")
	}
	c := *cfg
	if c.Client == nil {
		return nil, errors.New("server: Config.Client is required")
	}
	if c.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	if c.Admin == nil {
		a, ok := c.Store.(store.Admin)
		if !ok {
			return nil, fmt.Errorf("server: Config.Admin is required: the Store (%T) keeps no principals, tokens or audit log", c.Store)
		}
		c.Admin = a
	}
	if c.SessionTTL < 0 {
		return nil, fmt.Errorf("server: Config.SessionTTL is %s: must be positive (or 0 for the default)", c.SessionTTL)
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("server: Config.MaxBodyBytes is %d: must be positive (or 0 for the default)", c.MaxBodyBytes)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RequestTimeout < 0 {
		return nil, fmt.Errorf("server: Config.RequestTimeout is %s: must be positive (or 0 for the default)", c.RequestTimeout)
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxStreams < 0 || c.StreamKeepAlive < 0 {
		return nil, fmt.Errorf("server: Config.MaxStreams (%d) and StreamKeepAlive (%s) must be positive (or 0 for the default)", c.MaxStreams, c.StreamKeepAlive)
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.StreamKeepAlive == 0 {
		c.StreamKeepAlive = DefaultStreamKeepAlive
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Propagator == nil {
		c.Propagator = otel.GetTextMapPropagator()
	}
	s := &Server{cfg: c, mux: http.NewServeMux(), csrf: http.NewCrossOriginProtection(), audit: auditQueue{hurry: make(chan struct{}, 1)}}
	var err error
	if s.hooks, err = newHooks(&c); err != nil {
		return nil, err
	}
	s.ops = newProcessor(s)
	s.register()
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	return s, nil
}

// ServeHTTP serves a request. A path no route has is 404, a method the
// path does not take 405 (with Allow), both as problems.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(s.cfg.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path values
		return
	}
	// The mux's own answer (404, 405, or a redirect to a cleaned path):
	// keep its status and headers, replace its text with a problem.
	cw := &captured{header: http.Header{}}
	h.ServeHTTP(cw, r)
	for k, v := range cw.header {
		if k != "Content-Type" && k != "Content-Length" && k != "X-Content-Type-Options" {
			w.Header()[k] = v
		}
	}
	switch cw.status {
	case http.StatusMethodNotAllowed:
		writeProblem(w, r, &Problem{Status: cw.status, Kind: kindMethod, Detail: fmt.Sprintf("%s does not take %s; it takes %s", r.URL.Path, r.Method, cw.header.Get("Allow"))})
	case http.StatusNotFound, 0:
		writeProblem(w, r, &Problem{Status: http.StatusNotFound, Kind: kindNotFound, Detail: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	default:
		w.WriteHeader(cw.status)
	}
}

// captured holds the mux's answer to a request no route matched.
type captured struct {
	header http.Header
	status int
}

func (c *captured) Header() http.Header { return c.header }

func (c *captured) Write(b []byte) (int, error) { return len(b), nil }

func (c *captured) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

// Start starts the server's background work: the processor of bulk
// operations, which claims the operations of every server sharing the
// store. It returns at once; Stop ends it. Safe to call twice.
func (s *Server) Start(ctx context.Context) error {
	s.ops.start(ctx)
	return nil
}

// Stop ends the background work Start began and waits for it, and for
// the audit entries being appended. Safe to call twice and before Start.
func (s *Server) Stop() {
	s.ops.stop()
	s.FlushAudit()
}

// handle adds a route.
func (s *Server) handle(method, path string, a access, action string, h func(c *call) error) {
	s.routes = append(s.routes, &route{method: method, path: path, access: a, action: action, handle: h})
}

// wrap is the middleware of every route: request timeout, body limit,
// authentication and authorization, recovery from panics (500), the
// problem for a handler's error, and the audit entry.
func (s *Server) wrap(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.stream { // a stream lasts while its caller stays
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		rec := &recorder{ResponseWriter: w}
		c := &call{w: rec, r: r, s: s}
		defer func() {
			if p := recover(); p != nil {
				s.cfg.Logger.Error("server: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeProblem(rec, r, &Problem{Status: http.StatusInternalServerError, Kind: kindInternal, Detail: "the server failed to handle the request"})
				}
			}
			s.auditAfter(c, rt, rec.status)
		}()
		if err := s.csrf.Check(r); err != nil {
			s.fail(c, &Problem{Status: http.StatusForbidden, Kind: kindForbidden, Detail: "cross-origin request refused: " + err.Error()})
			return
		}
		if err := s.authenticate(c, rt); err != nil {
			s.fail(c, err)
			return
		}
		if err := checkParams(r, rt.path); err != nil {
			s.fail(c, err)
			return
		}
		if takesRun(rt.path) {
			if err := s.resolveRun(c); err != nil {
				s.fail(c, err)
				return
			}
		}
		if rt.access == accessRun {
			if err := s.approverMaySee(c, r.PathValue("id")); err != nil {
				s.fail(c, err)
				return
			}
		}
		if err := rt.handle(c); err != nil {
			s.fail(c, err)
		}
	})
}

// fail writes the problem of a handler's error, unless a response was
// written already.
func (s *Server) fail(c *call, err error) {
	p := problemOf(err)
	if p.Status >= 500 && p.Status != http.StatusGatewayTimeout && p.Status != http.StatusServiceUnavailable {
		s.cfg.Logger.Error("server: request failed", "method", c.r.Method, "path", c.r.URL.Path, "err", err)
	}
	if c.wrote {
		return
	}
	c.wrote = true
	writeProblem(c.w, c.r, p)
}

// recorder remembers the status a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// authenticate sets who calls from its credential — a bearer token or,
// without an Authorization header, the session of the SessionCookie —
// and checks that the route admits its role.
func (s *Server) authenticate(c *call, rt *route) error {
	if rt.access == accessPublic {
		return nil
	}
	if s.cfg.Insecure {
		c.actor, c.role, c.groups = "insecure", roleAdmin, nil
		return nil
	}
	h := c.r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	secret = strings.TrimSpace(secret)
	var err error
	switch {
	case h == "":
		ck, cerr := c.r.Cookie(SessionCookie)
		if cerr != nil || ck.Value == "" {
			return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "missing bearer token: send Authorization: Bearer <token>"}
		}
		err = s.lookupSession(c, ck.Value)
	case !ok || secret == "":
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "missing bearer token: send Authorization: Bearer <token>"}
	case s.cfg.OIDC != nil && isJWT(secret):
		err = s.lookupIDToken(c, secret)
	default:
		err = s.lookupToken(c, secret)
	}
	if err != nil {
		return err
	}
	if !rt.access.admits(c.role) {
		return &Problem{Status: http.StatusForbidden, Kind: kindForbidden, Detail: fmt.Sprintf("the role %s may not %s %s", c.role, c.r.Method, rt.path)}
	}
	return nil
}
