package dashboard_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/server"
)

// The events pages' tests declare a trigger that starts the order flow
// for an order.paid event above 100, and send three events: pay-1 (which
// the trigger starts a run for), pay-2 (which its filter skips) and
// sig-1, of another name, whose data holds markup.

// paidTrigger is the test's trigger.
const paidTrigger = "ship-big"

// evilNote is markup in an event's data, which the pages show as text.
// It is sent as raw JSON: encoding/json would escape < and > as \u003c.
const evilNote = `<script>alert(1)</script><img src=x onerror=alert(2)>`

// eventsSetup declares the trigger.
func eventsSetup(ctx context.Context, c *heph.Client) error {
	return c.DeclareTriggers(ctx, &heph.Trigger{Name: paidTrigger, Event: "order.paid", Target: heph.TargetFlow, TargetName: "order",
		Filter: "event.data.amount > 100"})
}

// sendEvents sends the test's events, oldest first, waits until the
// trigger has dealt with both order.paid events and the run it started
// has completed, and returns that run's id.
func (e *env) sendEvents() string {
	e.t.Helper()
	ctx := context.Background()
	for _, ev := range []struct {
		id, name string
		data     any
	}{
		{"pay-1", "order.paid", map[string]any{"id": "o-1", "amount": 120, "customer": map[string]any{"id": "c-7"}}},
		{"pay-2", "order.paid", map[string]any{"id": "o-2", "amount": 5, "customer": map[string]any{"id": "c-8"}}},
		{"sig-1", "user.signup", json.RawMessage(`{"customer": {"id": "c-9"}, "note": "` + evilNote + `"}`)},
	} {
		if _, err := e.client.SendEvent(ctx, ev.name, ev.data, &heph.SendEventOptions{ID: ev.id}); err != nil {
			e.t.Fatal(err)
		}
	}
	run := ""
	for id, want := range map[string]string{"pay-1": heph.FiringStarted, "pay-2": heph.FiringSkipped} {
		f := e.firing(id)
		if f.Status != want {
			e.t.Fatalf("the trigger's firing of %s is %+v, want %s", id, f, want)
		}
		if id == "pay-1" {
			run = f.RunID
		}
	}
	e.waitStatus(run, heph.StatusCompleted)
	return run
}

// firing waits (up to a minute) until the trigger has dealt with an
// event, and returns its firing.
func (e *env) firing(eventID string) *heph.TriggerFiring {
	e.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := e.client.DispatchTriggers(ctx); err != nil {
			e.t.Fatal(err)
		}
		fs, err := e.client.EventFirings(ctx, eventID)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(fs) == 1 && fs[0].Status != heph.FiringPending {
			return fs[0]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the firings of %s after a minute: %+v", eventID, fs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The events list shows the events newest first with what the triggers
// did; the form filters by name and by a data field; the pager pages;
// an event's page shows its data and links the run its trigger started,
// whose page links back to the event.
func TestEventsPages(t *testing.T) {
	e := newEnv(t, true, eventsSetup)
	run := e.sendEvents()
	b := newBrowser(t)
	rows := func() []string {
		var ids []string
		b.eval(`Array.from(document.querySelectorAll("table.sent-events tbody tr[data-event]")).map(r => r.dataset.event)`, &ids)
		return ids
	}
	b.open(e.url + "/events")
	if got := rows(); !slices.Equal(got, []string{"sig-1", "pay-2", "pay-1"}) {
		t.Errorf("the events listed: %v, want sig-1, pay-2, pay-1", got)
	}
	for id, want := range map[string][3]string{"pay-1": {"order.paid", "1 started", `"amount":120`},
		"pay-2": {"order.paid", "1 skipped", `"amount":5`}, "sig-1": {"user.signup", "none", `"customer":{"id":"c-9"}`}} {
		row := fmt.Sprintf(`tr[data-event=%q]`, id)
		if s := b.text(row + " td.name"); s != want[0] {
			t.Errorf("%s: the name reads %q, want %q", id, s, want[0])
		}
		if s := b.text(row + " td.id"); s != id {
			t.Errorf("%s: the id reads %q", id, s)
		}
		if s := b.text(row + " td.firings"); s != want[1] {
			t.Errorf("%s: the triggers read %q, want %q", id, s, want[1])
		}
		if s := b.text(row + " td.preview"); !strings.Contains(s, want[2]) {
			t.Errorf("%s: the data reads %q, want %s in it", id, s, want[2])
		}
	}
	b.noErrors("the events list")

	// The form: by name, then by a data field (text, then a number).
	b.run("type the name", chromedp.SendKeys(`#event-filters input[name=name]`, "order.paid", chromedp.ByQuery))
	b.submit("filter by name", chromedp.Click(`#event-filters button[type=submit]`, chromedp.ByQuery))
	if got := rows(); !slices.Equal(got, []string{"pay-2", "pay-1"}) {
		t.Errorf("name=order.paid: %v", got)
	}
	b.open(e.url + "/events")
	b.run("type the field", chromedp.SendKeys(`#event-filters input[name=field]`, "customer.id", chromedp.ByQuery),
		chromedp.SendKeys(`#event-filters input[name=value]`, "c-7", chromedp.ByQuery))
	b.submit("filter by a field", chromedp.Click(`#event-filters button[type=submit]`, chromedp.ByQuery))
	if got := rows(); !slices.Equal(got, []string{"pay-1"}) {
		t.Errorf("customer.id = c-7: %v", got)
	}
	b.open(e.url + "/events?field=amount&value=5")
	if got := rows(); !slices.Equal(got, []string{"pay-2"}) {
		t.Errorf("amount = 5: %v", got)
	}
	b.noErrors("the filtered list")

	// Paging, two at a time.
	b.open(e.url + "/events?limit=2")
	if got := rows(); !slices.Equal(got, []string{"sig-1", "pay-2"}) || b.count("#first-page") != 0 {
		t.Errorf("the first page of two: %v", got)
	}
	b.submit("older", chromedp.Click("#next-page", chromedp.ByQuery))
	if got := rows(); !slices.Equal(got, []string{"pay-1"}) || b.count("#next-page") != 0 {
		t.Errorf("the second page of two: %v", got)
	}
	b.submit("newest", chromedp.Click("#first-page", chromedp.ByQuery))
	if got := rows(); !slices.Equal(got, []string{"sig-1", "pay-2"}) {
		t.Errorf("back to the newest: %v", got)
	}
	b.noErrors("paging")
	checkEventToRun(t, e, b, run)
}

// checkEventToRun follows pay-1 from the list to its page, to the run its
// trigger started, and back to the event.
func checkEventToRun(t *testing.T, e *env, b *browser, run string) {
	t.Helper()
	b.open(e.url + "/events")
	b.run("open pay-1", jsClick(`tr[data-event="pay-1"] td.name a`), chromedp.WaitReady("#event-name", chromedp.ByQuery))
	if s := b.text("#event-name"); s != "order.paid" {
		t.Errorf("the event's name reads %q", s)
	}
	if s := b.text("#event-id"); s != "pay-1" {
		t.Errorf("the event's id reads %q", s)
	}
	if s := b.text("#event-data"); !strings.Contains(s, `"id": "c-7"`) || !strings.Contains(s, `"amount": 120`) {
		t.Errorf("the event's data reads %q, want it indented", s)
	}
	firing := fmt.Sprintf(`#event-firings tr[data-trigger=%q]`, paidTrigger)
	if s := b.text(firing + " td:nth-child(2)"); s != "started" {
		t.Errorf("the firing's status reads %q", s)
	}
	var href string
	b.eval(fmt.Sprintf(`document.querySelector(%q)?.getAttribute("href") || ""`, firing+" td.run a"), &href)
	if href != "/runs/"+run {
		t.Fatalf("the firing links %q, want /runs/%s", href, run)
	}
	b.submit("open the run", chromedp.Click(firing+" td.run a", chromedp.ByQuery))
	if s := b.text("#run-id"); s != run {
		t.Fatalf("the link opened run %q, want %s", s, run)
	}
	if s := b.text("#run-started-by"); !strings.Contains(s, "event order.paid") || !strings.Contains(s, "pay-1") ||
		!strings.Contains(s, "(trigger "+paidTrigger+")") {
		t.Errorf("the run's Started by reads %q", s)
	}
	var terms []string
	b.eval(`Array.from(document.querySelectorAll("#run-header dl.facts dt")).map(d => d.textContent)`, &terms)
	if slices.Contains(terms, "event") || slices.Contains(terms, "trigger") {
		t.Errorf("the run's metadata is listed again beside Started by: %v", terms)
	}
	b.eval(`document.querySelector("#run-started-by a")?.getAttribute("href") || ""`, &href)
	if href != "/events/pay-1" {
		t.Fatalf("the run's Started by links %q, want /events/pay-1", href)
	}
	b.submit("back to the event", chromedp.Click("#run-started-by a", chromedp.ByQuery))
	if s := b.text("#event-id"); s != "pay-1" {
		t.Errorf("the run's link opened event %q, want pay-1", s)
	}
	b.noErrors("from the event to its run and back")

	// sig-1's data is markup, shown as text: the page runs no script of
	// it (the Content-Security-Policy would log a refused inline script,
	// which noErrors reports).
	b.open(e.url + "/events/sig-1")
	if s := b.text("#event-data"); !strings.Contains(s, evilNote) {
		t.Errorf("the markup in the data reads %q, want it as text", s)
	}
	var injected int
	b.eval(`document.querySelectorAll("main script, main img").length`, &injected)
	if injected != 0 {
		t.Errorf("the event's data made %d elements", injected)
	}
	b.noErrors("an event with markup in its data")
}

// page reads a dashboard page as a token, returning its status and body.
func (e *env) page(path, token string) (int, string) {
	e.t.Helper()
	res, err := httpGet(e.url+path, token)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// The events pages over plain HTTP: a reader may read them; markup in
// the data is escaped; an unknown id is a 404 page; an id with reserved
// characters is linked escaped; the API's refusal of a filter is shown
// on the page with the form; a bad cursor is a 400 page; a run no
// trigger started has no Started by line.
func TestEventsPagesHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, eventsSetup)
	run := e.sendEvents()
	odd := "a/b?c #d"
	if _, err := e.client.SendEvent(context.Background(), "odd.id", nil, &heph.SendEventOptions{ID: odd}); err != nil {
		t.Fatal(err)
	}
	reader := e.token("viewer", server.RoleRead)

	status, body := e.page("/events", reader)
	if status != http.StatusOK || !strings.Contains(body, `data-event="pay-1"`) || !strings.Contains(body, `href="/events/a%2Fb%3Fc%20%23d"`) {
		t.Errorf("the list, as a reader: %d\n%s", status, body)
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert") {
		t.Errorf("the list does not escape the data's markup:\n%s", body)
	}
	status, body = e.page("/events/sig-1", reader)
	if status != http.StatusOK || strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") ||
		!strings.Contains(body, "&lt;img src=x onerror=alert(2)&gt;") {
		t.Errorf("the event's page does not escape the data's markup: %d\n%s", status, body)
	}
	status, body = e.page("/events/"+url.PathEscape(odd), reader)
	if status != http.StatusOK || !strings.Contains(body, `<dd class="mono" id="event-id">a/b?c #d</dd>`) {
		t.Errorf("the page of the event %q: %d\n%s", odd, status, body)
	}
	status, body = e.page("/events/no-such-event", reader)
	if status != http.StatusNotFound || !strings.Contains(body, "no event has the id &#34;no-such-event&#34;") || !strings.Contains(body, `<nav>`) {
		t.Errorf("an unknown event: %d\n%s", status, body)
	}
	status, body = e.page("/events?value=1", reader)
	if status != http.StatusOK || !strings.Contains(body, `id="events-problem"`) || !strings.Contains(body, "value is set without field") ||
		!strings.Contains(body, `id="event-filters"`) {
		t.Errorf("a value without a field: %d\n%s", status, body)
	}
	if status, body = e.page("/events?before_seq=soon", reader); status != http.StatusBadRequest || !strings.Contains(body, "before_seq") {
		t.Errorf("a bad cursor: %d\n%s", status, body)
	}
	status, body = e.page("/runs/"+run, reader)
	if status != http.StatusOK || !strings.Contains(body, `<a href="/events/pay-1" title="pay-1">order.paid</a>`) {
		t.Errorf("the run the trigger started, as a reader: %d\n%s", status, body)
	}
	other := e.start("order", order{ID: "o-9", Amount: 3})
	if _, body = e.page("/runs/"+other, reader); strings.Contains(body, "run-started-by") {
		t.Errorf("a run no trigger started shows a Started by line:\n%s", body)
	}
}

// On a server whose payload codec encodes event data, the events page
// shows the API's refusal of a field filter, and the name filter still
// works.
func TestEventsPageCodec(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, true, func(c *heph.Config) {
		sum := sha256.Sum256([]byte("dashboard event key"))
		ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: []codec.Key{{ID: "k1", Secret: sum[:]}}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := codec.NewAESGCM(ring)
		if err != nil {
			t.Fatal(err)
		}
		if c.PayloadCodec, err = codec.NewChain(&codec.ChainConfig{Codecs: []codec.Codec{a}}); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := e.client.SendEvent(context.Background(), "order.paid", map[string]int{"amount": 7}, &heph.SendEventOptions{ID: "enc-1"}); err != nil {
		t.Fatal(err)
	}
	status, body := e.page("/events?field=amount&value=7", "")
	if status != http.StatusOK || !strings.Contains(body, `id="events-problem"`) || !strings.Contains(body, "event data is encoded") ||
		strings.Contains(body, `data-event="enc-1"`) {
		t.Errorf("a field filter with a codec: %d\n%s", status, body)
	}
	status, body = e.page("/events?name=order.paid", "")
	if status != http.StatusOK || !strings.Contains(body, `data-event="enc-1"`) || !strings.Contains(body, `{&#34;amount&#34;:7}`) {
		t.Errorf("a name filter with a codec: %d\n%s", status, body)
	}
}
