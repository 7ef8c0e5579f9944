package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus"
	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// heph webhooks edit, disable, enable and rotate-secret: edit changes
// only what its flags name, refuses no change and contradicting flags,
// and the server's field errors come through; disable and enable flip
// the webhook; rotate-secret prints a new secret (in JSON with -o json).
func TestWebhooksEditCommands(t *testing.T) {
	t.Parallel()
	env := serveSQLite(t, filepath.Join(t.TempDir(), "h.db"), &hephaestus.Config{}, true)
	code, out, errOut := hephIn(t, env, "", "webhooks", "create", "https://example.com/a", "--event", "run.failed", "--workflow", "orders",
		"--tag", "prod", "-o", "json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var created apiclient.CreatedWebhook
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("create -o json: %s %v", out, err)
	}
	id := created.ID
	show := func() apiclient.Webhook {
		t.Helper()
		code, out, errOut := hephIn(t, env, "", "webhooks", "show", id, "-o", "json")
		var w apiclient.Webhook
		if code != 0 || json.Unmarshal([]byte(out), &w) != nil {
			t.Fatalf("show: %d %s %s", code, out, errOut)
		}
		return w
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "edit", id}, "--url"},
		{[]string{"webhooks", "edit", id, "--tag", "x", "--any-tag"}, "--any-tag"},
		{[]string{"webhooks", "edit", id, "--url", "ftp://x.example"}, "url"},
		{[]string{"webhooks", "edit", id, "--event", "run.exploded"}, "events"},
		{[]string{"webhooks", "edit", id, "--format", "teams"}, "format"},
		{[]string{"webhooks", "edit", "wh_none", "--format", "slack"}, "not found"},
	} {
		if code, _, errOut := hephIn(t, env, "", tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q, want an error naming %s", tc.args, code, errOut, tc.want)
		}
	}
	code, out, errOut = hephIn(t, env, "", "webhooks", "edit", id, "--url", "https://example.com/b", "--event", "gate.opened,run.started",
		"--any-workflow", "-o", "json")
	var w apiclient.Webhook
	if code != 0 || json.Unmarshal([]byte(out), &w) != nil {
		t.Fatalf("edit: %d %s %s", code, out, errOut)
	}
	if w.URL != "https://example.com/b" || strings.Join(w.Events, ",") != "gate.opened,run.started" || len(w.Workflows) != 0 ||
		strings.Join(w.Tags, ",") != "prod" || w.Format != "json" {
		t.Errorf("after edit: %+v", w)
	}
	if code, out, _ = hephIn(t, env, "", "webhooks", "edit", id, "--format", "slack"); code != 0 || !strings.Contains(out, "slack") {
		t.Errorf("edit --format slack: %d %s", code, out)
	}
	if code, out, _ = hephIn(t, env, "", "webhooks", "disable", id); code != 0 || !strings.Contains(out, "disabled") || show().Enabled {
		t.Errorf("disable: %d %s", code, out)
	}
	if code, out, _ = hephIn(t, env, "", "webhooks", "enable", id, "-o", "json"); code != 0 || !strings.Contains(out, `"enabled": true`) || !show().Enabled {
		t.Errorf("enable -o json: %d %s", code, out)
	}
	code, out, _ = hephIn(t, env, "", "webhooks", "rotate-secret", id, "-o", "json")
	var rotated apiclient.CreatedWebhook
	if code != 0 || json.Unmarshal([]byte(out), &rotated) != nil || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == created.Secret {
		t.Fatalf("rotate-secret -o json: %d %s", code, out)
	}
	if code, out, _ = hephIn(t, env, "", "webhooks", "rotate-secret", id); code != 0 || !strings.Contains(out, "secret: whsec_") ||
		strings.Contains(out, rotated.Secret) {
		t.Errorf("rotate-secret: %d %s", code, out)
	}
}
