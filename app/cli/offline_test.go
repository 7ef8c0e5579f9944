package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/hephaestus-go/hephaestus/app/cli"
)

const goodDoc = `name: review
steps:
  fetch:
    action: http_get
    args: {url: "{{input.url}}"}
    branch:
      - if: result.size > 10
        then: [summarize, tag]
      - else: skip
  summarize:
    action: llm
    next: publish
  tag:
    action: tagger
    next: publish
  publish:
    action: post
    join: publish_done
  publish_done:
    action: notify
    done: true
  skip:
    action: notify
    done: true
`

// badDoc has two problems the compiler reports at once.
const badDoc = `name: broken
steps:
  a:
    action: x
    next: nowhere
  b:
    action: y
    args: {v: "{{steps.zzz.output}}"}
    done: true
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestValidateOffline(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "good.yaml", goodDoc)
	bad := writeFile(t, "bad.yaml", badDoc)
	research := filepath.Join("..", "..", "examples", "documents", "research.yaml")

	wantLines(t, "valid", ok(t, nil, "validate", good, research), `^.*good.yaml: valid \(flow review, 6 steps\)$`, `research.yaml: valid \(flow research, 4 steps\)$`)

	code, out, errOut := heph(t, nil, "validate", good, bad)
	if code != cli.ExitFailure || !strings.Contains(errOut, "1 of 2 documents invalid") {
		t.Fatalf("validate bad: exit %d, %s", code, errOut)
	}
	wantLines(t, "invalid", out, `good.yaml: valid`, `bad.yaml:5:11: steps.a.next: .*nowhere`, `bad.yaml:8:\d+: .*zzz`)

	code, out, _ = heph(t, nil, "validate", bad, "-o", "json")
	var res []struct {
		File   string
		Valid  bool
		Errors []struct {
			Line, Column  int
			Path, Message string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("validate -o json: exit %d, %v:\n%s", code, err, out)
	}
	if len(res) != 1 || res[0].Valid || len(res[0].Errors) < 2 || res[0].Errors[0].Line != 5 || res[0].Errors[0].Path != "steps.a.next" {
		t.Fatalf("validate -o json: %+v", res)
	}

	// A file that is not there, or not YAML.
	if code, _, errOut := heph(t, nil, "validate", filepath.Join(t.TempDir(), "none.yaml")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("validate of a missing file: exit %d, %s", code, errOut)
	}
	junk := writeFile(t, "junk.json", `{"name": `)
	if code, out, _ := heph(t, nil, "validate", junk); code != 1 || !strings.Contains(out, "junk.json:1:") {
		t.Fatalf("validate of broken JSON: exit %d, %s", code, out)
	}
	if code, _, _ := heph(t, nil, "validate"); code != cli.ExitUsage {
		t.Fatalf("validate without a file: exit %d", code)
	}
}

func TestGraphOffline(t *testing.T) {
	t.Parallel()
	good := writeFile(t, "good.yaml", goodDoc)

	text := ok(t, nil, "graph", good)
	want := `review v1
[ ] fetch
      branch-0 -> summarize
      branch-0 -> tag
      else -> skip
  [ ] summarize
        ok -> publish
  [ ] tag
        ok -> publish
  [ ] skip
        ok -> (done)
    [ ] publish
          ok -> publish_done
      [ ] publish_done
            ok -> (done)
`
	if text != want {
		t.Errorf("graph text:\n%s\nwant:\n%s", text, want)
	}
	wantLines(t, "mermaid", ok(t, nil, "graph", good, "--format", "mermaid"), `^flowchart TD$`, `"fetch"`)
	wantLines(t, "dot", ok(t, nil, "graph", good, "--format", "dot"), `^digraph `, `"fetch" -> "summarize"`)

	var g struct {
		Flow  string
		Nodes []struct{ ID, Kind string }
		Edges []struct{ From, To, Event string }
	}
	for _, args := range [][]string{{"--format", "json"}, {"-o", "json"}} {
		out := ok(t, nil, append([]string{"graph", good}, args...)...)
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("graph %v: %v\n%s", args, err, out)
		}
		if g.Flow != "review" || len(g.Nodes) != 8 || g.Nodes[0].Kind != "start" || g.Nodes[7].Kind != "done" || len(g.Edges) != 9 {
			t.Fatalf("graph %v: %+v", args, g)
		}
	}

	bad := writeFile(t, "bad.yaml", badDoc)
	code, out, errOut := heph(t, nil, "graph", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, "bad.yaml:5:11: steps.a.next") {
		t.Fatalf("graph of a bad document: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := heph(t, nil, "graph", good, "--format", "png"); code != 2 || !strings.Contains(errOut, "--format") {
		t.Fatalf("graph --format png: exit %d, %s", code, errOut)
	}
	if code, _, _ := heph(t, nil, "graph", good, "--version", "2"); code != 2 {
		t.Fatalf("graph --version offline: exit %d", code)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	// Every one is refused before any request: --addr points nowhere.
	env := map[string]string{cli.EnvAddr: "http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bogus"}, "unknown command"},
		{[]string{"schedules", "bogus"}, "unknown command"},
		{[]string{"ls", "--bogus"}, "unknown flag"},
		{[]string{"ls", "extra"}, "unknown command"},
		{[]string{"ls", "-o", "yaml"}, "-o must be table or json"},
		{[]string{"ls", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"ls", "--status", "sleeping"}, "not a run status"},
		{[]string{"ls", "--since", "yesterday"}, "--since"},
		{[]string{"ls", "--meta", "novalue"}, "key=value"},
		{[]string{"ls", "--limit", "-1"}, "--limit"},
		{[]string{"start"}, "accepts 1 arg"},
		{[]string{"start", "f", "--kind", "cron"}, "--kind must be one of"},
		{[]string{"start", "f", "--input", "{not json"}, "--input is not valid JSON"},
		{[]string{"start", "f", "--input", "-"}, "no standard input"},
		{[]string{"show"}, "accepts 1 arg"},
		{[]string{"result", "r", "--wait", "-1s"}, "--wait must not be negative"},
		{[]string{"signal", "r"}, "accepts 2 arg"},
		{[]string{"update", "r", "u", "--wait-for", "never"}, "--wait-for"},
		{[]string{"query", "r", "--args", "{}"}, "--args needs a query name"},
		{[]string{"cancel"}, "--all-matching"},
		{[]string{"cancel", "r", "--status", "failed"}, "not both"},
		{[]string{"retry", "r", "--all-matching"}, "not both"},
		{[]string{"schedules", "create", "s", "--cron", "* * * * *"}, "--name is required"},
		{[]string{"schedules", "create", "s", "--name", "f"}, "give --cron or --every"},
		{[]string{"schedules", "create", "s", "--name", "f", "--cron", "x", "--every", "1m"}, "not both"},
		{[]string{"schedules", "create", "s", "--name", "f", "--every", "soon"}, "not a duration"},
		{[]string{"schedules", "backfill", "s", "--from", "2025-01-02"}, "--from and --to are required"},
		{[]string{"schedules", "backfill", "s", "--from", "2025-01-02", "--to", "2025-01-01"}, "before --from"},
		{[]string{"schedules", "next", "s", "-n", "0"}, "-n must be positive"},
		{[]string{"queues", "set", "q", "--rate", "fast"}, "want N/period"},
		{[]string{"queues", "set", "q", "--rate", "10/often"}, "not a duration"},
		{[]string{"queues", "set", "q", "--weight", "vip=0"}, "--weight"},
		{[]string{"tokens", "create", "x", "--role", "root"}, "--role must be"},
		{[]string{"operations", "--wait"}, "--wait needs an operation id"},
		{[]string{"ls", "--addr", "ftp://x"}, "--addr"},
	} {
		code, _, errOut := heph(t, env, tc.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("heph %v: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.msg)
		}
	}
}

func TestUnreadableInput(t *testing.T) {
	t.Parallel()
	code, _, errOut := heph(t, nil, "start", "f", "--input", "@"+filepath.Join(t.TempDir(), "in.json"))
	if code != cli.ExitFailure || !strings.Contains(errOut, "read --input") {
		t.Fatalf("start --input @missing: exit %d, %s", code, errOut)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	env := map[string]string{cli.EnvAddr: "http://127.0.0.1:1"}
	for _, args := range [][]string{{"ls"}, {"show", "r"}, {"start", "f"}, {"workers"}, {"graph", "f", "--remote"}} {
		code, _, errOut := heph(t, env, args...)
		if code != cli.ExitUnreachable || !strings.Contains(errOut, "server unreachable") {
			t.Errorf("heph %v: exit %d, %q", args, code, errOut)
		}
	}
}

func TestHelpListsExitCodes(t *testing.T) {
	t.Parallel()
	wantLines(t, "help", ok(t, nil, "--help"), `^Exit codes:$`, `^  2  usage error`, `^  6  server unreachable$`, `HEPH_TOKEN`)
	// The token never shows in help, even when set.
	if out := ok(t, map[string]string{cli.EnvToken: "s3cret"}, "ls", "--help"); strings.Contains(out, "s3cret") {
		t.Fatal("help prints the token")
	}
}

func TestBench(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := ok(t, nil, "bench", "--workloads", "b,jobs", "--engines", "flows", "--jobs", "200", "--batch", "50", "--workers", "8", "--raw", "20ms", "--sqlite-dir", dir)
	wantLines(t, "bench", out, `^raw reference: SQLite one-row commits/s \d+$`,
		`^\(b\) one-step start-to-result ms, p50 / p90 / p99\s+sqlite\s+flows\s+[\d.]+ / [\d.]+ / [\d.]+\s+[\d.]+$`,
		`^jobs/s; insert-to-completion ms, p50 / p99\s+sqlite\s+jobs\s+\d+; [\d.]+ / [\d.]+\s+\d+$`)
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("bench left %v in its directory (%v)", entries, err)
	}

	out = ok(t, nil, "bench", "--workloads", "c", "--engines", "workflows", "--raw", "0s", "--sqlite-dir", dir, "-o", "json")
	var res struct {
		References map[string]float64
		Results    []struct {
			Workload, Backend, Engine string
			Median                    struct {
				P50ms float64 `json:"p50_ms"`
			}
			Rounds []json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, out)
	}
	if len(res.References) != 0 || len(res.Results) != 1 || res.Results[0].Workload != "c" || res.Results[0].Engine != "workflows" || res.Results[0].Median.P50ms <= 0 || len(res.Results[0].Rounds) != 1 {
		t.Fatalf("bench -o json: %+v", res)
	}

	for _, args := range [][]string{{"--workloads", "d"}, {"--engines", "dbos"}, {"--backends", "mysql"}, {"--backends", "postgres"}, {"--rounds", "0"}, {"--sqlite-sync", "OFF"}} {
		if code, _, _ := heph(t, nil, append([]string{"bench"}, args...)...); code != cli.ExitUsage {
			t.Errorf("bench %v: exit %d, want 2", args, code)
		}
	}
}

// TestDocsCoverEveryCommand checks that docs/cli.md shows every command
// in an example, and every exit code.
func TestDocsCoverEveryCommand(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := string(b)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.HasParent() && !c.HasSubCommands() && !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(c.CommandPath())+`( |$)`).MatchString(docs) {
			t.Errorf("docs/cli.md has no example of %q", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(cli.New(&cli.Env{}))
	for code := range 9 {
		if !strings.Contains(docs, fmt.Sprintf("\n| %d | ", code)) {
			t.Errorf("docs/cli.md does not explain exit code %d", code)
		}
	}
}
