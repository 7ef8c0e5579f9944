package server

import (
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

// Webhooks edited through the API, by an admin only: PATCH changes the
// fields it names (null removes a filter), bad input is a 400 naming the
// field; disable and enable flip Enabled; rotate-secret answers a new
// secret once, and the next delivery is signed with it and not with the
// old one; every change is audited with the caller as actor and no
// secret.
func TestWebhooksEditAPI(t *testing.T) {
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

		var created CreatedWebhook
		e.api.call(http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "https://example.com/old", "events": []string{"run.failed"},
			"workflows": []string{"greet"}, "tags": []string{"prod"}}, http.StatusCreated, &created)
		path := "/api/v1/webhooks/" + created.ID

		for _, tok := range []string{op, reader} {
			e.api.do(req{method: http.MethodPatch, path: path, token: tok, body: map[string]any{"format": "slack"}}).problem(t, http.StatusForbidden)
			for _, action := range []string{"/enable", "/disable", "/rotate-secret"} {
				e.api.do(req{method: http.MethodPost, path: path + action, token: tok}).problem(t, http.StatusForbidden)
			}
		}
		for _, tc := range []struct {
			body    any
			field   string
			invalid bool
		}{
			{map[string]any{"url": "ftp://example.com"}, "url", false},
			{map[string]any{"events": []string{}}, "events", false},
			{map[string]any{"events": []string{"run.exploded"}}, "events", false},
			{map[string]any{"format": "teams"}, "format", false},
			{map[string]any{"tags": []string{" "}}, "tags", false},
			{map[string]any{"url": nil}, "url", true},
			{map[string]any{"secret": "mine"}, "secret", true},
			{map[string]any{"enabled": "yes"}, "enabled", true},
			{map[string]any{}, "body", true},
		} {
			p := e.api.do(req{method: http.MethodPatch, path: path, body: tc.body, invalid: tc.invalid, unchecked: !tc.invalid}).problem(t, http.StatusBadRequest)
			if len(p.Errors) != 1 || p.Errors[0].Path != tc.field || !strings.HasPrefix(p.Detail, tc.field+": ") {
				t.Errorf("PATCH %v: %+v, want a problem naming %s", tc.body, p, tc.field)
			}
		}
		e.api.do(req{method: http.MethodPatch, path: "/api/v1/webhooks/wh_none", body: map[string]any{"format": "slack"}}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/webhooks/wh_none/disable"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/webhooks/wh_none/rotate-secret"}).problem(t, http.StatusNotFound)

		var w heph.Webhook
		e.api.call(http.MethodPatch, path, map[string]any{"url": rcv.URL, "events": []string{"run.started", "gate.opened"}, "workflows": nil,
			"format": "json"}, http.StatusOK, &w)
		if w.URL != rcv.URL || strings.Join(w.Events, ",") != "gate.opened,run.started" || len(w.Workflows) != 0 ||
			strings.Join(w.Tags, ",") != "prod" || w.Format != "json" || !w.Enabled || w.CreatedBy != "root" {
			t.Fatalf("after PATCH: %+v", w)
		}
		e.api.call(http.MethodPost, path+"/disable", nil, http.StatusOK, &w)
		if w.Enabled {
			t.Fatalf("after disable: %+v", w)
		}
		e.api.call(http.MethodGet, path, nil, http.StatusOK, &w)
		if w.Enabled {
			t.Fatalf("get after disable: %+v", w)
		}
		e.api.call(http.MethodPost, path+"/enable", nil, http.StatusOK, &w)
		if !w.Enabled {
			t.Fatalf("after enable: %+v", w)
		}

		var rotated CreatedWebhook
		e.api.call(http.MethodPost, path+"/rotate-secret", nil, http.StatusOK, &rotated)
		if rotated.ID != created.ID || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == created.Secret || !rotated.Sealed {
			t.Fatalf("rotated: %+v (old secret %q)", rotated, created.Secret)
		}
		if r := e.api.do(req{method: http.MethodGet, path: path}); strings.Contains(string(r.body), rotated.Secret) {
			t.Fatalf("get after rotation holds the secret: %s", r.body)
		}
		var d heph.WebhookDelivery
		e.api.call(http.MethodPost, path+"/test", nil, http.StatusAccepted, &d)
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the test delivery never reached the receiver")
			}
			time.Sleep(10 * time.Millisecond) // polling for the event, not timing it
		}
		mu.Lock()
		rq, body := got[0], bodies[0]
		mu.Unlock()
		if err := heph.VerifyWebhook(rotated.Secret, rq.Header, body, time.Now(), 5*time.Minute); err != nil {
			t.Errorf("test delivery with the new secret: %v", err)
		}
		if err := heph.VerifyWebhook(created.Secret, rq.Header, body, time.Now(), 5*time.Minute); err == nil {
			t.Errorf("test delivery verifies with the old secret")
		}

		for _, action := range []string{"webhooks.edit", "webhooks.disable", "webhooks.enable", "webhooks.rotate_secret"} {
			e.server.FlushAudit()
			entries, err := e.admin().ListAudit(t.Context(), &store.ListAuditParams{Action: action})
			if err != nil {
				t.Fatal(err)
			}
			ok := 0
			for _, a := range entries {
				if a.Status == http.StatusOK && a.Target == created.ID && a.Actor == "root" {
					ok++
				}
				if strings.Contains(a.Detail+a.Target+a.Path, rotated.Secret) {
					t.Errorf("audit entry %+v holds the secret", a)
				}
			}
			if ok != 1 {
				t.Errorf("%d successful audit entries of %s, want 1", ok, action)
			}
		}
	})
}
