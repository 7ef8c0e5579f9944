package cli_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/server"
)

// heph versions: list, rule set (pinned, split, field) and clear,
// retire, unretire, delete, with -o json, against a server whose client
// has versions 1 and 2 of flow "billing".
func TestVersionsCLI(t *testing.T) {
	t.Parallel()
	c, st := sqliteClient(t)
	for v := 1; v <= 2; v++ {
		b := flow.New("billing").Version(v)
		flow.Step(b, "charge", func(ctx context.Context, in any) (int, error) { return v, nil })
		if err := c.Register(b.MustBuild()); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(&server.Config{Client: c, Store: st, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	env := map[string]string{cli.EnvAddr: hs.URL, cli.EnvInsecure: "1"}

	wantLines(t, "versions", ok(t, env, "versions", "billing"),
		`^billing: rule none \(the latest version not retired\); latest 2$`, `^VERSION\s+STATE\s+ACTIVE RUNS\s+FINISHED RUNS\s+CHANGED\s+BY$`, `^1\s+active\s+0\s+0\s+-\s+-$`, `^2\s+active\s+0\s+0\s`)
	wantLines(t, "rule set --split", ok(t, env, "versions", "rule", "set", "billing", "--split", "1=90,2=10"), `^version rule of billing: percentage 1=90,2=10$`)
	wantLines(t, "rule set --field", ok(t, env, "versions", "rule", "set", "billing", "--field", "customer.plan", "--map", "enterprise=2", "--default", "1"),
		`^version rule of billing: field customer.plan: enterprise=2, default 1$`)
	out := ok(t, env, "versions", "rule", "set", "billing", "--pinned", "1", "-o", "json")
	var rule hephaestus.VersionRule
	if err := json.Unmarshal([]byte(out), &rule); err != nil || rule.Type != "pinned" || rule.Version != 1 {
		t.Fatalf("rule set -o json: %q", out)
	}
	wantLines(t, "retire", ok(t, env, "versions", "retire", "billing", "2"), `^billing version 2 retired$`)
	out = ok(t, env, "versions", "billing", "-o", "json")
	var vs server.Versions
	if err := json.Unmarshal([]byte(out), &vs); err != nil || vs.Rule == nil || vs.Rule.Version != 1 || vs.Latest != 1 || vs.Versions[1].State != "retired" || vs.Versions[1].ChangedBy != "insecure" {
		t.Fatalf("versions -o json: %s", out)
	}
	wantLines(t, "unretire", ok(t, env, "versions", "unretire", "billing", "2"), `^billing version 2 active again$`)
	wantLines(t, "delete", ok(t, env, "versions", "delete", "billing", "2"), `^billing version 2 deleted$`)
	wantLines(t, "versions after delete", ok(t, env, "versions", "billing"), `^billing: rule pinned 1; latest 1$`, `^1\s+active`)
	if out := ok(t, env, "versions", "billing"); strings.Contains(out, "\n2 ") {
		t.Fatalf("a deleted version listed:\n%s", out)
	}
	wantLines(t, "versions --all", ok(t, env, "versions", "billing", "--all"), `^2\s+deleted\s`)
	wantLines(t, "rule clear", ok(t, env, "versions", "rule", "clear", "billing"), `^version rule of billing cleared$`)

	// Usage errors and server refusals.
	for _, args := range [][]string{
		{"versions", "rule", "set", "billing"},
		{"versions", "rule", "set", "billing", "--pinned", "1", "--split", "1=100"},
		{"versions", "rule", "set", "billing", "--split", "x=100"},
		{"versions", "rule", "set", "billing", "--pinned", "1", "--default", "2"},
		{"versions", "retire", "billing", "zero"},
	} {
		if code, _, _ := hephIn(t, env, "", args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
	code, _, errOut := hephIn(t, env, "", "versions", "rule", "set", "billing", "--split", "1=50,2=40")
	if code == 0 || !strings.Contains(errOut, "split") || !strings.Contains(errOut, "sum to 90") {
		t.Errorf("a bad split: exit %d, %s", code, errOut)
	}
	if code, _, errOut := hephIn(t, env, "", "versions", "rule", "clear", "billing"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("clear again: exit %d, %s", code, errOut)
	}
}
