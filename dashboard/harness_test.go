package dashboard_test

import (
	"context"
	"errors"
	"fmt"

	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/dashboard"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The browser tests run the dashboard and the API on a real http.Server
// on loopback, over a real, started client on an SQLite file, and drive
// a real headless Chromium (Debian's chromium package, which .ci/run
// installs) with chromedp. A page that logs an error to the console, an
// uncaught exception, a refused resource or a Content-Security-Policy
// violation fails the test.

// env is a running server with the dashboard.
type env struct {
	t      *testing.T
	store  store.Store
	client *heph.Client
	url    string
	// admin is an admin token's secret ("" on an insecure server).
	admin string
	// api is the server under the dashboard.
	api *server.Server
	// pages holds requests and records marks (pageHolder).
	pages *pageHolder
}

// pageHolder can hold the GET requests of a path before they are
// served, and records what a page's script says (markerPath).
type pageHolder struct {
	mu   sync.Mutex
	hold map[string]func()
	// marks are the queries of the requests of markerPath, which a test's
	// script sends to say what it saw.
	marks []string
}

// markerPath is answered by the test server itself (204), not the
// dashboard.
const markerPath = "/test-marker"

// waitMark waits (up to a minute) for the nth request of markerPath and
// returns its query.
func (p *pageHolder) waitMark(t *testing.T, n int) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		if len(p.marks) >= n {
			m := p.marks[n-1]
			p.mu.Unlock()
			return m
		}
		p.mu.Unlock()
	}
	t.Fatalf("no mark %d from the page", n)
	return ""
}

func (p *pageHolder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == markerPath {
			p.mu.Lock()
			p.marks = append(p.marks, r.URL.RawQuery)
			p.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method == http.MethodGet {
			p.mu.Lock()
			hold := p.hold[r.URL.Path]
			p.mu.Unlock()
			if hold != nil {
				hold()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// holdGets holds the GET requests of path until the returned release
// is called; arrived receives when one arrives.
func (p *pageHolder) holdGets(path string) (arrived <-chan struct{}, release func()) {
	a, r := make(chan struct{}, 1), make(chan struct{})
	p.mu.Lock()
	if p.hold == nil {
		p.hold = map[string]func(){}
	}
	p.hold[path] = func() {
		select {
		case a <- struct{}{}:
		default:
		}
		<-r
	}
	p.mu.Unlock()
	var once sync.Once
	return a, func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.hold, path)
			p.mu.Unlock()
			close(r)
		})
	}
}

// order is the test's flow input.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// orderFlow fans out from validate to charge and reserve, which fan in
// to ship; an order above 1000 fails at charge, for good.
func orderFlow() *flow.Flow {
	b := flow.New("order").Version(2).Tags("shop")
	flow.Input[order](b)
	flow.EventStep(b, "validate", func(ctx context.Context, o order) (flow.Result[order], error) {
		if o.Amount <= 0 {
			return flow.Emit("invalid", o), nil
		}
		return flow.Emit("valid", o), nil
	}, flow.Events("valid", "invalid"))
	flow.Step(b, "charge", func(ctx context.Context, o order) (string, error) {
		if o.Amount > 1000 {
			return "", flow.NonRetryable(errors.New("card declined"))
		}
		return "ch_" + o.ID, nil
	})
	flow.Step(b, "reserve", func(ctx context.Context, o order) (string, error) { return "north", nil })
	flow.Step(b, "ship", func(ctx context.Context, o order) (string, error) { return "shipped " + o.ID, nil })
	return b.Start("validate").
		Edge("validate", "valid", "charge", "reserve").
		Edge("validate", "invalid", flow.Done).
		Edge("charge", flow.EventOK, "ship").Edge("reserve", flow.EventOK, "ship").
		Edge("ship", flow.EventOK, flow.Done).
		MustBuild()
}

// gateFlow waits at its first step until resumed with "go".
func gateFlow() *flow.Flow {
	b := flow.New("gate")
	flow.EventStep(b, "hold", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("go"), flow.Waits(0))
	flow.Step(b, "after", func(ctx context.Context, in any) (string, error) { return "done", nil })
	return b.Start("hold").Edge("hold", "go", "after").Edge("after", flow.EventOK, flow.Done).MustBuild()
}

// newEnv starts a server with the dashboard on a new SQLite file; setup
// functions register more before the client starts.
func newEnv(t *testing.T, insecure bool, setup ...func(ctx context.Context, c *heph.Client) error) *env {
	t.Helper()
	return newEnvWith(t, insecure, nil, setup...)
}

// newEnvWith is newEnv with the client's config changed by mod first.
func newEnvWith(t *testing.T, insecure bool, mod func(*heph.Config), setup ...func(ctx context.Context, c *heph.Client) error) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("HEPH_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := &heph.Config{Store: st, Logger: logger, PollInterval: 200 * time.Millisecond}
	if mod != nil {
		mod(cfg)
	}
	c, err := heph.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(orderFlow(), gateFlow()); err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		if err := f(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	api, err := server.New(&server.Config{Client: c, Store: c.Store(), Insecure: insecure, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Start(cctx); err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(&dashboard.Config{API: api, Logger: logger, Refresh: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pages := &pageHolder{}
	hs := httptest.NewServer(pages.wrap(d))
	t.Cleanup(func() {
		hs.Close()
		api.Stop()
		cancel()
		_ = c.Stop(context.Background())
	})
	e := &env{t: t, store: st, client: c, url: hs.URL, api: api, pages: pages}
	if !insecure {
		_, _, secret, err := server.NewToken(ctx, st, &server.TokenParams{Principal: "ops", Role: server.RoleAdmin}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		e.admin = secret
	}
	return e
}

// start starts a run of a flow and returns its id.
func (e *env) start(name string, input any) string {
	e.t.Helper()
	r, err := e.client.StartRun(context.Background(), name, input, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// waitStatus waits (up to a minute) until a run has the status.
func (e *env) waitStatus(id string, want heph.RunStatus) *heph.Run {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := e.client.GetRun(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s after a minute, want %s (error %q)", id, r.Status, want, r.Error)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browser is a headless Chromium tab that records the page's errors.
type browser struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	// errs are the console errors, exceptions and failed loads seen.
	errs []string
}

// chromium finds the browser: $HEPH_CHROMIUM, or chromium on the PATH.
// Without one the test skips, loudly, unless HEPH_REQUIRE_BROWSER is set
// (CI sets it, after installing Debian's chromium), which fails it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HEPH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium: install Debian's chromium package (apt-get install chromium) or set HEPH_CHROMIUM"
	if os.Getenv("HEPH_REQUIRE_BROWSER") != "" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING BROWSER TEST: " + msg)
	return ""
}

// newBrowser starts a headless Chromium for one test.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-gpu", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp logs the DOM events it does not model (the top layer of a
	// <dialog>); they are not the page's errors.
	quiet := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			t.Logf("chromedp: %s", msg)
		}
	}
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithErrorf(quiet))
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.record("console." + string(ev.Type) + ": " + strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			b.record("exception: " + ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				b.record("log: " + ev.Entry.Text + " " + ev.Entry.URL)
			}
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	return b
}

func (b *browser) record(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, s)
}

// noErrors fails the test if the page logged an error.
func (b *browser) noErrors(where string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errs) > 0 {
		b.t.Errorf("%s: the browser reported errors:\n%s", where, strings.Join(b.errs, "\n"))
		b.errs = nil
	}
}

// run runs chromedp actions, failing the test on an error.
func (b *browser) run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if os.Getenv("HEPH_TEST_LOG") != "" {
		b.t.Logf("browser: %s", what)
	}
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// submit runs actions that navigate (a form's submit) and waits for the
// new page.
func (b *browser) submit(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if _, err := chromedp.RunResponse(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	b.run(what+": the new page", chromedp.WaitReady("main#main", chromedp.ByQuery))
}

// open loads a page and waits for its main element.
func (b *browser) open(url string) {
	b.t.Helper()
	b.run("open "+url, chromedp.Navigate(url), chromedp.WaitReady("main#main", chromedp.ByQuery))
}

// text is the text of the first element a selector finds.
func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery, chromedp.NodeVisible))
	return s
}

// count is how many elements a selector finds now.
func (b *browser) count(sel string) int {
	b.t.Helper()
	var nodes []*cdp.Node
	b.run("count "+sel, chromedp.Nodes(sel, &nodes, chromedp.ByQueryAll, chromedp.AtLeast(0)))
	return len(nodes)
}

// eval evaluates JavaScript into out.
func (b *browser) eval(js string, out any) {
	b.t.Helper()
	b.run("eval "+js, chromedp.Evaluate(js, out))
}

// jsClick clicks the first element sel finds, in one JavaScript turn
// once it exists. Action buttons and row boxes sit in live parts, which a
// refresh swaps: between chromedp's find and its click the node may be
// gone ("Could not find node with given id", seen in CI under load);
// inside one turn it cannot be.
func jsClick(sel string) chromedp.Action {
	js := fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, sel)
	return chromedp.Poll(js, nil, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second))
}

// waitJS waits (up to the browser's deadline) until a JavaScript
// expression is true.
func (b *browser) waitJS(what, js string) {
	b.t.Helper()
	b.run("wait until "+what, chromedp.Poll(js, nil, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(90*time.Second)))
}

// login signs in through the form with a token.
func (b *browser) login(base, token string) {
	b.t.Helper()
	b.open(base + "/login")
	b.run("type the token", chromedp.SendKeys("#token", token, chromedp.ByQuery))
	b.submit("sign in", chromedp.Submit("#token", chromedp.ByQuery))
	b.run("the runs", chromedp.WaitReady("table.runs", chromedp.ByQuery))
}

// httpGet is a plain GET with an optional bearer token.
func httpGet(url, token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return http.DefaultClient.Do(req)
}
