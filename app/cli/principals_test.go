package cli_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// gatedDoc has an approval gate for the group finance.
const gatedDoc = `name: gated
steps:
  review:
    approval: {prompt: "Pay?", assignees: {groups: [finance]}}
    on: {approved: done, rejected: done}
`

// Principals through the CLI: tokens create --user makes the principal
// with its groups, principals ls lists them (-o json too), set-groups and
// disable change them; an approver of the gate's group approves it, the
// admin is refused with how to make such a token, and a resume of the
// gate is refused.
func TestPrincipalsCLI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "heph.db")
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := hephaestus.New(&hephaestus.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDocument(ctx, "gated", hephaestus.DocumentYAML, []byte(gatedDoc)); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctx, flowdoc.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	srv, err := server.New(&server.Config{Client: c, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	_, _, root, err := server.NewToken(ctx, st, &server.TokenParams{Principal: "root", Role: server.RoleAdmin}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	as := func(token string) map[string]string {
		return map[string]string{cli.EnvAddr: hs.URL, cli.EnvToken: token}
	}
	admin := as(root)

	out := ok(t, admin, "tokens", "create", "--user", "alice", "--groups", "finance", "--role", "approver")
	wantLines(t, "tokens create --user", out, `^token alice: principal alice \(user, groups finance\), role approver, id \S+$`)
	alice := secretRE.FindStringSubmatch(out)[1]
	ok(t, admin, "tokens", "create", "py", "--service", "--role", "worker", "--queues", "payments", "--handlers", "charge")
	wantLines(t, "tokens ls", ok(t, admin, "tokens", "ls"), `\spy\s+py\s+worker\s+queues=payments handlers=charge\s`)
	if code, _, errOut := heph(t, admin, "tokens", "create", "--role", "read"); code != cli.ExitUsage || !strings.Contains(errOut, "--user") {
		t.Errorf("tokens create without a name: exit %d, %s", code, errOut)
	}
	wantLines(t, "principals ls", ok(t, admin, "principals", "ls"), `^NAME\s+KIND\s+GROUPS`, `^alice\s+user\s+finance\s`, `^py\s+service\s+none\s`, `^root\s+user\s+none\s`)
	var ps []server.Principal
	if err := json.Unmarshal([]byte(ok(t, admin, "principals", "ls", "-o", "json")), &ps); err != nil || len(ps) != 3 || ps[0].Name != "alice" {
		t.Fatalf("principals ls -o json: %+v, %v", ps, err)
	}

	r, err := c.StartDocument(ctx, "gated", 0, map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == hephaestus.StatusWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate does not wait: %s", got.Status)
		}
		<-time.After(5 * time.Millisecond)
	}
	code, _, errOut := heph(t, admin, "approve", r.ID, "review")
	if code == 0 || !strings.Contains(errOut, "heph tokens create --user <name> --groups finance --role approver") {
		t.Errorf("the admin approves the finance gate: exit %d, %s", code, errOut)
	}
	code, _, errOut = heph(t, admin, "resume", r.ID, "approved", "--step", "review", "--payload", `{"actor": "alice"}`)
	if code != cli.ExitConflict || !strings.Contains(errOut, "heph approve/heph reject") {
		t.Errorf("a resume of the gate: exit %d, %s", code, errOut)
	}
	wantLines(t, "approve as alice", ok(t, as(alice), "approve", r.ID, "review"), `approved by alice$`)

	wantLines(t, "set-groups", ok(t, admin, "principals", "set-groups", "alice", "finance,ops"), `^principal alice: groups finance,ops$`)
	wantLines(t, "disable", ok(t, admin, "principals", "disable", "alice"), `^principal alice disabled`)
	if code, _, errOut := heph(t, as(alice), "approvals"); code != cli.ExitAuth || !strings.Contains(errOut, "revoked") {
		t.Errorf("a disabled principal's token: exit %d, %s", code, errOut)
	}
	var list []server.Principal
	if err := json.Unmarshal([]byte(ok(t, admin, "principals", "ls", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(list, func(p server.Principal) bool { return p.Name == "alice" }); i < 0 || list[i].DisabledAt == nil || !slices.Equal(list[i].Groups, []string{"finance", "ops"}) {
		t.Errorf("alice after disable: %+v", list)
	}
}
