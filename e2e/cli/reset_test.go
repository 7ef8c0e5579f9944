package cli_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// heph reset on a server over a SQLite file.
func TestResetSQLite(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_INSECURE=true"}, "--sqlite", filepath.Join(t.TempDir(), "heph.db"))
	testReset(t, srv.client(t, ""))
}

// heph reset on a server over PostgreSQL.
func TestResetPostgres(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_POSTGRES=" + pgtest.DSN(t), "HEPH_SCHEMA=clireset", "HEPH_INSECURE=true"})
	testReset(t, srv.client(t, ""))
}

// singleDoc is a document of one step.
const singleDoc = `name: single
steps:
  review:
    approval: {prompt: "Ship it?"}
    on: {approved: done, rejected: done}
`

type resetEvent struct {
	Kind, Step, Name string
	Attempt          int
}

func resetHistory(c *client, id string) []string {
	var h struct{ Events []resetEvent }
	c.json(&h, "history", id)
	var out []string
	for _, e := range h.Events {
		s := e.Kind
		if e.Step != "" {
			s += " " + e.Step
		}
		if e.Attempt != 0 {
			s += fmt.Sprintf(" a=%d", e.Attempt)
		}
		if e.Kind == "run_reset" {
			s += " by=" + e.Name
		}
		out = append(out, s)
	}
	return out
}

// testReset resets a gate document's run, waiting at its second step, to
// its first (twice with one key: once), checks the history entry by
// entry, resets the runs of a filter in bulk, resets a completed run of
// one step without naming it (as a job's), and is refused an unknown
// step (naming the steps) and a cancelled run (conflict).
func testReset(t *testing.T, c *client) {
	c.ok("documents", "put", writeFile(t, t.TempDir(), "gate.yaml", gateDoc))
	one := startGate(c, "--tag", "one")
	waitStatus(c, one, "waiting")
	c.ok("approve", one, "review")
	eventually(t, "the run waits at confirm", func() bool {
		return strings.Contains(strings.Join(resetHistory(c, one), "|"), "step_waiting confirm")
	})
	c.fails(exitFailure, `unknown step: "nope" (the steps: review, confirm)`, "reset", one, "--step", "nope")
	for range 2 {
		lines(t, c.ok("reset", one, "--step", "review", "--key", "k1"), `^run `+regexp.QuoteMeta(one)+` reset to step review \((running|waiting)\)$`)
	}
	waitStatus(c, one, "waiting")
	eventually(t, "review waits again", func() bool {
		return strings.HasSuffix(strings.Join(resetHistory(c, one), "|"), "step_waiting review a=2")
	})
	want := []string{"run_started", "step_scheduled review a=1", "step_started review a=1", "step_waiting review a=1",
		"step_resumed review", "step_scheduled confirm a=1", "step_started confirm a=1", "step_waiting confirm a=1",
		"run_reset review by=insecure", "step_cancelled confirm", "step_scheduled review a=2", "step_started review a=2", "step_waiting review a=2"}
	if got := resetHistory(c, one); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	c.json(&r, "reset", one, "--step", "review")
	if r.ID != one {
		t.Fatalf("reset -o json: %+v", r)
	}

	var many []string
	for range 2 {
		many = append(many, startGate(c, "--tag", "many"))
	}
	for _, id := range many {
		waitStatus(c, id, "waiting")
	}
	var op struct {
		Action, Status      string
		Total, Done, Failed int
	}
	c.json(&op, "reset", "--tag", "many", "--step", "review", "--all-matching")
	if op.Action != "reset" || op.Status != "completed" || op.Done != 2 || op.Failed != 0 {
		t.Fatalf("bulk reset: %+v", op)
	}
	for _, id := range many {
		eventually(t, "the bulk reset is in the history", func() bool {
			return strings.Contains(strings.Join(resetHistory(c, id), "|"), "run_reset review by=insecure|step_cancelled review|step_scheduled review a=2")
		})
	}
	// A run of one step (as a job is) is reset without --step: completed,
	// it is reopened and its step waits again.
	c.ok("documents", "put", writeFile(t, t.TempDir(), "single.yaml", singleDoc))
	var s run
	c.json(&s, "start", "single", "--kind", "document")
	waitStatus(c, s.ID, "waiting")
	c.ok("approve", s.ID, "review")
	waitStatus(c, s.ID, "completed")
	lines(t, c.ok("reset", s.ID), `^run `+regexp.QuoteMeta(s.ID)+` reset \((running|waiting)\)$`)
	waitStatus(c, s.ID, "waiting")
	eventually(t, "the single step waits again", func() bool {
		return strings.HasSuffix(strings.Join(resetHistory(c, s.ID), "|"), "run_completed|run_reset review by=insecure|step_scheduled review a=2|step_started review a=2|step_waiting review a=2")
	})

	c.ok("cancel", one)
	waitStatus(c, one, "cancelled")
	c.fails(exitConflict, "start a new run", "reset", one, "--step", "review")
}
