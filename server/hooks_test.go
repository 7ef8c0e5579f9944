package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/internal/metrics/metricstest"
)

const hookSecret = "whsec_server_test_0123456789"

func hookMAC(msg string) string {
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func hookFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../internal/hookin/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lockedBuffer collects the server's logs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type hookEnv struct {
	*env
	clk  *clock.Fake
	logs *lockedBuffer
	mr   *sdkmetric.ManualReader
}

func newHookEnv(t *testing.T, b backend) *hookEnv {
	h := &hookEnv{clk: clock.NewFake(time.Now().UTC().Truncate(time.Second)), logs: &lockedBuffer{}, mr: sdkmetric.NewManualReader()}
	h.env = newEnv(t, b, &Config{
		Clock: h.clk, Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.mr)),
		Hooks: []Hook{
			{Name: "github", Scheme: HookSchemeGitHub, Secret: hookSecret},
			{Name: "billing", Scheme: HookSchemeStripe, Secret: hookSecret},
			{Name: "ci", Scheme: HookSchemeBearer, Secret: hookSecret, Event: "ci.finished"},
		},
	})
	return h
}

func (h *hookEnv) metrics() map[string]float64 {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.mr.Collect(context.Background(), &rm); err != nil {
		h.t.Fatal(err)
	}
	return metricstest.Flatten(rm)
}

func (h *hookEnv) post(name string, body []byte, header map[string]string) *resp {
	h.t.Helper()
	return h.api.do(req{method: http.MethodPost, path: "/hooks/" + name, body: body, header: header, token: "-"})
}

// postBad sends a request the hook must refuse, whether or not the
// document's checker can read its body.
func (h *hookEnv) postBad(name string, body []byte, header map[string]string) *resp {
	h.t.Helper()
	return h.api.do(req{method: http.MethodPost, path: "/hooks/" + name, body: body, header: header, token: "-", unchecked: true})
}

func (h *hookEnv) events() int {
	h.t.Helper()
	es, err := h.client.ListEvents(context.Background(), &heph.ListEventsOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(es)
}

// Webhooks in: a GitHub delivery verified, stored as an event and fanned
// out to a trigger; its redelivery stores nothing; forged, missing,
// expired and oversize requests are refused before anything is stored,
// counted, and logged without their bodies.
func TestHooksIn(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		h := newHookEnv(t, b)
		ctx := t.Context()
		if err := h.client.DeclareTriggers(ctx, &heph.Trigger{Name: "greet-pusher", Event: "github.push",
			Target: heph.TargetFlow, TargetName: "greet", Input: `{"name": event.data.pusher.name}`}); err != nil {
			t.Fatal(err)
		}
		push := hookFixture(t, "github_push.json")
		gh := map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": "sha256=" + hookMAC(string(push))}
		r := h.post("github", push, gh)
		var got SentEvent
		r.decode(t, &got)
		if r.status != http.StatusCreated || got.Name != "github.push" || got.ID != "github:d-1" || got.Data != nil {
			t.Fatalf("delivery: %d %s", r.status, r.body)
		}
		ev, err := h.client.GetEvent(ctx, "github:d-1")
		if err != nil || !strings.Contains(string(ev.Data), `"baxterthehacker"`) {
			t.Fatalf("stored event: %+v, %v", ev, err)
		}
		// The redelivery: the same event, nothing written.
		r = h.post("github", push, gh)
		r.decode(t, &got)
		if r.status != http.StatusOK || !got.Duplicate {
			t.Fatalf("redelivery: %d %s", r.status, r.body)
		}
		// The trigger started one run from it (the client's loop, or
		// this dispatch, whichever claims the firing).
		var fs []*heph.TriggerFiring
		for {
			if _, err := h.client.DispatchTriggers(ctx); err != nil {
				t.Fatal(err)
			}
			if fs, err = h.client.EventFirings(ctx, "github:d-1"); err != nil || len(fs) != 1 {
				t.Fatalf("firings %+v, %v", fs, err)
			}
			if fs[0].Status == heph.FiringStarted {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the firing stays %s", fs[0].Status)
			case <-time.After(10 * time.Millisecond):
			}
		}
		h.api.token = h.token("reader", RoleRead)
		if run := h.waitStatus(fs[0].RunID, heph.StatusCompleted); !strings.Contains(string(run.Output), "baxterthehacker") {
			t.Fatalf("run output %s", run.Output)
		}

		const marker = "BODY-MARKER-7f3a"
		forged := []byte(`{"secret_field":"` + marker + `"}`)
		for name, c := range map[string]struct {
			hook   string
			body   []byte
			header map[string]string
			status int
			reason string
		}{
			"forged":      {"github", forged, map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-2", "X-Hub-Signature-256": "sha256=" + hookMAC(string(push))}, 401, "bad_signature"},
			"unsigned":    {"github", forged, map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-3"}, 401, "missing_signature"},
			"api token":   {"ci", forged, map[string]string{"Authorization": "Bearer " + h.token("admin", RoleAdmin)}, 401, "bad_signature"},
			"bad JSON":    {"ci", []byte(`{"a":` + marker), map[string]string{"Authorization": "Bearer " + hookSecret}, 400, "bad_body"},
			"unknown":     {"gitlab", forged, nil, 404, "unknown_hook"},
			"oversize":    {"ci", bytes.Repeat([]byte(" "), heph.MaxEventDataBytes+1), map[string]string{"Authorization": "Bearer " + hookSecret}, 413, "too_large"},
			"no GH event": {"github", forged, map[string]string{"X-Hub-Signature-256": "sha256=" + hookMAC(string(forged))}, 400, "bad_event"},
		} {
			before := h.events()
			p := h.postBad(c.hook, c.body, c.header).problem(t, c.status)
			if strings.Contains(p.Detail, marker) {
				t.Errorf("%s: the problem quotes the body: %s", name, p.Detail)
			}
			if h.events() != before {
				t.Errorf("%s: an event was stored", name)
			}
			hook := c.hook
			if c.reason == "unknown_hook" {
				hook = ""
			}
			if n := h.metrics()[fmt.Sprintf("heph.hooks.refused{hook=%s,reason=%s}", hook, c.reason)]; n < 1 {
				t.Errorf("%s: refused{%s,%s} = %v", name, hook, c.reason, n)
			}
		}
		if logs := h.logs.String(); strings.Contains(logs, marker) || !strings.Contains(logs, "webhook refused") {
			t.Errorf("logs quote a body or say nothing:\n%s", logs)
		}
		m := h.metrics()
		if m["heph.hooks.accepted{duplicate=false,hook=github}"] != 1 || m["heph.hooks.accepted{duplicate=true,hook=github}"] != 1 {
			t.Errorf("accepted counters: %v", m)
		}
	})
}

// Stripe-style deliveries: the signed timestamp bounds replays; a replay
// within the tolerance is the same event (its id); the same delivery
// later is refused as expired.
func TestHooksStripeReplay(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		h := newHookEnv(t, b)
		body := hookFixture(t, "stripe_invoice_paid.json")
		ts := fmt.Sprint(h.clk.Now().Unix())
		sig := map[string]string{"Stripe-Signature": "t=" + ts + ",v1=" + hookMAC(ts+"."+string(body))}
		r := h.post("billing", body, sig)
		var got SentEvent
		r.decode(t, &got)
		if r.status != http.StatusCreated || got.Name != "billing.invoice.paid" || got.ID != "billing:evt_1NG8Du2eZvKYlo2CUI79vXWy" {
			t.Fatalf("delivery: %d %s", r.status, r.body)
		}
		h.clk.Advance(time.Minute)
		if r := h.post("billing", body, sig); r.status != http.StatusOK {
			t.Fatalf("replay within the tolerance: %d %s", r.status, r.body)
		}
		h.clk.Advance(5 * time.Minute)
		p := h.post("billing", body, sig).problem(t, http.StatusUnauthorized)
		if !strings.Contains(p.Detail, "tolerance") {
			t.Errorf("expired: %s", p.Detail)
		}
		// Signed with another secret: refused.
		forged := map[string]string{"Stripe-Signature": "t=" + fmt.Sprint(h.clk.Now().Unix()) + ",v1=" + strings.Repeat("ab", 32)}
		h.post("billing", body, forged).problem(t, http.StatusUnauthorized)
		if n := h.events(); n != 1 {
			t.Fatalf("%d events stored, want 1", n)
		}
		// The bearer hook: a fixed event name, Idempotency-Key as the id.
		auth := map[string]string{"Authorization": "Bearer " + hookSecret, "Idempotency-Key": "build-42"}
		r = h.post("ci", []byte(`{"build":42,"ok":true}`), auth)
		r.decode(t, &got)
		if r.status != http.StatusCreated || got.Name != "ci.finished" || got.ID != "ci:build-42" {
			t.Fatalf("bearer: %d %s", r.status, r.body)
		}
	})
}

// A bad hook configuration is refused by New, naming the hook and field.
func TestHooksConfig(t *testing.T) {
	b := backends()[0]
	c, err := heph.New(&heph.Config{Store: b.open(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c2 := range []struct {
		hooks []Hook
		want  string
	}{
		{[]Hook{{Name: "gh", Scheme: "github", Secret: "short"}}, "Config.Hooks[0] (gh): secret: 5 bytes"},
		{[]Hook{{Name: "gh", Scheme: "gitlab", Secret: hookSecret}}, `scheme "gitlab"`},
		{[]Hook{{Name: "a b", Scheme: "github", Secret: hookSecret}}, `name "a b"`},
		{[]Hook{{Name: "gh", Scheme: "github", Secret: hookSecret}, {Name: "gh", Scheme: "stripe", Secret: hookSecret}}, `Config.Hooks[1]: a hook named "gh" is configured twice`},
	} {
		_, err := New(&Config{Client: c, Store: c.Store(), Hooks: c2.hooks})
		if err == nil || !strings.Contains(err.Error(), c2.want) {
			t.Errorf("%+v: %v, want %q", c2.hooks, err, c2.want)
		}
	}
}
