package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
)

// A browser without a session is sent to the login form; a wrong token is
// refused there; the right one opens the runs, and the cookie that keeps
// it is out of the page's reach (HttpOnly).
func TestLogin(t *testing.T) {
	e := newEnv(t, false)
	ok := e.start("order", order{ID: "a1", Amount: 10})
	bad := e.start("order", order{ID: "b2", Amount: 5000})
	e.waitStatus(ok, heph.StatusCompleted)
	e.waitStatus(bad, heph.StatusFailed)

	b := newBrowser(t)
	b.open(e.url + "/")
	var loc string
	b.eval("location.pathname", &loc)
	if loc != "/login" {
		t.Fatalf("without a session the browser is at %s, want /login", loc)
	}
	b.run("type a wrong token", chromedp.SendKeys("#token", "heph_wrong", chromedp.ByQuery))
	b.submit("sign in with a wrong token", chromedp.Submit("#token", chromedp.ByQuery))
	if msg := b.text("p.error"); !strings.Contains(msg, "unknown token") {
		t.Errorf("a wrong token says %q", msg)
	}
	b.login(e.url, e.admin)
	if n := b.count("table.runs tbody tr[data-run]"); n != 2 {
		t.Errorf("%d runs listed, want 2", n)
	}
	var cookies string
	b.eval("document.cookie", &cookies)
	if strings.Contains(cookies, "heph_session") {
		t.Errorf("the page can read the session cookie: %q", cookies)
	}
	if who := b.text(".who .actor"); !strings.Contains(who, "ops") {
		t.Errorf("the header names %q, want the token ops", who)
	}
	b.noErrors("the runs page")

	// Signing out forgets the session.
	b.submit("sign out", chromedp.Click(".who button", chromedp.ByQuery))
	b.open(e.url + "/")
	b.eval("location.pathname", &loc)
	if loc != "/login" {
		t.Errorf("after signing out the browser is at %s, want /login", loc)
	}
	b.noErrors("signing out")
}

// The filters narrow the list: by status (as a link and through the
// form), by definition and by free text.
func TestFiltersNarrow(t *testing.T) {
	e := newEnv(t, true)
	var gates []string
	for i := range 3 {
		gates = append(gates, e.start("gate", map[string]int{"n": i}))
	}
	ok := e.start("order", order{ID: "a1", Amount: 10})
	bad := e.start("order", order{ID: "b2", Amount: 5000})
	e.waitStatus(ok, heph.StatusCompleted)
	e.waitStatus(bad, heph.StatusFailed)
	for _, g := range gates {
		e.waitStatus(g, heph.StatusWaiting)
	}

	b := newBrowser(t)
	statuses := func() []string {
		var s []string
		b.eval(`Array.from(document.querySelectorAll("table.runs tbody tr[data-run]")).map(r => r.dataset.status)`, &s)
		return s
	}
	b.open(e.url + "/")
	if s := statuses(); len(s) != 5 {
		t.Fatalf("no filter: %v, want 5 runs", s)
	}
	b.open(e.url + "/?status=failed")
	if s := statuses(); len(s) != 1 || s[0] != "failed" {
		t.Errorf("status=failed: %v", s)
	}
	// Through the form: tick "waiting" and filter.
	b.open(e.url + "/")
	b.run("tick waiting", chromedp.Click(`input[name=status][value=waiting]`, chromedp.ByQuery))
	b.submit("filter", chromedp.Click(`#filters button[type=submit]`, chromedp.ByQuery))
	var search string
	b.eval("location.search", &search)
	if search != "?status=waiting" {
		t.Errorf("the form sent %q", search)
	}
	if s := statuses(); len(s) != 3 || strings.Join(s, ",") != "waiting,waiting,waiting" {
		t.Errorf("status=waiting through the form: %v", s)
	}
	b.open(e.url + "/?workflow=order")
	if s := statuses(); len(s) != 2 {
		t.Errorf("workflow=order: %v", s)
	}
	b.open(e.url + "/?q=declined")
	if s := statuses(); len(s) != 1 || s[0] != "failed" {
		t.Errorf("q=declined: %v", s)
	}
	b.noErrors("the filtered pages")
	// A bad filter is a 400 page that says what is wrong (which the
	// browser logs as a failed load).
	b.open(e.url + "/?status=nope")
	if h := b.text("main h1"); !strings.Contains(h, "400") {
		t.Errorf("a bad status shows %q, want a 400 page", h)
	}
	if p := b.text("main .problem p"); !strings.Contains(p, `status "nope" is not a run status`) {
		t.Errorf("a bad status says %q", p)
	}
}

// The list refreshes itself: a run started after the page loaded shows up
// without a reload.
func TestLiveRefresh(t *testing.T) {
	e := newEnv(t, true)
	first := e.start("gate", nil)
	e.waitStatus(first, heph.StatusWaiting)
	b := newBrowser(t)
	b.open(e.url + "/")
	b.eval(`window.loadedOnce = true`, nil)
	second := e.start("gate", nil)
	b.waitJS("the new run listed", fmt.Sprintf(`document.querySelector('tr[data-run=%q]') !== null`, second))
	var same bool
	b.eval(`window.loadedOnce === true`, &same)
	if !same {
		t.Error("the page reloaded instead of refreshing its list")
	}
	b.noErrors("live refresh")
}

// "Cancel all matching" cancels every run the filter selects, on every
// page, as a tracked operation whose progress the page shows; runs
// outside the filter are left alone.
func TestBulkCancelOverFilter(t *testing.T) {
	e := newEnv(t, true)
	const n = 60 // more than a page (50)
	var gates []string
	for i := range n {
		gates = append(gates, e.start("gate", map[string]int{"n": i}))
	}
	ok := e.start("order", order{ID: "a1", Amount: 10})
	e.waitStatus(ok, heph.StatusCompleted)
	for _, g := range gates {
		e.waitStatus(g, heph.StatusWaiting)
	}

	b := newBrowser(t)
	b.open(e.url + "/?workflow=gate&status=waiting")
	if c := b.count("table.runs tbody tr[data-run]"); c != 50 {
		t.Fatalf("%d rows on the first page, want 50", c)
	}
	b.run("cancel all matching", jsClick("#cancel-all"), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.SendKeys(`#confirm-fields input[name=reason]`, "bulk test", chromedp.ByQuery), chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.waitJS("the operation completed", `document.querySelector("#operation")?.dataset.status === "completed"`)
	if p := b.text("#operation span"); !strings.Contains(p, fmt.Sprintf("%d of %d done", n, n)) {
		t.Errorf("the progress says %q", p)
	}
	for _, g := range gates {
		r, err := e.client.GetRun(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != heph.StatusCancelled {
			t.Errorf("run %s is %s after the bulk cancel", g, r.Status)
		}
	}
	if r, _ := e.client.GetRun(context.Background(), ok); r.Status != heph.StatusCompleted {
		t.Errorf("the order outside the filter is %s", r.Status)
	}
	b.noErrors("the bulk cancel")

	// The operations page lists it, done, with its filter and reason.
	b.open(e.url + "/operations")
	row := b.text("table.operations tbody tr")
	for _, want := range []string{"cancel", "bulk test", "status=waiting workflow=gate", fmt.Sprintf("%d of %d done", n, n)} {
		if !strings.Contains(row, want) {
			t.Errorf("the operation's row %q lacks %q", row, want)
		}
	}
	b.noErrors("the operations page")
}

// Pages and API share one handler: the API answers under /api/ and the
// probes at the root.
func TestServesAPI(t *testing.T) {
	e := newEnv(t, true)
	for _, p := range []string{"/healthz", "/api/v1/runs", "/assets/style.css", "/assets/app.js", "/favicon.ico"} {
		res, err := httpGet(e.url+p, "")
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", p, res.StatusCode)
		}
	}
}

// A path with no page is a 404 page with the navigation.
func TestNotFound(t *testing.T) {
	e := newEnv(t, true)
	res, err := httpGet(e.url+"/nope", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no page /nope") || !strings.Contains(string(body), `<nav>`) {
		t.Errorf("GET /nope: %d %s", res.StatusCode, body)
	}
}

// "Cancel selected" cancels exactly the ticked runs, as one operation.
func TestBulkCancelSelection(t *testing.T) {
	e := newEnv(t, true)
	var gates []string
	for i := range 4 {
		gates = append(gates, e.start("gate", map[string]int{"n": i}))
	}
	for _, g := range gates {
		e.waitStatus(g, heph.StatusWaiting)
	}
	b := newBrowser(t)
	b.open(e.url + "/?workflow=gate")
	// Live refresh off: a refresh that lands between finding a box and
	// clicking it could move the rows under the pointer (refresh keeping
	// ticked boxes ticked is its own concern).
	b.run("live refresh off", chromedp.Click("#live-toggle", chromedp.ByQuery))
	for _, g := range gates[:2] {
		sel := fmt.Sprintf(`input.select[value=%q]`, g)
		// The tick is one JavaScript turn (find the box, click it), so a
		// refresh already under way cannot swap the box between finding
		// and clicking (chromedp's click failed once in CI with "Could
		// not find node"); a refresh keeps ticked boxes ticked.
		b.waitJS(g+" ticked", fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; if (!el.checked) el.click(); return el.checked === true; })()`, sel))
	}
	if n := b.text("#selected-count"); n != "2" {
		t.Errorf("the page counts %s selected", n)
	}
	b.run("cancel selected", jsClick("#cancel-selected"), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.waitJS("the operation completed", `document.querySelector("#operation")?.dataset.status === "completed"`)
	for i, g := range gates {
		r, err := e.client.GetRun(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		want := heph.StatusWaiting
		if i < 2 {
			want = heph.StatusCancelled
		}
		if r.Status != want {
			t.Errorf("run %d is %s, want %s", i, r.Status, want)
		}
	}
	b.noErrors("cancel selected")
}
