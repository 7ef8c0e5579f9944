package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// errorOf decodes the JSON error -o json prints on stderr.
func errorOf(t *testing.T, stderr string) map[string]any {
	t.Helper()
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(stderr), &body); err != nil || body.Error == nil {
		t.Fatalf("stderr is not a JSON error (%v):\n%s", err, stderr)
	}
	return body.Error
}

// Mistyped commands and flags get a "did you mean"; the exit code stays
// the usage error's.
func TestDidYouMeanOffline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"strt", "order"}, `heph: unknown command "strt" for "heph"; did you mean start or stats? (see heph --help)`},
		{[]string{"histroy"}, `did you mean history?`},
		{[]string{"definitons"}, `did you mean definitions?`},
		{[]string{"tokens", "craete"}, `unknown command "craete" for "heph tokens"; did you mean create? (see heph tokens --help)`},
		{[]string{"frobnicate"}, `heph: unknown command "frobnicate" for "heph" (see heph --help)`},
		{[]string{"start", "order", "--business-vale", "42"}, `heph: unknown flag: --business-vale; did you mean --business-value? (see heph start --help)`},
		{[]string{"ls", "--outptu", "json"}, `did you mean --output?`},
		{[]string{"ls", "--zzzzzzzz"}, `heph: unknown flag: --zzzzzzzz (see heph ls --help)`},
	} {
		code, out, errOut := heph(t, nil, tc.args...)
		if code != cli.ExitUsage || out != "" {
			t.Errorf("heph %v: exit %d, stdout %q; want exit %d and no output", tc.args, code, out, cli.ExitUsage)
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("heph %v: stderr %q, want it to say %q", tc.args, errOut, tc.want)
		}
		if strings.Contains(tc.want, "(see") && !strings.Contains(tc.want, "did you mean") && strings.Contains(errOut, "did you mean") {
			t.Errorf("heph %v: %q suggests something for a name nothing like it", tc.args, errOut)
		}
	}
}

// With -o json an error is one JSON object on stderr, with the exit code
// it always had; plain output is unchanged.
func TestErrorsAsJSONOffline(t *testing.T) {
	t.Parallel()
	code, out, errOut := heph(t, nil, "strt", "-o", "json")
	if code != cli.ExitUsage || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	e := errorOf(t, errOut)
	if e["title"] != "Usage error" || !strings.Contains(e["detail"].(string), "did you mean start or stats?") || e["exit_code"] != float64(cli.ExitUsage) {
		t.Errorf("error %v", e)
	}
	// A bad flag before -o json: still JSON.
	code, _, errOut = heph(t, nil, "ls", "--bogus", "-o", "json")
	if e := errorOf(t, errOut); code != cli.ExitUsage || e["title"] != "Usage error" || !strings.Contains(e["detail"].(string), "unknown flag: --bogus") {
		t.Errorf("exit %d, error %v", code, e)
	}
	// HEPH_OUTPUT=json does the same; an unreachable server is exit 6.
	code, _, errOut = heph(t, map[string]string{cli.EnvOutput: "json", cli.EnvAddr: "http://127.0.0.1:1"}, "ls")
	if code != cli.ExitUnreachable {
		t.Fatalf("exit %d, want %d: %s", code, cli.ExitUnreachable, errOut)
	}
	if e := errorOf(t, errOut); e["title"] != "Server unreachable" || e["exit_code"] != float64(cli.ExitUnreachable) {
		t.Errorf("error %v", e)
	}
	code, _, errOut = heph(t, map[string]string{cli.EnvAddr: "http://127.0.0.1:1"}, "ls")
	if code != cli.ExitUnreachable || !strings.HasPrefix(errOut, "heph: ") || strings.Contains(errOut, "{") {
		t.Errorf("plain error: exit %d, %q", code, errOut)
	}
}

// Against a server: an unknown definition points to the nearest names
// and heph definitions; a start without a business value names
// --business-value; a mistyped step of resume suggests the step.
func TestErrorsAgainstServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, st := sqliteClient(t)
	b := flow.New("order").BusinessKey("orderid", flow.ScopeActive)
	flow.EventStep(b, "approve", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("yes"), flow.Waits(0))
	if err := c.Register(b.Start("approve").Edge("approve", "yes", flow.Done).MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"start", "ordr"}, cli.ExitNotFound, `heph: no flow named "ordr"; did you mean order?; list them with heph definitions`},
		{[]string{"start", "zzzzzz"}, cli.ExitNotFound, `heph: no flow named "zzzzzz"; list them with heph definitions`},
		{[]string{"start", "order"}, cli.ExitFailure, `heph: flow "order" has a business key, and the start gave no value; give it with --business-value (such as --business-value order-42)`},
	} {
		code, out, errOut := heph(t, env, tc.args...)
		if code != tc.code || out != "" || strings.TrimSpace(errOut) != tc.want {
			t.Errorf("heph %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}

	code, _, errOut := heph(t, env, "start", "ordr", "-o", "json")
	e := errorOf(t, errOut)
	if code != cli.ExitNotFound || e["status"] != float64(404) || e["kind"] != "not-found" || e["fix"] != "list them with heph definitions" ||
		!strings.Contains(e["detail"].(string), "did you mean order?") {
		t.Errorf("exit %d, error %v", code, e)
	}
	code, _, errOut = heph(t, env, "start", "order", "-o", "json")
	if e := errorOf(t, errOut); code != cli.ExitFailure || e["status"] != float64(400) || !strings.Contains(e["fix"].(string), "--business-value") {
		t.Errorf("exit %d, error %v", code, e)
	}

	// The API's problem names the field; the library's error is ErrBusinessValueRequired.
	if e := errorOf(t, errOut); !strings.Contains(fmt.Sprint(e["errors"]), "path:business_value") {
		t.Errorf("the problem's errors %v do not name business_value", e["errors"])
	}
	if _, err := c.StartRun(ctx, "order", nil, nil); !errors.Is(err, hephaestus.ErrBusinessValueRequired) || !errors.Is(err, hephaestus.ErrInvalidInput) ||
		!strings.Contains(err.Error(), `the flow has the business key "orderid"`) {
		t.Errorf("StartRun without a business value: %v", err)
	}

	run, err := c.StartRun(ctx, "order", nil, &hephaestus.StartOptions{BusinessValue: "42"})
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut = heph(t, env, "resume", run.ID, "yes", "--step", "aprove")
	if code != cli.ExitFailure || !strings.Contains(errOut, `unknown step: "aprove"; did you mean "approve"?`) {
		t.Errorf("resume with a mistyped step: exit %d, %q", code, errOut)
	}

	// ls shows the business id; queues and schedules list with no
	// subcommand, as their ls does.
	wantLines(t, "ls", ok(t, env, "ls"), `^ID\s+BUSINESS ID\s+KIND\s+WORKFLOW`, `^`+run.ID+`\s+orderid::42\s+flow\s+order\s`)
	for _, group := range []string{"queues", "schedules"} {
		got, want := ok(t, env, group), ok(t, env, group, "ls")
		if got != want || !strings.HasPrefix(got, map[string]string{"queues": "NAME", "schedules": "ID"}[group]) {
			t.Errorf("heph %s printed %q, heph %s ls %q", group, got, group, want)
		}
		if code, _, errOut := heph(t, env, group, "lss"); code != cli.ExitUsage || !strings.Contains(errOut, "did you mean ls?") {
			t.Errorf("heph %s lss: exit %d, %q", group, code, errOut)
		}
	}
}

// sqliteClient is a client (not started) on a new SQLite store, both
// closed by the test's cleanup.
func sqliteClient(t *testing.T) (*hephaestus.Client, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := hephaestus.New(&hephaestus.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}
