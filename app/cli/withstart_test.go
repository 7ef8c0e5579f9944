package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// notes collects the notes it is sent: signal note appends one, update
// add appends one and replies with the count, signal close ends the run.
var (
	notesNote  = workflow.NewSignal[string]("note")
	notesClose = workflow.NewSignal[struct{}]("close")
	notesAdd   = workflow.NewUpdate[string, int]("add")
	notes      = workflow.New("notes", func(ctx workflow.Context, _ struct{}) ([]string, error) {
		got := []string{}
		workflow.Publish(ctx, got)
		return workflow.Phase(ctx, got,
			workflow.HandleSignal(notesNote, func(ctx workflow.Context, n string, got []string) workflow.Next[[]string] {
				got = append(slices.Clone(got), n)
				workflow.Publish(ctx, got)
				return workflow.Continue(got)
			}),
			workflow.HandleSignal(notesClose, func(ctx workflow.Context, _ struct{}, got []string) workflow.Next[[]string] {
				return workflow.Stop(got)
			}),
			workflow.HandleUpdate(notesAdd, func(ctx workflow.Context, n string, got []string) (workflow.Reply[[]string, int], error) {
				got = append(slices.Clone(got), n)
				workflow.Publish(ctx, got)
				return workflow.Respond(got, len(got)), nil
			}),
		)
	}).Declare(notesNote, notesClose, notesAdd)
)

// heph start --signal and --update, on SQLite and PostgreSQL: the first
// start creates the run with the signal, a retried start (same
// idempotency key) delivers nothing more, an update's result is printed,
// and bad flags and names fail with what to fix.
func TestStartWithMessageCLI(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var st store.Store
			var err error
			if backend == "sqlite" {
				st, err = sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
			} else {
				st, err = postgres.Open(t.Context(), &postgres.Config{DSN: pgtest.DSN(t)})
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			c, err := hephaestus.New(&hephaestus.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.RegisterWorkflows(notes); err != nil {
				t.Fatal(err)
			}
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Stop(context.Background()) })
			env := serveAPI(t, c, st)

			start := []string{"start", "notes", "--kind", "workflow", "--workflow-id", "n-1"}
			sig := append(slices.Clone(start), "--signal", "note", "--signal-input", `"a"`, "--idempotency-key", "s1")
			out := ok(t, env, sig...)
			wantLines(t, "signal-with-start", out, `^signal note sent to run \S+: workflow notes id n-1, \w+$`)
			var first struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(ok(t, env, append(slices.Clone(sig), "-o", "json")...)), &first); err != nil || first.ID == "" {
				t.Fatalf("-o json: %+v, %v", first, err)
			}
			if !strings.Contains(out, first.ID) {
				t.Fatalf("the retried start went to run %s; the first said %s", first.ID, out)
			}
			// The update goes to the same run; the note was delivered once.
			upd := append(slices.Clone(start), "--update", "add", "--update-input", `"b"`, "--idempotency-key", "u1")
			wantLines(t, "update-with-start", ok(t, env, upd...), `^update add completed by run `+first.ID+`: workflow notes id n-1$`, `^2$`)
			wantLines(t, "update-with-start retried", ok(t, env, upd...), `^2$`)
			deadline := time.Now().Add(30 * time.Second)
			for {
				q, err := c.QueryWorkflow(t.Context(), first.ID)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				if json.Unmarshal(q, &got) == nil && slices.Equal(got, []string{"a", "b"}) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run's state is %s after 30s, want [\"a\",\"b\"]", q)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := c.SignalWorkflow(t.Context(), first.ID, "close", nil); err != nil {
				t.Fatal(err)
			}
			wantLines(t, "result", ok(t, env, "result", first.ID, "--forever"), `"a"`, `"b"`)

			for _, bad := range []struct {
				args []string
				code int
				want string
			}{
				{append(slices.Clone(start), "--signal", "nope"), 1, `declares no signal "nope"`},
				{[]string{"start", "notes", "--workflow-id", "n-1", "--signal", "note"}, 2, "add --kind workflow"},
				{[]string{"start", "notes", "--kind", "workflow", "--signal", "note"}, 2, "need --workflow-id"},
				{append(slices.Clone(start), "--signal", "note", "--update", "add"), 2, "do not go together"},
				{append(slices.Clone(start), "--signal-input", "1"), 2, "need --signal or --update"},
				{append(slices.Clone(start), "--update", "add", "--update-wait-for", "soon"), 2, "--update-wait-for"},
				{append(slices.Clone(start), "--signal", "note", "--signal-input", "{"), 2, "--signal-input is not valid JSON"},
			} {
				code, _, errOut := heph(t, env, bad.args...)
				if code != bad.code || !strings.Contains(errOut, bad.want) {
					t.Errorf("heph %s: exit %d, %q; want exit %d and %q", strings.Join(bad.args, " "), code, errOut, bad.code, bad.want)
				}
			}
		})
	}
}
