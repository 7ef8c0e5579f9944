package cli_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// heph server --hooks: the endpoints of the YAML file take signed
// deliveries in as events (heph events shows them) and refuse forged
// ones; a bad file stops the server with the file, line and field.
func TestHooksServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ghSecret, ciSecret = "gh-secret-0123456789", "ci-secret-0123456789"
	writeFile(t, dir, "gh.secret", ghSecret+"\n")
	hooks := writeFile(t, dir, "hooks.yaml", `hooks:
  - name: github
    scheme: github
    secret_file: `+filepath.Join(dir, "gh.secret")+`
  - name: ci
    scheme: bearer
    secret_env: CI_HOOK_SECRET
    event: ci.finished
`)
	srv := startServer(t, []string{"HEPH_INSECURE=true", "CI_HOOK_SECRET=" + ciSecret}, "--sqlite", filepath.Join(dir, "heph.db"), "--hooks", hooks)
	c := srv.client(t, "")

	body := []byte(`{"ref":"refs/heads/main","pusher":{"name":"ada"}}`)
	m := hmac.New(sha256.New, []byte(ghSecret))
	m.Write(body)
	post := func(path string, header map[string]string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	gh := map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(m.Sum(nil))}
	if s := post("/hooks/github", gh); s != http.StatusCreated {
		t.Fatalf("signed delivery: %d", s)
	}
	if s := post("/hooks/github", gh); s != http.StatusOK {
		t.Fatalf("redelivery: %d", s)
	}
	gh["X-Hub-Signature-256"] = "sha256=" + strings.Repeat("00", 32)
	gh["X-GitHub-Delivery"] = "d-2"
	if s := post("/hooks/github", gh); s != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d", s)
	}
	if s := post("/hooks/ci", map[string]string{"Authorization": "Bearer " + ciSecret, "Idempotency-Key": "b-1"}); s != http.StatusCreated {
		t.Fatalf("bearer: %d", s)
	}
	lines(t, c.ok("events", "show", "github:d-1"), `^name: +github\.push$`)
	lines(t, c.ok("events", "show", "ci:b-1"), `^name: +ci\.finished$`)
	c.fails(exitNotFound, "not found", "events", "show", "github:d-2")
	if !strings.Contains(srv.log(), "webhook refused") || strings.Contains(srv.log(), "refs/heads/main") {
		t.Errorf("the server's log: %s", srv.log())
	}

	for content, want := range map[string]string{
		"hooks:\n  - name: gh\n    scheme: github\n    secret_env: NOT_SET_ANYWHERE\n": "bad.yaml:2: hook 1: gh: secret_env: $NOT_SET_ANYWHERE is not set",
		"hooks:\n  - name: gh\n    scheme: github\n    secret: inline\n":               `bad.yaml:2: hook 1: line 4: unknown field "secret"`,
		"hooks:\n  - name: gh\n    scheme: gitlab\n    secret_env: HOME\n":             `bad.yaml:2: hook 1: scheme "gitlab"`,
		"hook:\n  - name: gh\n": "field hook not found",
	} {
		bad := writeFile(t, dir, "bad.yaml", content)
		c.fails(exitUsage, want, "server", "--addr", "127.0.0.1:0", "--sqlite", filepath.Join(dir, "other.db"), "--hooks", bad)
	}
}
