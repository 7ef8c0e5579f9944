package server

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/store"
)

// payloadChain encrypts with key id (its secret derived from the id).
func payloadChain(t testing.TB, id string) *codec.Chain {
	t.Helper()
	sum := sha256.Sum256([]byte(id))
	ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: []codec.Key{{ID: id, Secret: sum[:]}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := codec.NewAESGCM(ring)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.NewChain(&codec.ChainConfig{Codecs: []codec.Codec{a}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const payloadMark = "PaYlOaD-3c1e"

// On a server that encrypts payloads, a reader (role read) sees
// "encrypted" in place of every payload (run input and output, step
// outputs, history data, published state, schedule input) and is refused
// the history export; an operator sees them all; names, statuses and
// errors are shown to both. A server without the key shows what it
// cannot decode as "encrypted" with the key id, to every role.
func TestPayloadPermission(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		var raw store.Store
		e := newEnvWith(t, b, &Config{}, func(c *heph.Config) { raw, c.PayloadCodec = c.Store, payloadChain(t, "k1") })
		admin := e.token("root", RoleAdmin)
		e.api.token = admin
		reader := e.token("rita", RoleRead)
		operator := e.token("otto", RoleOperator)
		// Reading payloads is a permission of its own: granted to a read
		// token, withheld from an operator token.
		auditor := e.tokenWith(&TokenParams{Name: "audrey", Role: RoleRead, Options: store.TokenOptions{Payloads: PayloadsAllow}})
		blind := e.tokenWith(&TokenParams{Name: "oscar", Role: RoleOperator, Options: store.TokenOptions{Payloads: PayloadsDeny}})
		var r Run
		e.api.callAs(admin, http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": payloadMark}}, http.StatusCreated, &r)
		var w Run
		e.api.callAs(admin, http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 0}, http.StatusCreated, &w)
		e.api.callAs(admin, http.MethodPost, "/api/v1/schedules", map[string]any{"id": "nightly", "target_kind": "flow", "target_name": "greet", "every": "24h", "paused": true, "input": map[string]string{"name": payloadMark}}, http.StatusCreated, nil)
		e.waitStatus(r.ID, heph.StatusCompleted)
		paths := []string{"/api/v1/runs/" + r.ID, "/api/v1/runs/" + r.ID + "/history", "/api/v1/runs/" + r.ID + "/steps", "/api/v1/schedules/nightly", "/api/v1/runs?workflow=greet"}
		for _, p := range paths {
			body := string(e.api.callAs(operator, http.MethodGet, p, nil, http.StatusOK, nil).body)
			if !strings.Contains(body, payloadMark) && !strings.Contains(p, "?") {
				t.Errorf("operator GET %s does not show the payload: %s", p, body)
			}
			if body := string(e.api.callAs(auditor, http.MethodGet, p, nil, http.StatusOK, nil).body); !strings.Contains(body, payloadMark) && !strings.Contains(p, "?") {
				t.Errorf("a read token granted payloads: GET %s does not show the payload: %s", p, body)
			}
			if body := string(e.api.callAs(blind, http.MethodGet, p, nil, http.StatusOK, nil).body); strings.Contains(body, payloadMark) {
				t.Errorf("an operator token denied payloads: GET %s shows the payload: %s", p, body)
			}
			body = string(e.api.callAs(reader, http.MethodGet, p, nil, http.StatusOK, nil).body)
			if strings.Contains(body, payloadMark) {
				t.Errorf("reader GET %s shows the payload: %s", p, body)
			}
			if !strings.Contains(p, "?") && !strings.Contains(body, `"encrypted":true`) {
				t.Errorf("reader GET %s does not say encrypted: %s", p, body)
			}
		}
		var shown Run
		e.api.callAs(reader, http.MethodGet, "/api/v1/runs/"+r.ID, nil, http.StatusOK, &shown)
		if shown.Status != "completed" || shown.Workflow != "greet" || !strings.Contains(string(shown.Output), `"encrypted":true`) {
			t.Errorf("reader sees %+v", shown)
		}
		e.api.callAs(reader, http.MethodGet, "/api/v1/runs/"+w.ID+"/state", nil, http.StatusOK, nil)
		e.api.callAs(reader, http.MethodGet, "/api/v1/runs/"+w.ID+"/history/export", nil, http.StatusForbidden, nil)
		e.api.callAs(auditor, http.MethodGet, "/api/v1/runs/"+w.ID+"/history/export", nil, http.StatusOK, nil)
		e.api.callAs(blind, http.MethodGet, "/api/v1/runs/"+w.ID+"/history/export", nil, http.StatusForbidden, nil)
		if p := e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", token: admin, body: map[string]any{"name": "x", "role": "read", "payloads": "maybe"}, invalid: true}).problem(t, http.StatusBadRequest); !strings.Contains(fmt.Sprint(p), "payloads") {
			t.Errorf("a token with payloads maybe: %+v", p)
		}
		if p := e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", token: admin, body: map[string]any{"name": "w", "role": "worker", "payloads": "deny"}}).problem(t, http.StatusBadRequest); !strings.Contains(fmt.Sprint(p), "worker") {
			t.Errorf("a worker token denied payloads: %+v", p)
		}
		var listed []Token
		e.api.callAs(admin, http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &listed)
		for _, tk := range listed {
			if want := map[string]string{"audrey": PayloadsAllow, "oscar": PayloadsDeny}[tk.Name]; tk.Payloads != want {
				t.Errorf("token %s listed with payloads %q, want %q", tk.Name, tk.Payloads, want)
			}
		}

		// A webhook's deliveries carry payloads in their bodies.
		var created CreatedWebhook
		e.api.callAs(admin, http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"run.failed"}, "enabled": false}, http.StatusCreated, &created)
		e.api.callAs(admin, http.MethodPost, "/api/v1/webhooks/"+created.ID+"/test", nil, http.StatusAccepted, nil)
		deliveries := "/api/v1/webhooks/" + created.ID + "/deliveries"
		if body := string(e.api.callAs(operator, http.MethodGet, deliveries, nil, http.StatusOK, nil).body); !strings.Contains(body, `"body":{`) || strings.Contains(body, `"encrypted":true`) {
			t.Errorf("operator deliveries: %s", body)
		}
		if body := string(e.api.callAs(reader, http.MethodGet, deliveries, nil, http.StatusOK, nil).body); !strings.Contains(body, `"body":{"encrypted":true`) {
			t.Errorf("reader deliveries: %s", body)
		}

		// A server over the same store without the key.
		c2, err := heph.New(&heph.Config{Store: raw, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		plain := serve(t, raw, c2, &Config{})
		for _, tok := range []string{admin, reader} {
			var got Run
			plain.api.callAs(tok, http.MethodGet, "/api/v1/runs/"+r.ID, nil, http.StatusOK, &got)
			if got.Status != "completed" || !strings.Contains(string(got.Input), `"key":"k1"`) || !strings.Contains(string(got.Output), `"encrypted":true`) {
				t.Errorf("a server without the key shows %s / %s", got.Input, got.Output)
			}
		}
		// What the reader sees without encryption: everything.
		plain.api.callAs(reader, http.MethodGet, "/api/v1/runs/"+w.ID+"/history/export", nil, http.StatusOK, nil)
	})
}
