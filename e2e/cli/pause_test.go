package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// heph pause and unpause on a server over a SQLite file.
func TestPauseSQLite(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_INSECURE=true"}, "--sqlite", filepath.Join(t.TempDir(), "heph.db"))
	testPause(t, srv.client(t, ""))
}

// heph pause and unpause on a server over PostgreSQL.
func TestPausePostgres(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_POSTGRES=" + pgtest.DSN(t), "HEPH_SCHEMA=clipause", "HEPH_INSECURE=true"})
	testPause(t, srv.client(t, ""))
}

// testPause pauses one run (shown by show and ls), twice, and unpauses
// it; then pauses and unpauses the runs of a filter in bulk; a finished
// run is a conflict.
func testPause(t *testing.T, c *client) {
	c.ok("documents", "put", writeFile(t, t.TempDir(), "gate.yaml", gateDoc))
	one := startGate(c, "--tag", "one")
	var many []string
	for range 2 {
		many = append(many, startGate(c, "--tag", "many"))
	}
	for _, id := range append([]string{one}, many...) {
		waitStatus(c, id, "waiting")
	}
	c.fails(exitUsage, "name a run, or add --all-matching", "pause")
	c.fails(exitUsage, "not both", "unpause", one, "--tag", "one")

	lines(t, c.ok("pause", one, "--cancel-running"), `^run `+regexp.QuoteMeta(one)+` paused \(waiting\)$`)
	lines(t, c.ok("pause", one), `^run `+regexp.QuoteMeta(one)+` paused \(waiting\)$`)
	if out := c.ok("show", one); !strings.Contains(out.stdout, "paused by") {
		t.Fatalf("show of a paused run:\n%s", out)
	}
	if out := c.ok("ls", "--tag", "one"); !strings.Contains(out.stdout, "waiting (paused)") {
		t.Fatalf("ls of a paused run:\n%s", out)
	}
	var r struct {
		ID        string `json:"id"`
		Condition *struct {
			Kind string `json:"kind"`
		} `json:"condition"`
	}
	c.json(&r, "unpause", one)
	if r.ID != one || r.Condition != nil {
		t.Fatalf("unpause -o json: %+v", r)
	}

	var op struct {
		Action, Status      string
		Total, Done, Failed int
	}
	for _, action := range []string{"pause", "unpause"} {
		c.json(&op, action, "--tag", "many", "--all-matching")
		if op.Action != action || op.Status != "completed" || op.Done != 2 || op.Failed != 0 {
			t.Fatalf("bulk %s: %+v", action, op)
		}
	}
	c.ok("cancel", one)
	waitStatus(c, one, "cancelled")
	c.fails(exitConflict, "heph show", "pause", one)
}
