package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/app/demo"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// demoServer serves the API (insecure) over a started client with the
// examples of heph server --examples registered, on an SQLite store, and
// returns the client and the CLI's environment for it.
func demoServer(t *testing.T) (*hephaestus.Client, map[string]string) {
	t.Helper()
	ctx := t.Context()
	c, st := sqliteClient(t)
	reg := flowdoc.NewRegistry()
	if err := demo.Register(ctx, c, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c, serveAPI(t, c, st)
}

// waitHistory waits (up to a minute) until the run's exported history
// holds n events of kind.
func waitHistory(t *testing.T, c *hephaestus.Client, runID, kind string, n int) []byte {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := c.ExportHistory(t.Context(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(b, []byte(`"kind": "`+kind+`"`)) >= n {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no %d %s events in a minute:\n%s", runID, n, kind, b)
		}
		_, _ = c.HistoryAfter(t.Context(), runID, 0, 100*time.Millisecond)
	}
}

// heph replay, over the example workflows: histories exported with heph
// history export replay; one whose recorded activity differs from the
// code fails the command (exit 1) with both source lines and the counts,
// in a table and with -o json; --query replays the server's runs in
// flight; a file that is not a history fails naming the file.
func TestReplayCLI(t *testing.T) {
	t.Parallel()
	c, env := demoServer(t)
	run, err := hephaestus.StartWorkflow(t.Context(), c, demo.OnboardingWorkflow, demo.Signup{Customer: "ada", Email: "ada@example.com", Region: "eu"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitHistory(t, c, run.ID, "step_completed", 2) // both activities done: it waits for activate

	dir := t.TempDir()
	wantLines(t, "export", ok(t, env, "history", "export", run.ID, "--dir", dir), `^wrote 1 histories to `+regexp.QuoteMeta(dir)+`$`)
	good := filepath.Join(dir, run.ID+".json")
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// The same history, as if recorded by code that created the account
	// with another activity.
	bad := filepath.Join(dir, "changed.json")
	changed := strings.Replace(string(b), `"name": "example.create_account"`, `"name": "example.open_account"`, 1)
	if changed == string(b) {
		t.Fatalf("the history has no example.create_account activity:\n%s", b)
	}
	if err := os.WriteFile(bad, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := heph(t, env, "replay", "--histories", dir)
	if code != cli.ExitFailure {
		t.Fatalf("replay of a diverging history: exit %d, want 1\n%s%s", code, out, errOut)
	}
	line := `demo/onboarding\.go:\d+`
	wantLines(t, "replay", out,
		`^SOURCE\s+WORKFLOW\s+RUN\s+OUTCOME$`,
		`^`+regexp.QuoteMeta(bad)+`\s+example\.onboarding\s+`+run.ID+`\s+diverged$`,
		`^`+regexp.QuoteMeta(good)+`\s+example\.onboarding\s+`+run.ID+`\s+ok$`,
		`^`+regexp.QuoteMeta(bad)+`: workflow "example.onboarding" \(run `+run.ID+`\) is not deterministic: .*activity name changed from "example.open_account" to "example.create_account"`,
		`^  recorded at: `+line+`$`, `^  new code at: .*`+line+`$`,
		`^2 replayed, 1 diverged, 0 failed$`)

	code, out, _ = heph(t, env, "replay", "--histories", dir, "-o", "json")
	var rep struct {
		Replayed, Diverged, Failed int
		Results                    []struct {
			Source, Outcome, Error string
			RecordedAt             string `json:"recorded_at"`
			CommandAt              string `json:"command_at"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != cli.ExitFailure {
		t.Fatalf("replay -o json: exit %d, %v:\n%s", code, err, out)
	}
	// In file name order: the run's id (a UUID v7, 01…) before "changed".
	if rep.Replayed != 2 || rep.Diverged != 1 || rep.Failed != 0 || len(rep.Results) != 2 || rep.Results[1].Source != bad ||
		rep.Results[1].Outcome != "diverged" || !regexp.MustCompile(line).MatchString(rep.Results[1].RecordedAt) ||
		!regexp.MustCompile(line).MatchString(rep.Results[1].CommandAt) || rep.Results[0].Outcome != "ok" || rep.Results[0].Source != good {
		t.Errorf("replay -o json: %+v", rep)
	}

	// The runs in flight on the server, and standard input.
	wantLines(t, "replay --query", ok(t, env, "replay", "--query", "workflow=example.onboarding"),
		`^run `+run.ID+`\s+example\.onboarding\s+`+run.ID+`\s+ok$`, `^1 replayed, 0 diverged, 0 failed$`)
	code, out, _ = hephIn(t, env, changed, "replay", "--histories", "-")
	if code != cli.ExitFailure || !strings.Contains(out, "stdin: workflow \"example.onboarding\"") {
		t.Errorf("replay of standard input: exit %d\n%s", code, out)
	}
	if code, out, _ := heph(t, env, "replay", "--query", "workflow=example.onboarding status=completed"); code != 0 || !strings.Contains(out, "0 replayed, 0 diverged, 0 failed") {
		t.Errorf("replay --query of no run: exit %d\n%s", code, out)
	}

	// Bad input.
	notHistory := writeFile(t, "notes.json", `{"events": [], "last": 0}`)
	notJSON := writeFile(t, "notes.txt", "hello")
	code, out, _ = heph(t, env, "replay", "--histories", notHistory, "--histories", notJSON, "--histories", filepath.Join(dir, "missing.json"))
	if code != cli.ExitFailure {
		t.Errorf("replay of bad files: exit %d\n%s", code, out)
	}
	wantLines(t, "replay of bad files", out,
		`^`+regexp.QuoteMeta(notHistory)+`: history 1: not a history export: "workflow" is missing`,
		`^`+regexp.QuoteMeta(notJSON)+`: history 1: not JSON: invalid character`,
		`^`+regexp.QuoteMeta(filepath.Join(dir, "missing.json"))+`: .*no such file or directory$`,
		`^0 replayed, 0 diverged, 3 failed$`)
	for _, args := range [][]string{{"replay"}, {"replay", "--query", "flavor=x"}, {"replay", "--query", "status=bogus"}, {"replay", "--query", "workflow"},
		{"history", "export"}, {"history", "export", run.ID, "--query", "workflow=x"}} {
		if code, out, errOut := heph(t, env, args...); code != cli.ExitUsage {
			t.Errorf("heph %v: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
	}
	if code, _, errOut := heph(t, env, "history", "export", "no-such-run"); code != cli.ExitNotFound {
		t.Errorf("export of no run: exit %d\n%s", code, errOut)
	}
}

// A worker program mounts cli.ReplayCommand over its own workflows: a
// history of the deployed code replays against it, and fails against a
// change.
func TestReplayCommandMounted(t *testing.T) {
	t.Parallel()
	c, env := demoServer(t)
	run, err := hephaestus.StartWorkflow(t.Context(), c, demo.WorkspaceWorkflow, demo.WorkspaceRequest{Account: "a", Plan: "free", Region: "eu"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := run.Get(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ok(t, env, "history", "export", run.ID, "--dir", dir)

	mounted := func(ws ...hephaestus.Workflow) (int, string) {
		cmd := cli.ReplayCommand(ws...)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--histories", dir})
		return cli.ExitCode(cmd.ExecuteContext(t.Context())), out.String()
	}
	if code, out := mounted(demo.WorkspaceWorkflow); code != 0 || !strings.Contains(out, "1 replayed, 0 diverged, 0 failed") {
		t.Errorf("the deployed code: exit %d\n%s", code, out)
	}
	changed := workflow.New(demo.Workspace, func(ctx workflow.Context, w demo.WorkspaceRequest) (string, error) {
		if err := workflow.Sleep(ctx, time.Hour); err != nil { // a timer before the activity
			return "", err
		}
		return "", nil
	})
	code, out := mounted(changed)
	if code != cli.ExitFailure || !strings.Contains(out, "1 replayed, 1 diverged, 0 failed") ||
		!regexp.MustCompile(`(?m)^  recorded at: demo/onboarding\.go:\d+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  new code at: .*replay_test\.go:\d+$`).MatchString(out) {
		t.Errorf("a changed workflow: exit %d\n%s", code, out)
	}
}
