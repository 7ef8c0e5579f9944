package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// gateDoc is a flow document that runs without any action: an approval
// gate, then a wait for an event.
const gateDoc = `name: gate
steps:
  review:
    approval: {prompt: "Ship it?"}
    on: {approved: confirm, rejected: done}
  confirm:
    wait: {events: [ok, no]}
    on: {ok: done, no: done}
`

// failDoc is a document whose runs fail at once when their input's
// items are not an array: its map step cannot expand.
const failDoc = `name: failing
steps:
  each:
    map: input.items
    action: work
    done: true
`

// workDoc is a document whose step a worker outside the server runs.
const workDoc = `name: shout
steps:
  loud:
    action: upper
    args: {text: "{{input.text}}"}
    done: true
`

// badDoc is an invalid document: a transition to a step that is not.
const badDoc = `name: bad
steps:
  a:
    wait: {}
    next: nowhere
`

// The exit codes of docs/cli.md.
const (
	exitFailure     = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitConflict    = 4
	exitAuth        = 5
	exitUnreachable = 6
	exitRunFailed   = 7
	exitNotFinished = 8
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run is the JSON of a run, as far as the tests read it.
type run struct {
	ID       string         `json:"id"`
	Status   string         `json:"status"`
	Workflow string         `json:"workflow"`
	Tags     []string       `json:"tags"`
	Metadata map[string]any `json:"metadata"`
	Steps    []struct{ Name, Status string }
	Output   map[string]any `json:"output"`
	Error    string         `json:"error"`
}

// startGate starts a run of the gate document and returns its id.
func startGate(c *client, args ...string) string {
	c.t.Helper()
	var r run
	c.json(&r, append([]string{"start", "gate", "--kind", "document"}, args...)...)
	if r.ID == "" || r.Status == "" {
		c.t.Fatalf("start gate: %+v", r)
	}
	return r.ID
}

// waitStep waits until a step of the run has a status.
func waitStep(c *client, id, step, status string) {
	c.t.Helper()
	eventually(c.t, "step "+step+" of run "+id+" "+status, func() bool {
		var r run
		c.json(&r, "show", id)
		for _, s := range r.Steps {
			if s.Name == step && s.Status == status {
				return true
			}
		}
		return false
	})
}

// waitStatus waits until the run has a status.
func waitStatus(c *client, id, status string) {
	c.t.Helper()
	eventually(c.t, "run "+id+" "+status, func() bool {
		var r run
		c.json(&r, "show", id)
		return r.Status == status
	})
}

// TestSQLite runs every command against a server on a SQLite file, with
// tokens.
func TestSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "heph.db")
	nobody := &client{t: t, url: "http://127.0.0.1:1"}

	// The first admin token, straight in the store, before any server.
	var admin struct{ ID, Name, Role, Token string }
	nobody.json(&admin, "tokens", "create", "root", "--role", "admin", "--sqlite", db)
	if admin.Role != "admin" || !strings.HasPrefix(admin.Token, "heph_") {
		t.Fatalf("bootstrap token: %+v", admin)
	}
	srv := startServer(t, nil, "--sqlite", db)
	c := srv.client(t, admin.Token)

	t.Run("auth", func(t *testing.T) {
		anon := srv.client(t, "")
		anon.fails(exitAuth, "heph: ", "ls")
		bad := srv.client(t, "heph_not-a-token")
		bad.fails(exitAuth, "heph: ", "workers")
	})

	gate := writeFile(t, dir, "gate.yaml", gateDoc)
	bad := writeFile(t, dir, "bad.yaml", badDoc)

	t.Run("documents", func(t *testing.T) {
		c := c.with(t)
		lines(t, c.ok("documents", "put", gate), `^document gate version 1 \(`)
		lines(t, c.ok("documents", "put", gate, "--name", "gate"), `^document gate version 1 \(`) // same content: same version
		lines(t, c.ok("documents", "ls"), `^NAME\s+VERSION\s+FORMAT`, `^gate\s+1\s+yaml\s`)
		lines(t, c.ok("documents", "show", "gate"), `^name: gate$`, `approval: \{prompt: "Ship it\?"\}`)
		c.fails(exitNotFound, "heph: ", "documents", "show", "nope")
		lines(t, c.ok("definitions"), `^document\s+gate\s+1\s+1\s+0\s+-$`)
		lines(t, c.ok("validate", "--remote", gate), `gate.yaml: valid$`)
		r := c.run("validate", "--remote", bad)
		if r.code != exitFailure || !regexp.MustCompile(`bad.yaml:5:\d+: .*nowhere`).MatchString(r.stdout) {
			t.Fatalf("validate --remote bad: %s", r)
		}
		lines(t, c.ok("graph", "gate", "--remote"), `^gate v1$`, `^\[ \] review <wait>$`, `^      approved -> confirm$`)
		lines(t, c.ok("graph", "gate", "--remote", "--format", "mermaid"), `^flowchart TD$`)
		lines(t, c.ok("graph", "gate", "--remote", "--format", "dot"), `^digraph `)
		var g struct{ Nodes []struct{ ID, Kind string } }
		c.json(&g, "graph", "gate", "--remote")
		if len(g.Nodes) != 4 {
			t.Fatalf("graph json: %+v", g)
		}
		c.fails(exitNotFound, "heph: ", "graph", "nope", "--remote")
	})

	t.Run("runs", func(t *testing.T) {
		c := c.with(t)
		// Start, idempotently.
		r := c.ok("start", "gate", "--kind", "document", "--input", `{"n": 1}`, "--tag", "e2e", "--meta", "tenant=acme", "--idempotency-key", "k1")
		m := regexp.MustCompile(`^run (\S+) started: `).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("start: %s", r)
		}
		id := m[1]
		lines(t, c.ok("start", "gate", "--kind", "document", "--input", `{"n": 1}`, "--idempotency-key", "k1"), `^run `+regexp.QuoteMeta(id)+` exists`)
		waitStatus(c, id, "waiting")

		// ls with filters, in both formats.
		lines(t, c.ok("ls", "--tag", "e2e"), `^ID\s+BUSINESS ID\s+KIND\s+WORKFLOW`, regexp.QuoteMeta(id)+`\s+\S+\s+\S+\s+gate\s+1\s+waiting\s`)
		var list struct {
			Runs []run
			Next string
		}
		c.json(&list, "ls", "--meta", "tenant=acme", "--status", "waiting")
		if len(list.Runs) != 1 || list.Runs[0].ID != id {
			t.Fatalf("ls --meta: %+v", list)
		}
		c.json(&list, "ls", "--status", "completed")
		if len(list.Runs) != 0 {
			t.Fatalf("ls --status completed: %+v", list)
		}
		// Pages: one at a time, then all.
		second := startGate(c, "--tag", "e2e")
		r = c.ok("ls", "--tag", "e2e", "--limit", "1")
		if !strings.Contains(r.stderr, "more: heph ls --cursor ") {
			t.Fatalf("ls --limit 1: %s", r)
		}
		c.json(&list, "ls", "--tag", "e2e", "--limit", "1", "--all")
		if len(list.Runs) != 2 || list.Next != "" {
			t.Fatalf("ls --all: %+v", list)
		}

		// show: ids, steps, the DAG with states.
		lines(t, c.ok("show", id), `^id:\s+`+regexp.QuoteMeta(id)+`$`, `^status:\s+waiting$`, `^document:\s+gate v1 `, `^tags:\s+e2e$`,
			`^STEP\s+STATUS\s+ATTEMPTS`, `^review\s+waiting\s+1\s`, `^\[~\] review <wait>  waiting$`, `^  \[ \] confirm <wait>  pending$`)
		var shown run
		c.json(&shown, "show", id)
		if shown.ID != id || len(shown.Steps) != 2 || shown.Metadata["tenant"] != "acme" {
			t.Fatalf("show -o json: %+v", shown)
		}
		c.fails(exitNotFound, "heph: ", "show", "no-such-run")

		// result before the end: at once, and after a short wait.
		c.fails(exitNotFinished, "", "result", id)
		c.fails(exitNotFinished, "", "result", id, "--wait", "100ms")

		// approvals, approve, resume; history follows to the end.
		lines(t, c.ok("approvals"), regexp.QuoteMeta(id)+`\s+review\s+gate\s`)
		follow := c.start("history", id, "--follow", "-o", "json")
		// A gate is decided only as a gate: a resume naming any actor is
		// refused, and says how to decide it.
		c.fails(exitConflict, "decide it with Approve or Reject", "resume", id, "approved", "--step", "review", "--payload", `{"actor": "any-name"}`)
		lines(t, c.ok("approve", id, "review", "--comment", "fine"), `^step review of run `+regexp.QuoteMeta(id)+` approved by root$`)
		waitStep(c, id, "confirm", "waiting")
		lines(t, c.ok("resume", id, "ok", "--step", "confirm", "--payload", `{"by": "e2e"}`), `resumed with ok$`)
		lines(t, c.ok("result", id, "--wait", "30s"), `^run `+regexp.QuoteMeta(id)+` completed$`)
		fr := follow.wait()
		if fr.code != 0 || !strings.Contains(fr.stdout, `"kind":"run_completed"`) || !strings.Contains(fr.stdout, `"kind":"step_resumed"`) {
			t.Fatalf("history --follow: %s", fr)
		}
		lines(t, c.ok("history", id), `^SEQ\s+AT\s+KIND`, `^1\s+\S+\s+run_started\s`, `\srun_completed\s`)
		var h struct {
			Events []struct {
				Seq  int64
				Kind string
			}
			Last int64
		}
		c.json(&h, "history", id, "--after", "2")
		if len(h.Events) == 0 || h.Events[0].Seq != 3 {
			t.Fatalf("history --after 2: %+v", h)
		}

		// reject ends the second run; start --wait sees a run end.
		waitStatus(c, second, "waiting")
		lines(t, c.ok("reject", second, "review", "--comment", "no"), `rejected by root$`)
		lines(t, c.ok("result", second, "--forever"), `completed$`)

		// cancel: result says so, exit 7.
		third := startGate(c)
		lines(t, c.ok("cancel", third, "--reason", "e2e"), `^run `+regexp.QuoteMeta(third)+` cancel`)
		waitStatus(c, third, "cancelled")
		c.fails(exitRunFailed, "", "result", third)
		// start --wait: until the run ends; exit 7 when it is cancelled.
		for _, end := range []struct {
			tag, cmd string
			code     int
			out      string
		}{{"wait-reject", "reject", 0, "completed"}, {"wait-cancel", "cancel", exitRunFailed, "cancelled"}} {
			waiter := c.start("start", "gate", "--kind", "document", "--tag", end.tag, "--wait")
			var found string
			eventually(t, "the run of start --wait", func() bool {
				c.json(&list, "ls", "--tag", end.tag, "--status", "waiting")
				if len(list.Runs) == 1 {
					found = list.Runs[0].ID
				}
				return found != ""
			})
			if end.cmd == "reject" {
				c.ok("reject", found, "review")
			} else {
				c.ok("cancel", found)
			}
			if wr := waiter.wait(); wr.code != end.code || !strings.Contains(wr.stdout, "run "+found+" "+end.out) {
				t.Fatalf("start --wait, then %s: %s", end.cmd, wr)
			}
		}
	})

	t.Run("workflow calls", func(t *testing.T) {
		c := c.with(t)
		// The server runs no code-first workflow: signals, updates and
		// named queries of a document run are refused, with the server's
		// problem.
		id := startGate(c)
		c.fails(exitFailure, "heph: Bad Request: ", "signal", id, "go", "--payload", `{"a": 1}`)
		c.fails(exitFailure, "heph: Bad Request: ", "update", id, "set", "--args", `{"a": 1}`)
		c.fails(exitFailure, "heph: ", "query", id, "items", "--args", `{}`)
		lines(t, c.ok("query", id), `^null$`) // a flow publishes no state
		c.fails(exitNotFound, "heph: ", "signal", "no-such-run", "go")
		c.fails(exitUsage, "accepts 2 arg(s)", "signal", id)
	})

	t.Run("workflow messages", func(t *testing.T) {
		// A client in this process, on the server's file, runs the
		// code-first workflow the binary talks to.
		w := startBasketWorker(t, openSQLite(t, db), "e2e-basket-sqlite")
		testBasket(t, c.with(t), w, "ann")
		lines(t, c.with(t).ok("workers"), `^e2e-basket-sqlite\s+\S+\s+default\s+\S*workflow:cli_basket`)
	})

	t.Run("schedules", func(t *testing.T) {
		c := c.with(t)
		lines(t, c.ok("schedules", "create", "nightly", "--target", "document", "--name", "gate", "--cron", "0 3 * * *", "--time-zone", "Europe/Paris", "--input", `{"n": 2}`),
			`^id:\s+nightly$`, `^target:\s+document gate$`, `^timing:\s+0 3 \* \* \*$`, `^time zone:\s+Europe/Paris$`)
		c.fails(exitConflict, "heph: ", "schedules", "create", "nightly", "--target", "document", "--name", "gate", "--cron", "0 3 * * *")
		lines(t, c.ok("schedules", "ls"), `^ID\s+TARGET\s+TIMING`, `^nightly\s+document gate\s+0 3 \* \* \*\s+Europe/Paris\s+skip\s+false\s`)
		lines(t, c.ok("schedules", "update", "nightly", "--every", "1h", "--overlap", "allow_all"), `^timing:\s+every 1h0m0s$`, `^overlap:\s+allow_all$`, `^time zone:\s+Europe/Paris$`)
		var sc struct {
			ID, Every, Overlap string
			Paused             bool
		}
		c.json(&sc, "schedules", "show", "nightly")
		if sc.ID != "nightly" || sc.Every != "1h0m0s" || sc.Overlap != "allow_all" {
			t.Fatalf("schedules show -o json: %+v", sc)
		}
		lines(t, c.ok("schedules", "pause", "nightly"), `^schedule nightly paused$`)
		c.json(&sc, "schedules", "show", "nightly")
		if !sc.Paused {
			t.Fatal("pause: not paused")
		}
		lines(t, c.ok("schedules", "resume", "nightly"), `^schedule nightly resumed$`)
		lines(t, c.ok("schedules", "next", "nightly", "-n", "3"), `^\d{4}-\d\d-\d\dT\d\d:00:00Z$`)
		if n := strings.Count(c.ok("schedules", "next", "nightly", "-n", "3").stdout, "\n"); n != 3 {
			t.Fatalf("next -n 3: %d lines", n)
		}
		lines(t, c.ok("schedules", "trigger", "nightly"), `^schedule nightly triggered: run \S+$`)
		r := c.ok("schedules", "backfill", "nightly", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-01T05:00:00Z")
		lines(t, r, `^schedule nightly: 6 runs for the ticks from 2025-01-01T00:00:00Z to 2025-01-01T05:00:00Z$`, `^nightly@2025-01-01T05:00:00Z$`)
		var bf struct {
			RunIDs []string `json:"run_ids"`
		}
		c.json(&bf, "schedules", "backfill", "nightly", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-01T05:00:00Z") // idempotent
		if len(bf.RunIDs) != 6 {
			t.Fatalf("backfill again: %+v", bf)
		}
		lines(t, c.ok("schedules", "runs", "nightly", "--limit", "3"), `^TICK\s+OUTCOME\s+RUN`, `^2025-01-01T05:00:00Z\s+started\s+nightly@2025-01-01T05:00:00Z\s`)
		lines(t, c.ok("schedules", "delete", "nightly"), `^schedule nightly deleted$`)
		c.fails(exitNotFound, "heph: ", "schedules", "show", "nightly")
		c.fails(exitUsage, "give --cron or --every", "schedules", "create", "x", "--name", "gate")
	})

	t.Run("queues and workers", func(t *testing.T) {
		c := c.with(t)
		lines(t, c.ok("queues", "set", "email", "--max-running", "5", "--max-per-key", "2", "--rate", "100/1s", "--fair", "--weight", "vip=3"),
			`^queue:\s+email$`, `^limits:\s+max 5, max 2 per key, rate 100/1s, fair, 1 weights$`)
		lines(t, c.ok("queues", "ls"), `^NAME\s+PAUSED\s+READY`, `^email\s+false\s+0\s+0\s+0\s+0\s`)
		lines(t, c.ok("queues", "pause", "email"), `^queue email paused$`)
		lines(t, c.ok("queues", "show", "email"), `^paused:\s+true$`)
		lines(t, c.ok("queues", "resume", "email"), `^queue email resumed$`)
		var q struct {
			Name    string
			Paused  bool
			Options struct {
				MaxRunning int `json:"max_running"`
			}
		}
		c.json(&q, "queues", "show", "email")
		if q.Name != "email" || q.Paused || q.Options.MaxRunning != 5 {
			t.Fatalf("queues show -o json: %+v", q)
		}
		lines(t, c.ok("workers"), `^ID\s+BUILD\s+QUEUES\s+HANDLERS`, `^\S+\s+\S+\s+default\s`) // the server's own worker
		var ws []struct{ ID string }
		c.json(&ws, "workers")
		if len(ws) == 0 {
			t.Fatal("workers -o json: none")
		}
	})

	t.Run("tokens and audit", func(t *testing.T) {
		c := c.with(t)
		var ro struct{ ID, Token string }
		c.json(&ro, "tokens", "create", "reader", "--role", "read")
		r := c.ok("tokens", "create", "ops", "--role", "admin")
		lines(t, r, `^token ops: principal ops \(user, groups none\), role admin, id \S+$`, `^secret \(shown once\): heph_\S+$`)
		c.fails(exitConflict, "heph: ", "tokens", "create", "ops", "--role", "admin")
		lines(t, c.ok("tokens", "ls"), `^ID\s+NAME\s+PRINCIPAL\s+ROLE`, `\sroot\s+root\s+admin\s`, `\sreader\s+reader\s+read\s`, `\sops\s+ops\s+admin\s`)

		reader := srv.client(t, ro.Token)
		lines(t, reader.ok("ls"), `^ID\s`)
		reader.fails(exitAuth, "heph: Forbidden", "start", "gate", "--kind", "document")
		reader.fails(exitAuth, "heph: Forbidden", "tokens", "ls")
		lines(t, c.ok("tokens", "revoke", ro.ID), `^token \S+ revoked$`)
		reader.fails(exitAuth, "heph: Unauthorized", "ls")
		c.fails(exitNotFound, "heph: ", "tokens", "revoke", "no-such-token")

		lines(t, c.ok("audit", "--limit", "500"), `^ID\s+AT\s+ACTOR`, `\sroot\s+admin\s+runs.start\s`, `\sroot\s+admin\s+tokens.revoke\s+\S+\s+\d+\s+DELETE /api/v1/tokens/`)
		var page struct {
			Entries []struct{ Action, Actor string }
		}
		c.json(&page, "audit", "--limit", "2")
		if len(page.Entries) != 2 {
			t.Fatalf("audit --limit 2: %+v", page)
		}
	})

	t.Run("bulk", func(t *testing.T) {
		c := c.with(t)
		var ids []string
		for range 3 {
			ids = append(ids, startGate(c, "--tag", "bulk"))
		}
		for _, id := range ids {
			waitStatus(c, id, "waiting")
		}
		c.fails(exitUsage, "--all-matching", "cancel", "--tag", "bulk")
		r := c.ok("cancel", "--tag", "bulk", "--status", "waiting", "--all-matching", "--reason", "bulk e2e")
		lines(t, r, `^operation:\s+\S+$`, `^action:\s+cancel$`, `^status:\s+completed$`, `^runs:\s+3 matched, 3 done, 0 failed$`, `^reason:\s+bulk e2e$`, `^created by:\s+root$`)
		opID := regexp.MustCompile(`(?m)^operation:\s+(\S+)$`).FindStringSubmatch(r.stdout)[1]
		var list struct{ Runs []run }
		c.json(&list, "ls", "--tag", "bulk", "--status", "cancelled")
		if len(list.Runs) != 3 {
			t.Fatalf("runs cancelled in bulk: %+v", list)
		}
		lines(t, c.ok("operations"), `^ID\s+ACTION\s+STATUS`, regexp.QuoteMeta(opID)+`\s+cancel\s+completed\s+3\s+3\s+0\s+root\s`)
		lines(t, c.ok("operations", opID), `^status:\s+completed$`)
		var op struct {
			ID, Status  string
			Total, Done int
		}
		c.json(&op, "operations", opID, "--wait")
		if op.ID != opID || op.Status != "completed" || op.Done != 3 {
			t.Fatalf("operations --wait -o json: %+v", op)
		}
		c.fails(exitNotFound, "heph: ", "operations", "no-such-operation")
		// --no-wait: the id at once.
		lines(t, c.ok("cancel", "--tag", "nothing-has-this", "--all-matching", "--no-wait"), `^operation \S+: cancel of the matching runs started; heph operations \S+$`)
	})

	t.Run("worker", func(t *testing.T) {
		c := c.with(t)
		// Named by its name field, not by its file.
		lines(t, c.ok("documents", "put", writeFile(t, dir, "shout-v1.yaml", workDoc)), `^document shout version 1 \(`)
		var r run
		c.json(&r, "start", "shout", "--kind", "document", "--input", `{"text": "hi"}`)
		// A worker in the test, over the HTTP protocol, runs the step.
		api, err := apiclient.New(&apiclient.Config{Addr: srv.url, Token: admin.Token})
		if err != nil {
			t.Fatal(err)
		}
		claim := func() apiclient.Task {
			t.Helper()
			tasks, _, err := api.ClaimTasks(t.Context(), &apiclient.Claim{WorkerID: "e2e-worker", Actions: []string{"upper"}, Wait: "30s"})
			if err != nil || len(tasks) != 1 {
				t.Fatalf("claim: %+v, %v", tasks, err)
			}
			return tasks[0]
		}
		task := claim()
		if task.RunID != r.ID || !strings.Contains(string(task.Input), `"hi"`) {
			t.Fatalf("claimed: %+v", task)
		}
		lines(t, c.ok("workers"), `^e2e-worker\s+\S+\s+default\s+action:upper\s`)
		lines(t, c.ok("show", r.ID), `^loud\s+(scheduled|running)\s+1\s`, `^\[>\] loud  (scheduled|running)$`)
		if cancelled, _, err := api.Heartbeat(t.Context(), task.Token, json.RawMessage(`{"done": 0.5}`)); err != nil || cancelled {
			t.Fatalf("heartbeat: %v, %v", cancelled, err)
		}
		if _, err := api.CompleteTask(t.Context(), task.Token, json.RawMessage(`{"text": "HI"}`)); err != nil {
			t.Fatal(err)
		}
		lines(t, c.ok("result", r.ID, "--wait", "30s"), `^run \S+ completed$`, `"text": "HI"`)
		lines(t, c.ok("show", r.ID), `^\[x\] loud  completed$`)
		// A stale token: the lease is gone, a conflict.
		if _, err := api.CompleteTask(t.Context(), task.Token, json.RawMessage(`{}`)); !apiclient.IsStatus(err, 409) {
			t.Fatalf("complete again: %v", err)
		}

		// A failure that is not retryable fails the run; retry runs the
		// step again, and this time the worker completes it.
		c.json(&r, "start", "shout", "--kind", "document", "--input", `{"text": "again"}`)
		task = claim()
		if _, err := api.FailTask(t.Context(), task.Token, "the printer is on fire", false, nil); err != nil {
			t.Fatal(err)
		}
		waitStatus(c, r.ID, "failed")
		lines(t, c.fails(exitRunFailed, "", "result", r.ID), `^error: .*the printer is on fire`)
		lines(t, c.ok("retry", r.ID), `^run `+regexp.QuoteMeta(r.ID)+` retried: `)
		task = claim()
		if task.RunID != r.ID || task.Attempt < 2 {
			t.Fatalf("claimed after the retry: %+v", task)
		}
		if _, err := api.CompleteTask(t.Context(), task.Token, json.RawMessage(`{"text": "AGAIN"}`)); err != nil {
			t.Fatal(err)
		}
		lines(t, c.ok("result", r.ID, "--wait", "30s"), `^run \S+ completed$`, `"text": "AGAIN"`)
		if doc, err := api.OpenAPI(t.Context()); err != nil || !strings.Contains(string(doc), `"openapi"`) {
			t.Fatalf("openapi.json: %v", err)
		}
	})

	t.Run("retry", func(t *testing.T) {
		c := c.with(t)
		c.ok("documents", "put", writeFile(t, dir, "failing.yaml", failDoc))
		var ids []string
		for range 2 {
			var r run
			c.json(&r, "start", "failing", "--kind", "document", "--input", `{"items": 5}`, "--tag", "retry")
			ids = append(ids, r.ID)
		}
		for _, id := range ids {
			waitStatus(c, id, "failed")
		}
		r := c.fails(exitRunFailed, "", "result", ids[0])
		lines(t, r, `^run \S+ failed$`, `^error: .*not a JSON array`)
		lines(t, c.ok("retry", ids[0]), `^run `+regexp.QuoteMeta(ids[0])+` retried: `)
		eventually(t, "the retried run fails again", func() bool { // its input is still no array
			var h struct{ Events []struct{ Kind string } }
			c.json(&h, "history", ids[0])
			n := 0
			for _, e := range h.Events {
				if e.Kind == "run_failed" {
					n++
				}
			}
			return n == 2
		})
		waitStatus(c, ids[0], "failed")
		// Bulk: every failed run of the document.
		r = c.ok("retry", "--workflow", "failing", "--status", "failed", "--all-matching")
		lines(t, r, `^action:\s+retry$`, `^status:\s+completed$`, `^runs:\s+2 matched, 2 done, 0 failed$`)
		// A run that did not fail cannot be retried: a conflict.
		done := startGate(c)
		waitStatus(c, done, "waiting")
		c.ok("reject", done, "review")
		waitStatus(c, done, "completed")
		c.fails(exitConflict, "heph: ", "retry", done)
	})

	t.Run("usage", func(t *testing.T) {
		c := c.with(t)
		c.fails(exitUsage, "unknown command", "frobnicate")
		c.fails(exitUsage, "unknown flag", "ls", "--frobnicate")
		c.fails(exitUsage, "accepts 1 arg(s)", "show")
		c.fails(exitUsage, "-o must be table or json", "ls", "-o", "xml")
	})

	t.Run("shutdown", func(t *testing.T) {
		c := c.with(t)
		if err := srv.stop(t, syscall.SIGINT); err != nil {
			t.Fatalf("heph server on SIGINT: %v\n%s", err, srv.log())
		}
		if !strings.Contains(srv.log(), "shutting down") {
			t.Errorf("the server's log says nothing of its shutdown:\n%s", srv.log())
		}
		c.fails(exitUnreachable, "server unreachable", "ls")
	})
}

// with returns c for another (sub)test.
func (c *client) with(t *testing.T) *client {
	d := *c
	d.t = t
	return &d
}

// background is a heph command running in the background.
type background struct {
	done chan *result
}

// start runs heph in the background.
func (c *client) start(args ...string) *background {
	b := &background{done: make(chan *result, 1)}
	go func() {
		r, err := c.exec(args...)
		if err != nil {
			r = &result{args: args, code: -1, stderr: err.Error()}
		}
		b.done <- r
	}()
	return b
}

func (b *background) wait() *result {
	select {
	case r := <-b.done:
		return r
	case <-time.After(2 * wait):
		return &result{code: -1, stderr: "still running"}
	}
}

// TestPostgres runs the core commands against a server on PostgreSQL,
// configured by its environment, without tokens (--insecure on loopback).
func TestPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	srv := startServer(t, []string{"HEPH_POSTGRES=" + dsn, "HEPH_SCHEMA=clie2e", "HEPH_INSECURE=true"})
	c := srv.client(t, "")
	lines(t, c.ok("documents", "put", writeFile(t, dir, "gate.yaml", gateDoc)), `^document gate version 1 `)
	id := startGate(c, "--tag", "pg")
	waitStatus(c, id, "waiting")
	lines(t, c.ok("ls", "--tag", "pg"), regexp.QuoteMeta(id)+`\s+\S+\s+\S+\s+gate\s+1\s+waiting\s`)
	lines(t, c.ok("show", id), `^status:\s+waiting$`, `^review\s+waiting\s`, `^\[~\] review <wait>  waiting$`)
	lines(t, c.ok("approve", id, "review"), `approved by insecure$`)
	lines(t, c.ok("cancel", id, "--reason", "pg"), `^run `+regexp.QuoteMeta(id)+` cancel`)
	waitStatus(c, id, "cancelled")
	c.fails(exitRunFailed, "", "result", id)
	var list struct{ Runs []run }
	c.json(&list, "ls", "--status", "cancelled")
	if len(list.Runs) != 1 || list.Runs[0].ID != id {
		t.Fatalf("ls --status cancelled: %+v", list)
	}
	// The filters by id, version and parent.
	c.json(&list, "ls", "--id", id+",no-such-run", "--version", "1")
	if len(list.Runs) != 1 || list.Runs[0].ID != id {
		t.Fatalf("ls --id --version 1: %+v", list)
	}
	for _, args := range [][]string{{"--workflow", "gate", "--version", "2"}, {"--parent", id}} {
		c.json(&list, append([]string{"ls"}, args...)...)
		if len(list.Runs) != 0 {
			t.Fatalf("ls %v: %+v", args, list)
		}
	}
	c.fails(exitUsage, "--version must not be negative", "ls", "--version", "-1")
	// A bulk cancel of the waiting runs of version 1 of the gate.
	second := startGate(c)
	waitStatus(c, second, "waiting")
	c.ok("cancel", "--all-matching", "--workflow", "gate", "--version", "1", "--status", "waiting")
	waitStatus(c, second, "cancelled")
	// The overview: two gates started and cancelled in the last hour.
	lines(t, c.ok("stats", "--workflow", "gate"), `^window:\s+\S+ to \S+ by 1m0s$`, `^runs:\s+started 2, completed 0, failed 0, cancelled 2$`,
		`^active:\s+pending 0, running 0, waiting 0$`, `^BUCKET\s+STARTED\s+COMPLETED\s+FAILED\s+CANCELLED$`)
	var st apiclient.Stats
	c.json(&st, "stats", "--workflow", "gate", "--since", "2h", "--until", "0s", "--bucket", "1h")
	if st.Totals.Started != 2 || st.Totals.Cancelled != 2 || len(st.Buckets) != 2 || st.BucketSeconds != 3600 || st.Workflow != "gate" {
		t.Fatalf("stats -o json: %+v", st)
	}
	c.fails(exitFailure, "query parameter bucket", "stats", "--bucket", "1s")
	// The store is PostgreSQL's, in the schema the environment named.
	var tables int
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM clie2e.runs").Scan(&tables); err != nil || tables != 2 {
		t.Fatalf("runs in clie2e.runs: %d, %v", tables, err)
	}
	// Signals, updates and queries to a workflow a client on the same
	// schema runs.
	w := startBasketWorker(t, openPostgres(t, dsn, "clie2e"), "e2e-basket-pg")
	testBasket(t, c, w, "bob")
}

// TestDefaults starts heph server with no store flag: it serves ./heph.db
// of its working directory; its first start makes an admin token and
// shows it once; without a token every call is refused, with the token
// it is served; a second start makes none; with --insecure no call
// needs one.
func TestDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := startServerIn(t, dir, nil)
	srv.client(t, "").fails(exitAuth, "heph: Unauthorized", "ls")
	var token string
	deadline := time.Now().Add(time.Minute)
	for token == "" && time.Now().Before(deadline) {
		if m := regexp.MustCompile(`export HEPH_TOKEN=(\S+)`).FindStringSubmatch(srv.log()); m != nil {
			token = m[1]
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if token == "" {
		t.Fatalf("the first start shows no admin token:\n%s", srv.log())
	}
	lines(t, srv.client(t, token).ok("ls"), `^ID\s+BUSINESS ID\s+KIND\s+WORKFLOW`)
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log())
	}
	if _, err := os.Stat(filepath.Join(dir, "heph.db")); err != nil {
		t.Fatalf("the default store: %v", err)
	}
	srv = startServerIn(t, dir, nil)
	lines(t, srv.client(t, token).ok("ls"), `^ID\s+BUSINESS ID\s+KIND\s+WORKFLOW`)
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log())
	}
	if strings.Contains(srv.log(), "HEPH_TOKEN=") {
		t.Errorf("a second start made another token:\n%s", srv.log())
	}
	srv = startServerIn(t, dir, nil, "--insecure")
	lines(t, srv.client(t, "").ok("ls"), `^ID\s+BUSINESS ID\s+KIND\s+WORKFLOW`)
}

// TestDevServer starts heph server --dev: it prints the dashboard's URL,
// serves every call without a token, and seeds the example runs.
func TestDevServer(t *testing.T) {
	t.Parallel()
	srv := startServerIn(t, t.TempDir(), nil, "--dev")
	c := srv.client(t, "")
	eventually(t, "the dashboard URL", func() bool {
		return strings.Contains(srv.log(), "heph: dev mode: the dashboard is at "+srv.url+"/ (no token needed; loopback only)")
	})
	if strings.Contains(srv.log(), "HEPH_TOKEN=") {
		t.Errorf("--dev made a token:\n%s", srv.log())
	}
	eventually(t, "example runs", func() bool { return strings.Contains(c.ok("ls").stdout, "example.") })
	lines(t, c.ok("definitions"), `example\.`)
}
