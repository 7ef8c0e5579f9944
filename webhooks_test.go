package hephaestus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// webhookBackends open a fresh store of each backend; every call of a
// backend's open in one test opens the same database.
func webhookBackends(t *testing.T) map[string]func(t *testing.T) func() store.Store {
	return map[string]func(t *testing.T) func() store.Store{
		"sqlite": func(t *testing.T) func() store.Store {
			path := t.TempDir() + "/h.db"
			return func() store.Store { return openSQLitePath(t, path) }
		},
		"postgres": func(t *testing.T) func() store.Store {
			dsn := pgtest.DSN(t)
			return func() store.Store {
				st, err := postgres.Open(context.Background(), &postgres.Config{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
		},
	}
}

// receiver is a webhook endpoint as a user would write one: it verifies
// every request's signature and de-duplicates by the delivery id. It
// fails the first failFirst requests with 503.
type receiver struct {
	t         *testing.T
	clk       clock.Clock
	secret    func() string
	failFirst int
	// block, when set, makes the first request wait for the client to go
	// away (its context ends).
	block   bool
	blocked chan struct{}

	mu        sync.Mutex
	requests  int
	delivered map[string]int // delivery id → 2xx answers
	events    map[string]string
	bodies    map[string][]byte
	badSigs   int
}

func newReceiver(t *testing.T, clk clock.Clock, failFirst int) *receiver {
	return &receiver{t: t, clk: clk, failFirst: failFirst, blocked: make(chan struct{}),
		delivered: map[string]int{}, events: map[string]string{}, bodies: map[string][]byte{}}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.requests++
	n := rc.requests
	if err := heph.VerifyWebhook(rc.secret(), r.Header, body, rc.clk.Now(), 5*time.Minute); err != nil {
		rc.badSigs++
		rc.mu.Unlock()
		rc.t.Errorf("request %d: %v", n, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.mu.Unlock()
	if rc.block && n == 1 {
		close(rc.blocked)
		<-r.Context().Done() // the sender went away mid-delivery
		return
	}
	if n <= rc.failFirst {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	id := r.Header.Get(heph.WebhookIDHeader)
	rc.mu.Lock()
	rc.delivered[id]++
	rc.events[id] = r.Header.Get(heph.WebhookEventHeader)
	rc.bodies[id] = body
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// deliveredEvents returns the event types delivered, counted once per
// delivery id, and fails the test if an id was answered 2xx twice.
func (rc *receiver) count() (ids int, byType map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	byType = map[string]int{}
	for id, n := range rc.delivered {
		if n != 1 {
			rc.t.Errorf("delivery %s accepted %d times", id, n)
		}
		byType[rc.events[id]]++
	}
	return len(rc.delivered), byType
}

// advanceUntil moves the fake clock in steps until cond holds (or 60
// real seconds pass): the webhook sender waits on the clock.
func advanceUntil(t *testing.T, clk *clock.Fake, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		clk.Advance(step)
		time.Sleep(2 * time.Millisecond) // polling for the state, not timing it
	}
}

func webhookFlows(t *testing.T) []*flow.Flow {
	t.Helper()
	ok := flow.New("orders")
	flow.Step(ok, "charge", func(ctx context.Context, in string) (string, error) { return in, nil })
	fail := flow.New("refunds")
	flow.Step(fail, "refund", func(ctx context.Context, in string) (string, error) {
		return "", flow.NonRetryable(errors.New("card declined"))
	})
	gate := flow.New("gated").Start("approve")
	flow.EventStep(gate, "approve", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("approved"), flow.Waits(0))
	gate.Edge("approve", "approved", flow.Done)
	return []*flow.Flow{
		ok.Start("charge").Edge("charge", flow.EventOK, flow.Done).MustBuild(),
		fail.Start("refund").Edge("refund", flow.EventOK, flow.Done).MustBuild(),
		gate.MustBuild(),
	}
}

// A receiver that fails the first deliveries gets every event exactly
// once (by its idempotency key) after retries with backoff, each request
// validly signed; the delivery log shows the failed attempts. Filters
// keep the events of other workflows and tags out; the slack format
// sends {"text": ...}; the secret, sealed in the store, appears in no
// log and no answer after its creation.
func TestWebhookDeliveryRetries(t *testing.T) {
	t.Parallel()
	for name, backend := range webhookBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			clk := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
			var logs bytes.Buffer
			var logMu sync.Mutex
			logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var secret string
			rc := newReceiver(t, clk, 3)
			rc.secret = func() string { return secret }
			srv := httptest.NewServer(rc)
			defer srv.Close()
			slack := newReceiver(t, clk, 0)
			var slackSecret string
			slack.secret = func() string { return slackSecret }
			slackSrv := httptest.NewServer(slack)
			defer slackSrv.Close()

			c := startClient(t, ctx, &heph.Config{Store: backend(t)(), Clock: clk, Logger: logger, SecretKeys: secretKeys(t, "k1:1"),
				Webhooks: heph.WebhookConfig{Backoff: time.Minute}},
				func(c *heph.Client) error { return c.Register(webhookFlows(t)...) })
			w, s, err := c.CreateWebhook(ctx, &heph.NewWebhook{URL: srv.URL + "/hook", CreatedBy: "alice",
				Events: []string{heph.WebhookRunStarted, heph.WebhookRunCompleted, heph.WebhookRunFailed, heph.WebhookStepFailed}})
			if err != nil {
				t.Fatal(err)
			}
			secret = s
			if !strings.HasPrefix(secret, "whsec_") || len(secret) != len("whsec_")+43 || !w.Sealed || !w.Enabled || w.Format != "json" {
				t.Fatalf("CreateWebhook = %+v, secret of %d bytes", w, len(secret))
			}
			sw, ss, err := c.CreateWebhook(ctx, &heph.NewWebhook{URL: slackSrv.URL, Format: heph.WebhookFormatSlack,
				Events: []string{heph.WebhookGateOpened, heph.WebhookGateDecided, heph.WebhookRunCompleted}, Workflows: []string{"gated"}})
			if err != nil {
				t.Fatal(err)
			}
			slackSecret = ss
			// Filters that match nothing here.
			if _, _, err := c.CreateWebhook(ctx, &heph.NewWebhook{URL: srv.URL + "/other", Events: heph.WebhookEventTypes(), Tags: []string{"eu"}}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second) // events after the webhooks' creation

			for _, f := range []string{"orders", "refunds"} {
				r, err := c.StartRun(ctx, f, "x", nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.WaitRun(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
			}
			g, err := c.StartRun(ctx, "gated", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			advanceUntil(t, clk, time.Second, func() bool { _, byType := slack.count(); return byType[heph.WebhookGateOpened] == 1 })
			if err := c.ResumeRun(ctx, g.ID, "approved", &heph.ResumeOptions{Payload: map[string]string{"actor": "bob"}}); err != nil {
				t.Fatal(err)
			}
			// orders: started, completed; refunds: started, step failed,
			// failed; gated: started, completed (the slack webhook gets
			// its gate's events).
			advanceUntil(t, clk, 20*time.Second, func() bool { return delivered(t, c, w.ID) == 7 })
			advanceUntil(t, clk, time.Second, func() bool { return delivered(t, c, sw.ID) == 3 })
			_, byType := rc.count()
			want := map[string]int{heph.WebhookRunStarted: 3, heph.WebhookRunCompleted: 2, heph.WebhookRunFailed: 1, heph.WebhookStepFailed: 1}
			for typ, n := range want {
				if byType[typ] != n {
					t.Errorf("%s delivered %d times, want %d (all: %v)", typ, byType[typ], n, byType)
				}
			}
			checkPayloads(t, rc)
			checkSlack(t, slack, g.ID)

			// The delivery log: 7 delivered; the first three attempts
			// failed with 503, and their retries waited.
			list, err := c.WebhookDeliveries(ctx, w.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, d := range list {
				if d.Status != "delivered" || len(d.Log) != d.Attempts {
					t.Errorf("delivery %+v", d)
				}
				for _, a := range d.Log[:len(d.Log)-1] {
					failed++
					if a.StatusCode != 503 || !strings.Contains(a.Error, "try later") || a.NextAttempt.IsZero() {
						t.Errorf("failed attempt %+v", a)
					}
				}
			}
			if n, _ := rc.count(); len(list) != 7 || n != 7 || failed != 3 {
				t.Errorf("%d deliveries (%d received) with %d failed attempts, want 7 and 3", len(list), n, failed)
			}
			if d, err := c.WebhookDeliveries(ctx, sw.ID, &heph.WebhookDeliveryFilter{Status: "pending"}); err != nil || len(d) != 0 {
				t.Errorf("pending slack deliveries = %v, %v", d, err)
			}
			// The secret is in no log and no later answer.
			list2, _ := c.Webhooks(ctx)
			answers, _ := json.Marshal(list2)
			logMu.Lock()
			text := logs.String()
			logMu.Unlock()
			for _, sec := range []string{secret, slackSecret} {
				if strings.Contains(text, sec) || strings.Contains(string(answers), sec) {
					t.Errorf("the secret appears in the logs or in Webhooks()")
				}
			}
		})
	}
}

// delivered counts the deliveries of a webhook that its log shows
// delivered.
func delivered(t *testing.T, c *heph.Client, id string) int {
	t.Helper()
	list, err := c.WebhookDeliveries(context.Background(), id, &heph.WebhookDeliveryFilter{Status: "delivered"})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// checkPayloads checks the json bodies: the run, the step and the error
// of the failure.
func checkPayloads(t *testing.T, rc *receiver) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, b := range rc.bodies {
		var p struct {
			ID, Type, Step, Error, Message string
			Run                            struct{ ID, Workflow string }
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.ID != id || p.Run.ID == "" || p.Message == "" {
			t.Errorf("payload %s", b)
		}
		if p.Type == heph.WebhookStepFailed && (p.Step != "refund" || p.Run.Workflow != "refunds" || !strings.Contains(p.Error, "card declined")) {
			t.Errorf("step.failed payload %s", b)
		}
	}
}

func checkSlack(t *testing.T, rc *receiver, runID string) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	texts := map[string]string{}
	for id, b := range rc.bodies {
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || m["text"] == "" {
			t.Fatalf("slack body %s: %v", b, err)
		}
		texts[rc.events[id]] = m["text"]
	}
	if s := texts[heph.WebhookGateOpened]; !strings.Contains(s, "approve") || !strings.Contains(s, runID) || !strings.Contains(s, "waits for a decision") {
		t.Errorf("gate.opened text %q", s)
	}
	if s := texts[heph.WebhookGateDecided]; !strings.Contains(s, "approved by bob") {
		t.Errorf("gate.decided text %q", s)
	}
}

// A sender stopped between the claim of a delivery and the record of its
// attempt loses nothing: another process sends the delivery, with the
// same id, once the lease ends.
func TestWebhookSenderStoppedMidDelivery(t *testing.T) {
	t.Parallel()
	for name, backend := range webhookBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			open := backend(t)
			clk := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
			rc := newReceiver(t, clk, 0)
			rc.block = true
			var secret string
			rc.secret = func() string { return secret }
			srv := httptest.NewServer(rc)
			defer srv.Close()
			first, err := heph.New(&heph.Config{Store: open(), Clock: clk, Logger: quietLogger(), WorkerID: "first"})
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Register(webhookFlows(t)...); err != nil {
				t.Fatal(err)
			}
			if err := first.Start(ctx); err != nil {
				t.Fatal(err)
			}
			w, s, err := first.CreateWebhook(ctx, &heph.NewWebhook{URL: srv.URL, Events: []string{heph.WebhookRunCompleted}})
			if err != nil {
				t.Fatal(err)
			}
			secret = s
			r, err := first.StartRun(ctx, "orders", "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := first.WaitRun(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			advanceUntil(t, clk, time.Second, func() bool {
				select {
				case <-rc.blocked:
					return true
				default:
					return false
				}
			})
			if err := first.Stop(ctx); err != nil { // cuts the request short
				t.Fatal(err)
			}
			second := startClient(t, ctx, &heph.Config{Store: open(), Clock: clk, Logger: quietLogger(), WorkerID: "second"},
				func(c *heph.Client) error { return c.Register(webhookFlows(t)...) })
			advanceUntil(t, clk, 10*time.Second, func() bool { return delivered(t, second, w.ID) == 1 })
			list, err := second.WebhookDeliveries(ctx, w.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].Status != "delivered" || list[0].Attempts != 1 || list[0].Event != heph.WebhookRunCompleted || list[0].RunID != r.ID {
				t.Fatalf("deliveries = %+v", *list[0])
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if rc.requests != 2 || rc.delivered[list[0].ID] != 1 {
				t.Errorf("%d requests, delivered %v; want the cut one and one more with id %s", rc.requests, rc.delivered, list[0].ID)
			}
		})
	}
}

// Bad input names the field; a test delivery reaches a disabled webhook.
func TestWebhookInputAndTest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
	c := startClient(t, ctx, &heph.Config{Store: openSQLite(t), Clock: clk, Logger: quietLogger()}, func(*heph.Client) error { return nil })
	for _, tc := range []struct {
		w     heph.NewWebhook
		field string
	}{
		{heph.NewWebhook{URL: "ftp://example.com", Events: []string{"run.failed"}}, "url"},
		{heph.NewWebhook{URL: "https://", Events: []string{"run.failed"}}, "url"},
		{heph.NewWebhook{URL: "https://u:p@example.com", Events: []string{"run.failed"}}, "url"},
		{heph.NewWebhook{URL: "https://example.com", Events: []string{"run.exploded"}}, "events"},
		{heph.NewWebhook{URL: "https://example.com"}, "events"},
		{heph.NewWebhook{URL: "https://example.com", Events: []string{"run.failed"}, Format: "xml"}, "format"},
	} {
		_, _, err := c.CreateWebhook(ctx, &tc.w)
		var fe *heph.WebhookInputError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("CreateWebhook(%+v) = %v, want an input error on %s", tc.w, err, tc.field)
		}
	}
	if _, err := c.TestWebhook(ctx, "wh_none"); !errors.Is(err, heph.ErrWebhookNotFound) {
		t.Errorf("TestWebhook of none: %v", err)
	}
	rc := newReceiver(t, clk, 0)
	var secret string
	rc.secret = func() string { return secret }
	srv := httptest.NewServer(rc)
	defer srv.Close()
	w, s, err := c.CreateWebhook(ctx, &heph.NewWebhook{URL: srv.URL, Events: []string{"run.failed"}, Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	secret = s
	if w.Sealed {
		t.Errorf("sealed without a key ring")
	}
	d, err := c.TestWebhook(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	advanceUntil(t, clk, time.Second, func() bool { return delivered(t, c, w.ID) == 1 })
	_, byType := rc.count()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if byType[heph.WebhookTest] != 1 || rc.delivered[d.ID] != 1 {
		t.Errorf("test delivery: %v", byType)
	}
}

func openSQLitePath(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
