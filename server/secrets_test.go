package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
)

// testKeys parses a key ring of "id:b" entries, each key 32 bytes of b.
func testKeys(t testing.TB, spec string) *heph.SecretKeys {
	t.Helper()
	var parts []string
	for _, e := range strings.Split(spec, ",") {
		id, b, _ := strings.Cut(e, ":")
		parts = append(parts, id+":"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(b), heph.SecretKeySize)))
	}
	k, err := heph.ParseSecretKeys(strings.Join(parts, ","))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Secrets through the API: set (never echoed), list (names only, to
// readers too), delete, rotate; writes are admin-only and audited by
// name; bad names and values are 400.
func TestSecretsAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, reader := e.token("admin", RoleAdmin), e.token("reader", RoleRead)
		e.api.token = admin
		const value = "sk_live_api_test_value"

		var s Secret
		r := e.api.call(http.MethodPut, "/api/v1/secrets/stripe_key", map[string]string{"value": value}, http.StatusOK, &s)
		if s.Name != "stripe_key" || s.KeyID != "k1" || s.CreatedAt.IsZero() || strings.Contains(string(r.body), value) {
			t.Fatalf("put: %s", r.body)
		}
		e.api.call(http.MethodPut, "/api/v1/secrets/db", map[string]string{"value": "x"}, http.StatusOK, nil)
		var list []Secret
		r = e.api.do(req{method: http.MethodGet, path: "/api/v1/secrets", token: reader})
		r.decode(t, &list)
		if r.status != http.StatusOK || len(list) != 2 || list[0].Name != "db" || list[1].Name != "stripe_key" || strings.Contains(string(r.body), value) {
			t.Fatalf("list as a reader: %d %s", r.status, r.body)
		}
		e.api.do(req{method: http.MethodPut, path: "/api/v1/secrets/x", token: reader, body: map[string]string{"value": "v"}}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/secrets/db", token: reader}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/secrets/rotate", token: reader}).problem(t, http.StatusForbidden)

		// Bad input.
		if p := e.api.do(req{method: http.MethodPut, path: "/api/v1/secrets/1bad", body: map[string]string{"value": "v"}}).problem(t, http.StatusBadRequest); !strings.Contains(p.Detail, `"1bad"`) {
			t.Errorf("bad name: %+v", p)
		}
		e.api.do(req{method: http.MethodPut, path: "/api/v1/secrets/big", body: map[string]string{"value": strings.Repeat("v", store.MaxSecretValue+1)}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/secrets/none"}).problem(t, http.StatusNotFound)

		// Rotation, on a second client whose ring has a new current key.
		c2, err := heph.New(&heph.Config{Store: e.store, Logger: quietLogger(), SecretKeys: testKeys(t, "k2:2,k1:1")})
		if err != nil {
			t.Fatal(err)
		}
		e2 := serve(t, e.store, c2, nil)
		var rot RotateSecretsResult
		e2.api.call(http.MethodPost, "/api/v1/secrets/rotate", nil, http.StatusOK, &rot)
		if rot != (RotateSecretsResult{KeyID: "k2", Rotated: 2, Total: 2}) {
			t.Errorf("rotate: %+v", rot)
		}
		// The first server's ring (k1 only) no longer opens them: rotating
		// there names the key it lacks.
		if p := e.api.do(req{method: http.MethodPost, path: "/api/v1/secrets/rotate"}).problem(t, http.StatusConflict); !strings.Contains(p.Detail, `"k2"`) {
			t.Errorf("rotate with a ring that lacks k2: %+v", p)
		}

		e.api.do(req{method: http.MethodDelete, path: "/api/v1/secrets/db"})
		if r := e.api.do(req{method: http.MethodDelete, path: "/api/v1/secrets/db"}); r.status != http.StatusNotFound {
			t.Errorf("delete again: %d", r.status)
		}

		// The audit log names the secret, never the value.
		e.server.FlushAudit()
		es, err := e.store.(store.Admin).ListAudit(context.Background(), &store.ListAuditParams{Limit: 100, Action: "secrets.set"})
		if err != nil || len(es) == 0 {
			t.Fatalf("audit: %v, %d entries", err, len(es))
		}
		for _, a := range es {
			if strings.Contains(a.Path+a.Target+a.Detail, value) {
				t.Errorf("audit entry holds the value: %+v", a)
			}
		}
		if es[len(es)-1].Target != "stripe_key" {
			t.Errorf("audit target %q, want the name", es[len(es)-1].Target)
		}
	})
}

// A server whose client has no key ring lists secrets but refuses to set
// one (409), saying why.
func TestSecretsWithoutKeys(t *testing.T) {
	b := backends()[0]
	e := newEnv(t, b, nil)
	c, err := heph.New(&heph.Config{Store: e.store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e2 := serve(t, e.store, c, nil)
	p := e2.api.do(req{method: http.MethodPut, path: "/api/v1/secrets/a", body: map[string]string{"value": "v"}}).problem(t, http.StatusConflict)
	if !strings.Contains(p.Detail, "Config.SecretKeys") {
		t.Errorf("put without keys: %+v", p)
	}
	e2.api.call(http.MethodGet, "/api/v1/secrets", nil, http.StatusOK, nil)
}
