package dashboard

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"

	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/server"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Config configures a Dashboard.
type Config struct {
	// API is the HTTP API the dashboard reads and acts through: a
	// *server.Server, or a handler that serves it. Required. The
	// dashboard serves it under /api/ (and /healthz, /readyz), so one
	// handler serves both.
	API http.Handler
	// Logger receives the dashboard's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Now tells the time for the pictures of running work. Defaults to
	// time.Now.
	Now func() time.Time
	// Refresh is how often a page that shows live data refreshes itself
	// in the browser. Defaults to 5 seconds.
	Refresh time.Duration
	// OIDC, when set with Sessions, offers sign-in with the identity
	// provider on the login page (/login/oidc, whose callback is
	// /login/oidc/callback: OIDCConfig.RedirectURL). Defaults to nil:
	// tokens only.
	OIDC *server.OIDC
	// Sessions starts the session of a user the provider signed in: the
	// *server.Server behind API. Required with OIDC.
	Sessions SessionStarter
}

// Dashboard serves the dashboard and, under /api/, the API. Create it
// with New.
type Dashboard struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template
	csrf  *http.CrossOriginProtection
}

// New returns a Dashboard for cfg.
func New(cfg *Config) (*Dashboard, error) {
	if cfg == nil || cfg.API == nil {
		return nil, errors.New("dashboard: Config.API is required")
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Refresh <= 0 {
		c.Refresh = 5 * time.Second
	}
	if c.OIDC != nil && c.Sessions == nil {
		return nil, errors.New("dashboard: Config.Sessions is required with Config.OIDC")
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	d := &Dashboard{cfg: c, mux: http.NewServeMux(), pages: pages, csrf: http.NewCrossOriginProtection()}
	d.routes()
	return d, nil
}

// page is a dashboard page's handler: it returns the template to render
// and its data, or an error (an *apiError renders as its problem).
type page func(r *http.Request) (name string, data any, err error)

// routes registers the pages.
func (d *Dashboard) routes() {
	assets, _ := fs.Sub(assetFS, "assets")
	static := http.StripPrefix("/assets/", http.FileServerFS(assets))
	d.mux.Handle("GET /assets/", cacheFor(static, time.Hour))
	d.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/assets/favicon.svg", http.StatusMovedPermanently)
	})
	d.mux.HandleFunc("GET /login", d.loginForm)
	d.mux.HandleFunc("POST /login", d.login)
	d.mux.HandleFunc("POST /logout", d.logout)
	d.mux.HandleFunc("GET /login/oidc", d.oidcStart)
	d.mux.HandleFunc("GET "+oidcCallback, d.oidcFinish)
	for _, p := range d.pageRoutes() {
		d.mux.Handle("GET "+p.pattern, d.serve(p.handle))
	}
	// Any other path: a 404 page with the navigation.
	d.mux.Handle("/", d.serve(func(r *http.Request) (string, any, error) {
		return "", nil, &pageError{status: http.StatusNotFound, msg: "no page " + r.URL.Path}
	}))
}

// pageRoute is a page and its path pattern.
type pageRoute struct {
	pattern string
	handle  page
}

// pageRoutes lists the pages; the navigation lists those with a nav
// label (navItems).
func (d *Dashboard) pageRoutes() []pageRoute {
	return []pageRoute{
		{"/{$}", d.runsPage},
		{"/overview", d.overviewPage},
		{"/approvals", d.approvalsPage},
		{"/schedules", d.schedulesPage},
		{"/events", d.eventsPage},
		{"/events/{id}", d.eventPage},
		{"/triggers", d.triggersPage},
		{"/queues", d.queuesPage},
		{"/workers", d.workersPage},
		{"/definitions", d.definitionsPage},
		{"/definitions/{name}", d.definitionPage},
		{"/operations", d.operationsPage},
		{"/secrets", d.secretsPage},
		{"/runs/{id}", d.runPage},
	}
}

// navItem is an entry of the navigation bar.
type navItem struct {
	Label, Path string
}

// navItems are the navigation bar's entries, in order.
var navItems = []navItem{
	{"Overview", "/overview"},
	{"Runs", "/"},
	{"Approvals", "/approvals"},
	{"Schedules", "/schedules"},
	{"Events", "/events"},
	{"Triggers", "/triggers"},
	{"Queues", "/queues"},
	{"Workers", "/workers"},
	{"Definitions", "/definitions"},
	{"Operations", "/operations"},
	{"Secrets", "/secrets"},
}

// ServeHTTP serves the API under /api/, /hooks/ (webhooks in), /healthz
// and /readyz, and the dashboard's pages and assets elsewhere.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/hooks/") || p == "/healthz" || p == "/readyz" {
		d.cfg.API.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

func cacheFor(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}

// view is what the layout template receives.
type view struct {
	Title   string
	Path    string
	Nav     []navItem
	Caller  *server.Caller
	Refresh int // seconds; 0: the page does not refresh
	Data    any
	// Problem is the API's answer when a page could not be read.
	Problem *server.Problem
	// Partial is set when the browser's refresh asks for the page.
	Partial bool
}

// Admin reports whether the caller may act (start, cancel, approve …).
func (v *view) Admin() bool { return v.Caller != nil && v.Caller.Role == server.RoleAdmin }

// titled is implemented by page data that names the page.
type titled interface{ PageTitle() string }

// live is implemented by page data whose page refreshes itself.
type live interface{ Live() bool }

// serve renders a page: on 401 it sends the browser to the login form.
func (d *Dashboard) serve(p page) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := &view{Path: r.URL.Path, Nav: navItems}
		who := &server.Caller{}
		if err := d.get(r, "/api/v1/whoami", nil, who); err != nil {
			d.fail(w, r, v, err)
			return
		}
		v.Caller = who
		if err := checkParams(r); err != nil {
			d.fail(w, r, v, err)
			return
		}
		name, data, err := p(r)
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		v.Data = data
		if t, ok := data.(titled); ok {
			v.Title = t.PageTitle()
		}
		if l, ok := data.(live); ok && l.Live() {
			v.Refresh = int(d.cfg.Refresh.Seconds())
		}
		d.render(w, http.StatusOK, name, v)
	})
}

// fail answers a page whose data could not be read.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, v *view, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusUnauthorized {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		v.Title, v.Problem = ae.Problem.Title, &ae.Problem
		d.render(w, ae.Status, "error", v)
		return
	}
	var pe *pageError
	if errors.As(err, &pe) {
		v.Title, v.Problem = http.StatusText(pe.status), &server.Problem{Status: pe.status, Title: http.StatusText(pe.status), Detail: pe.msg}
		d.render(w, pe.status, "error", v)
		return
	}
	d.cfg.Logger.Error("dashboard: page failed", "path", r.URL.Path, "err", err)
	v.Title, v.Problem = "Error", &server.Problem{Status: http.StatusInternalServerError, Title: "Internal Server Error", Detail: err.Error()}
	d.render(w, http.StatusInternalServerError, "error", v)
}

// pageError is a page's own error (a bad query parameter).
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return e.msg }

// checkParams refuses, with a 400 page, a query string that does not
// decode and a path or query parameter that is not UTF-8 or holds a NUL
// byte, as the API does.
func checkParams(r *http.Request) error {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("the query string does not decode: %v", err)
	}
	if !plainText(r.URL.Path) {
		return badRequest("the path %q is not UTF-8 text without NUL bytes", r.URL.Path)
	}
	for name, vs := range vals {
		if !plainText(name) {
			return badRequest("query parameter %q: the name is not UTF-8 text without NUL bytes", name)
		}
		for _, v := range vs {
			if !plainText(v) {
				return badRequest("query parameter %s: %q is not UTF-8 text without NUL bytes", name, v)
			}
		}
	}
	return nil
}

func plainText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// badRequest is a 400 page.
func badRequest(format string, args ...any) error {
	return &pageError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// render executes a page template into a buffer, then writes it.
func (d *Dashboard) render(w http.ResponseWriter, status int, name string, v *view) {
	t, ok := d.pages[name]
	if !ok {
		d.cfg.Logger.Error("dashboard: no template", "name", name)
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		d.cfg.Logger.Error("dashboard: render", "page", name, "err", err)
		http.Error(w, "the page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// apiError is an answer of the API that is not a success.
type apiError struct {
	Status  int
	Problem server.Problem
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Problem.Title, e.Problem.Detail)
}

// get reads path from the API in process, as the browser's caller (its
// session cookie, sent as the bearer token), and decodes the JSON answer
// into out.
func (d *Dashboard) get(r *http.Request, p string, q url.Values, out any) error {
	u := p
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Host = r.Host
	req.RemoteAddr = r.RemoteAddr
	if c, err := r.Cookie(server.SessionCookie); err == nil && c.Value != "" {
		req.AddCookie(&http.Cookie{Name: server.SessionCookie, Value: c.Value})
	}
	if h := r.Header.Get("Authorization"); h != "" {
		req.Header.Set("Authorization", h)
	}
	return d.send(req, p, out)
}

// send serves an in-process request to the API and decodes its JSON
// answer into out (an *apiError for a status of 300 or more).
func (d *Dashboard) send(req *http.Request, p string, out any) error {
	rec := &memResponse{header: http.Header{}}
	d.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 300 {
		ae := &apiError{Status: rec.status}
		if err := json.Unmarshal(rec.body.Bytes(), &ae.Problem); err != nil || ae.Problem.Title == "" {
			ae.Problem = server.Problem{Status: rec.status, Title: http.StatusText(rec.status), Detail: strings.TrimSpace(rec.body.String())}
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("decode the answer of GET %s: %w", p, err)
	}
	return nil
}

// memResponse keeps an in-process answer of the API.
type memResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (m *memResponse) Header() http.Header { return m.header }

func (m *memResponse) Write(b []byte) (int, error) {
	if m.status == 0 {
		m.status = http.StatusOK
	}
	return m.body.Write(b)
}

func (m *memResponse) WriteHeader(code int) {
	if m.status == 0 {
		m.status = code
	}
}

// loginData is the login form's.
type loginData struct {
	Next, Error string
	Insecure    bool
	// OIDC offers the identity provider's sign-in.
	OIDC bool
}

// OIDCURL is the link that starts the identity provider's sign-in.
func (l loginData) OIDCURL() string { return oidcLoginURL(l.Next) }

func (loginData) PageTitle() string { return "Sign in" }

func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) {
	v := &view{Path: r.URL.Path, Title: "Sign in"}
	ld := loginData{Next: safeNext(r.URL.Query().Get("next")), OIDC: d.cfg.OIDC.CanSignIn() && d.cfg.Sessions != nil}
	who := &server.Caller{}
	if err := d.get(r, "/api/v1/whoami", nil, who); err == nil && who.Insecure {
		ld.Insecure = true
	}
	v.Data = ld
	d.render(w, http.StatusOK, "login", v)
}

// login signs in with the token of the form: the API makes a session of
// it, whose secret the session cookie keeps.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	v := &view{Path: r.URL.Path, Title: "Sign in"}
	if err := d.csrf.Check(r); err != nil {
		v.Data = loginData{Error: "cross-origin sign-in refused"}
		d.render(w, http.StatusForbidden, "login", v)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		v.Data = loginData{Error: "the form could not be read: " + err.Error()}
		d.render(w, http.StatusBadRequest, "login", v)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	next := safeNext(r.PostForm.Get("next"))
	if token == "" {
		v.Data = loginData{Next: next, Error: "enter an API token"}
		d.render(w, http.StatusOK, "login", v)
		return
	}
	// The token makes a server-side session (POST /api/v1/sessions): the
	// cookie holds the session's secret, never the token.
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/api/v1/sessions", nil)
	if err != nil {
		d.render(w, http.StatusInternalServerError, "login", v)
		return
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	req.Header.Set("Authorization", "Bearer "+token)
	var se server.Session
	if err := d.send(req, "/api/v1/sessions", &se); err != nil {
		msg := err.Error()
		var ae *apiError
		if errors.As(err, &ae) {
			msg = ae.Problem.Detail
		}
		v.Data = loginData{Next: next, Error: "sign-in refused: " + msg}
		// 200, not 401: the form is the answer, and a browser logs a 4xx
		// page load as an error.
		d.render(w, http.StatusOK, "login", v)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: server.SessionCookie, Value: se.Secret, Path: "/", Expires: se.ExpiresAt, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session server-side (DELETE /api/v1/sessions/current)
// and clears the cookie.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if err := d.csrf.Check(r); err != nil {
		http.Error(w, "cross-origin sign-out refused", http.StatusForbidden)
		return
	}
	if c, err := r.Cookie(server.SessionCookie); err == nil && c.Value != "" {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodDelete, "/api/v1/sessions/current", nil)
		if err == nil {
			req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
			req.AddCookie(&http.Cookie{Name: server.SessionCookie, Value: c.Value})
			if err := d.send(req, "/api/v1/sessions/current", nil); err != nil {
				d.cfg.Logger.Warn("dashboard: end the session", "err", err)
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: server.SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// maxNext bounds the length of a redirect target after sign-in.
const maxNext = 2048

// safeNext keeps a redirect target on this site. It parses next and
// rebuilds it from its path and query alone, so what the browser follows is
// a same-origin path: anything with a scheme, a host or user information,
// a path that does not start with "/", a backslash, a control character
// (browsers strip tabs and newlines, which would turn "/\t/host" into
// "//host") or a character outside ASCII, before or after
// percent-decoding, gives "/". The path is cleaned ("/./", "/../" and
// repeated slashes collapse), so the result never starts with "//".
func safeNext(next string) string {
	if next == "" || len(next) > maxNext || !strings.HasPrefix(next, "/") || !plainASCII(next, false) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Opaque != "" || u.User != nil || u.Host != "" || !strings.HasPrefix(u.Path, "/") || !plainASCII(u.Path, true) {
		return "/"
	}
	// Clean the escaped path: an encoded slash stays inside its segment.
	raw := u.EscapedPath()
	p := path.Clean(raw)
	if strings.HasSuffix(raw, "/") && p != "/" {
		p += "/"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || !plainASCII(p, false) {
		return "/"
	}
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// plainASCII reports whether s holds printable ASCII only (and spaces,
// when allowed), without a backslash.
func plainASCII(s string, spaces bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x21 && (!spaces || c != ' ')) || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

// parsePages parses each page template with the layout.
func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: parse the layout: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" {
			continue
		}
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(templateFS, f); err != nil {
			return nil, fmt.Errorf("dashboard: parse %s: %w", f, err)
		}
		pages[name] = t
	}
	return pages, nil
}
