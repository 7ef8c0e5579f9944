package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
)

// Webhooks through the API: created by an admin only, with the caller as
// creator and the secret in the creation's answer only (not in later
// answers nor in the audit log); bad input is a 400 naming the field;
// readers list and read; a test delivery reaches the receiver, validly
// signed, and shows in the delivery log; delete is admin-only.
func TestWebhooksAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, op, reader := e.token("root", RoleAdmin), e.token("op", RoleOperator), e.token("viewer", RoleRead)
		e.api.token = admin
		var mu sync.Mutex
		var got []*http.Request
		var bodies [][]byte
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			got, bodies = append(got, r), append(bodies, body)
			mu.Unlock()
		}))
		defer rcv.Close()

		for _, tc := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"url": "mailto:a@b.c", "events": []string{"run.failed"}}, "url"},
			{map[string]any{"events": []string{"run.failed"}}, "url"},
			{map[string]any{"url": rcv.URL, "events": []string{"run.failed", "run.exploded"}}, "events"},
			{map[string]any{"url": rcv.URL, "events": []string{"run.failed"}, "format": "teams"}, "format"},
		} {
			p := e.api.do(req{method: http.MethodPost, path: "/api/v1/webhooks", body: tc.body, unchecked: true}).problem(t, http.StatusBadRequest)
			if len(p.Errors) != 1 || p.Errors[0].Path != tc.field || !strings.HasPrefix(p.Detail, tc.field+": ") {
				t.Errorf("%v: %+v, want a problem naming %s", tc.body, p, tc.field)
			}
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/webhooks", token: op,
			body: map[string]any{"url": rcv.URL, "events": []string{"run.failed"}}}).problem(t, http.StatusForbidden)

		var created CreatedWebhook
		e.api.call(http.MethodPost, "/api/v1/webhooks", map[string]any{"url": rcv.URL, "events": []string{"gate.opened", "run.failed"},
			"workflows": []string{"greet"}, "format": "slack", "enabled": false}, http.StatusCreated, &created)
		if created.Secret == "" || created.CreatedBy != "root" || created.Enabled || !created.Sealed || created.Format != "slack" {
			t.Fatalf("created %+v", created)
		}
		secret := created.Secret
		var list []heph.Webhook
		r := e.api.do(req{method: http.MethodGet, path: "/api/v1/webhooks", token: reader})
		r.decode(t, &list)
		if r.status != http.StatusOK || len(list) != 1 || list[0].ID != created.ID || strings.Contains(string(r.body), secret) {
			t.Fatalf("list as a reader: %d %s", r.status, r.body)
		}
		r = e.api.do(req{method: http.MethodGet, path: "/api/v1/webhooks/" + created.ID, token: reader})
		if r.status != http.StatusOK || strings.Contains(string(r.body), secret) {
			t.Fatalf("get as a reader: %d %s", r.status, r.body)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/webhooks/wh_none"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/webhooks/" + created.ID + "/test", token: reader}).problem(t, http.StatusForbidden)

		var d heph.WebhookDelivery
		e.api.call(http.MethodPost, "/api/v1/webhooks/"+created.ID+"/test", nil, http.StatusAccepted, &d)
		deadline := time.Now().Add(60 * time.Second)
		var log []heph.WebhookDelivery
		for len(log) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the test delivery never showed as delivered")
			}
			time.Sleep(10 * time.Millisecond) // polling for the state, not timing it
			e.api.call(http.MethodGet, "/api/v1/webhooks/"+created.ID+"/deliveries?status=delivered", nil, http.StatusOK, &log)
		}
		mu.Lock()
		rq, body := got[0], bodies[0]
		mu.Unlock()
		if err := heph.VerifyWebhook(secret, rq.Header, body, time.Now(), 5*time.Minute); err != nil || rq.Header.Get(heph.WebhookIDHeader) != d.ID {
			t.Errorf("test delivery: %v, id %q want %q", err, rq.Header.Get(heph.WebhookIDHeader), d.ID)
		}
		var text map[string]string
		if err := json.Unmarshal(body, &text); err != nil || !strings.Contains(text["text"], "webhook.test") {
			t.Errorf("slack test body %s", body)
		}
		if log[0].ID != d.ID || log[0].Attempts != 1 || len(log[0].Log) != 1 || log[0].Log[0].StatusCode != 200 {
			t.Errorf("delivery log %+v", log[0])
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/webhooks/" + created.ID + "/deliveries?status=late", unchecked: true}).problem(t, http.StatusBadRequest)

		// The audit log names the webhook, never the secret.
		e.server.FlushAudit()
		entries, err := e.admin().ListAudit(t.Context(), &store.ListAuditParams{Action: "webhooks.create"})
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, a := range entries {
			if a.Status == http.StatusCreated && a.Target == created.ID && a.Actor == "root" {
				ok++
			}
			if strings.Contains(a.Detail+a.Target+a.Path, secret) {
				t.Errorf("audit entry %+v holds the secret", a)
			}
		}
		if ok != 1 {
			t.Errorf("%d audit entries of the creation, want 1", ok)
		}
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/webhooks/" + created.ID, token: op}).problem(t, http.StatusForbidden)
		e.api.call(http.MethodDelete, "/api/v1/webhooks/"+created.ID, nil, http.StatusNoContent, nil)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/webhooks/" + created.ID}).problem(t, http.StatusNotFound)
	})
}
