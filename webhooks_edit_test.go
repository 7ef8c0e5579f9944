package hephaestus_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
)

// A disabled webhook keeps its pending deliveries without attempting
// them and receives nothing of what happens while it is disabled; once
// enabled, the waiting deliveries are sent, signed with the secret
// rotated in the meantime, and new events flow again. Edits are checked
// field by field; a missing webhook is ErrWebhookNotFound.
func TestWebhookDisableEnableRotate(t *testing.T) {
	t.Parallel()
	for name, backend := range webhookBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			clk := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
			var secretMu sync.Mutex
			var secret string
			setSecret := func(s string) { secretMu.Lock(); secret = s; secretMu.Unlock() }
			rc := newReceiver(t, clk, 2)
			rc.secret = func() string { secretMu.Lock(); defer secretMu.Unlock(); return secret }
			srv := httptest.NewServer(rc)
			defer srv.Close()
			c := startClient(t, ctx, &heph.Config{Store: backend(t)(), Clock: clk, Logger: quietLogger(), SecretKeys: secretKeys(t, "k1:1"),
				Webhooks: heph.WebhookConfig{Backoff: time.Minute}},
				func(c *heph.Client) error { return c.Register(webhookFlows(t)...) })

			for _, tc := range []struct {
				ch    heph.WebhookChange
				field string
			}{
				{heph.WebhookChange{}, "body"},
				{heph.WebhookChange{URL: new("ftp://example.com")}, "url"},
				{heph.WebhookChange{Events: &[]string{}}, "events"},
				{heph.WebhookChange{Events: &[]string{"run.exploded"}}, "events"},
				{heph.WebhookChange{Workflows: &[]string{""}}, "workflows"},
				{heph.WebhookChange{Tags: &[]string{" "}}, "tags"},
				{heph.WebhookChange{Format: new("xml")}, "format"},
			} {
				_, err := c.EditWebhook(ctx, "wh_none", &tc.ch)
				var fe *heph.WebhookInputError
				if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, heph.ErrInvalidInput) {
					t.Errorf("EditWebhook(%+v) = %v, want an input error on %s", tc.ch, err, tc.field)
				}
			}
			if _, err := c.EditWebhook(ctx, "wh_none", &heph.WebhookChange{Format: new("slack")}); !errors.Is(err, heph.ErrWebhookNotFound) {
				t.Errorf("EditWebhook of none: %v", err)
			}
			for what, fn := range map[string]func(context.Context, string) (*heph.Webhook, error){
				"EnableWebhook": c.EnableWebhook, "DisableWebhook": c.DisableWebhook,
			} {
				if _, err := fn(ctx, "wh_none"); !errors.Is(err, heph.ErrWebhookNotFound) {
					t.Errorf("%s of none: %v", what, err)
				}
			}
			if _, _, err := c.RotateWebhookSecret(ctx, "wh_none"); !errors.Is(err, heph.ErrWebhookNotFound) {
				t.Errorf("RotateWebhookSecret of none: %v", err)
			}

			w, s, err := c.CreateWebhook(ctx, &heph.NewWebhook{URL: srv.URL + "/old", Events: []string{heph.WebhookRunFailed}})
			if err != nil {
				t.Fatal(err)
			}
			setSecret(s)
			w, err = c.EditWebhook(ctx, w.ID, &heph.WebhookChange{URL: new(srv.URL + "/hook"),
				Events: &[]string{heph.WebhookRunStarted, heph.WebhookRunCompleted}})
			if err != nil || w.URL != srv.URL+"/hook" || len(w.Events) != 2 || !w.Enabled {
				t.Fatalf("EditWebhook = %+v, %v", w, err)
			}
			clk.Advance(time.Second) // events after the webhook's creation
			run := func() {
				t.Helper()
				r, err := c.StartRun(ctx, "orders", "x", nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.WaitRun(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
			}
			// Both deliveries of the first run fail once and wait for
			// their retry.
			run()
			pending := func() []*heph.WebhookDelivery {
				t.Helper()
				list, err := c.WebhookDeliveries(ctx, w.ID, &heph.WebhookDeliveryFilter{Status: "pending"})
				if err != nil {
					t.Fatal(err)
				}
				return list
			}
			advanceUntil(t, clk, time.Second, func() bool {
				list := pending()
				return len(list) == 2 && list[0].Attempts == 1 && list[1].Attempts == 1
			})
			if w, err = c.DisableWebhook(ctx, w.ID); err != nil || w.Enabled {
				t.Fatalf("DisableWebhook = %+v, %v", w, err)
			}
			run() // nothing of it reaches the disabled webhook
			// Far past the retries' backoff, a test delivery (sent even to a
			// disabled webhook, due after the waiting ones) is delivered:
			// the claim that took it passed the waiting ones over.
			clk.Advance(30 * time.Minute)
			if _, err := c.TestWebhook(ctx, w.ID); err != nil {
				t.Fatal(err)
			}
			advanceUntil(t, clk, time.Second, func() bool { return delivered(t, c, w.ID) == 1 })
			if list := pending(); len(list) != 2 || list[0].Attempts != 1 || list[1].Attempts != 1 {
				t.Fatalf("pending deliveries of the disabled webhook = %+v, want both, not attempted again", list)
			}
			w2, s2, err := c.RotateWebhookSecret(ctx, w.ID)
			if err != nil || s2 == s || len(s2) != len(s) || !w2.Sealed || w2.Enabled {
				t.Fatalf("RotateWebhookSecret = %+v, %q, %v", w2, s2, err)
			}
			setSecret(s2)
			if w, err = c.EnableWebhook(ctx, w.ID); err != nil || !w.Enabled {
				t.Fatalf("EnableWebhook = %+v, %v", w, err)
			}
			advanceUntil(t, clk, 20*time.Second, func() bool { return delivered(t, c, w.ID) == 3 })
			run()
			advanceUntil(t, clk, 20*time.Second, func() bool { return delivered(t, c, w.ID) == 5 })
			all, err := c.WebhookDeliveries(ctx, w.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n, byType := rc.count(); len(all) != 5 || n != 5 || byType[heph.WebhookRunStarted] != 2 || byType[heph.WebhookRunCompleted] != 2 ||
				byType[heph.WebhookTest] != 1 {
				t.Errorf("%d deliveries, %d received (%v), want 5: the run while disabled sends nothing", len(all), n, byType)
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if rc.badSigs != 0 {
				t.Errorf("%d requests with a bad signature", rc.badSigs)
			}
		})
	}
}
