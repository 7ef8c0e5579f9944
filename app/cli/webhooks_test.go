package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// heph webhooks: create prints the secret once, ls/show never; bad input
// is refused naming the flag's field; test sends a delivery that the
// delivery log then shows; rm deletes; -o json everywhere.
func TestWebhooksCommands(t *testing.T) {
	t.Parallel()
	env := serveSQLite(t, filepath.Join(t.TempDir(), "h.db"), &hephaestus.Config{}, true)
	var mu sync.Mutex
	got := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got++
		mu.Unlock()
	}))
	defer rcv.Close()

	code, _, errOut := hephIn(t, env, "", "webhooks", "create", "ftp://x.example", "--event", "run.failed")
	if code == 0 || !strings.Contains(errOut, "url") {
		t.Errorf("create with a bad url: %d %q", code, errOut)
	}
	code, _, errOut = hephIn(t, env, "", "webhooks", "create", rcv.URL, "--event", "run.exploded")
	if code == 0 || !strings.Contains(errOut, "events") || !strings.Contains(errOut, "run.exploded") {
		t.Errorf("create with an unknown event: %d %q", code, errOut)
	}
	code, out, errOut := hephIn(t, env, "", "webhooks", "create", rcv.URL, "--event", "run.failed,gate.opened", "--workflow", "orders", "-o", "json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var created apiclient.CreatedWebhook
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Secret == "" || len(created.Events) != 2 {
		t.Fatalf("create -o json: %s %v", out, err)
	}
	code, out, _ = hephIn(t, env, "", "webhooks", "ls")
	if code != 0 || !strings.Contains(out, created.ID) || strings.Contains(out, created.Secret) {
		t.Errorf("ls: %d %s", code, out)
	}
	code, out, _ = hephIn(t, env, "", "webhooks", "show", created.ID, "-o", "json")
	if code != 0 || !strings.Contains(out, `"orders"`) || strings.Contains(out, created.Secret) {
		t.Errorf("show: %d %s", code, out)
	}
	code, out, _ = hephIn(t, env, "", "webhooks", "test", created.ID)
	if code != 0 || !strings.Contains(out, "test delivery whd_") {
		t.Errorf("test: %d %s", code, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, _ = hephIn(t, env, "", "webhooks", "deliveries", created.ID, "--status", "delivered", "-o", "json")
		var list []apiclient.WebhookDelivery
		if code == 0 && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 {
			if list[0].Event != "webhook.test" || list[0].Attempts != 1 {
				t.Errorf("deliveries: %s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test delivery never showed as delivered: %d %s", code, out)
		}
		time.Sleep(10 * time.Millisecond) // polling for the state, not timing it
	}
	code, out, _ = hephIn(t, env, "", "webhooks", "deliveries", created.ID)
	if code != 0 || !strings.Contains(out, "webhook.test") || !strings.Contains(out, "delivered") {
		t.Errorf("deliveries table: %d %s", code, out)
	}
	if code, _, errOut = hephIn(t, env, "", "webhooks", "deliveries", created.ID, "--status", "late"); code == 0 || !strings.Contains(errOut, "--status") {
		t.Errorf("deliveries --status late: %d %q", code, errOut)
	}
	if code, out, _ = hephIn(t, env, "", "webhooks", "rm", created.ID); code != 0 || !strings.Contains(out, "deleted") {
		t.Errorf("rm: %d %s", code, out)
	}
	if code, _, errOut = hephIn(t, env, "", "webhooks", "show", created.ID); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("show after rm: %d %q", code, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != 1 {
		t.Errorf("the receiver got %d requests, want 1", got)
	}
}
