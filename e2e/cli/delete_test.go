package cli_test

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// heph delete on a server over a SQLite file.
func TestDeleteSQLite(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_INSECURE=true"}, "--sqlite", filepath.Join(t.TempDir(), "heph.db"))
	testDelete(t, srv.client(t, ""))
}

// heph delete on a server over PostgreSQL.
func TestDeletePostgres(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_POSTGRES=" + pgtest.DSN(t), "HEPH_SCHEMA=clidelete", "HEPH_INSECURE=true"})
	testDelete(t, srv.client(t, ""))
}

// testDelete deletes one run (refused while active, then forced), a run
// that is gone, and the finished runs of a filter in bulk, after the
// confirmation that --yes skips.
func testDelete(t *testing.T, c *client) {
	c.ok("documents", "put", writeFile(t, t.TempDir(), "gate.yaml", gateDoc))
	var old []string
	for range 3 {
		old = append(old, startGate(c, "--tag", "old"))
	}
	live := startGate(c, "--tag", "live")
	for _, id := range old {
		waitStatus(c, id, "waiting")
		c.ok("cancel", id)
		waitStatus(c, id, "cancelled")
	}
	waitStatus(c, live, "waiting")

	// Usage.
	c.fails(exitUsage, "name a run, or filter", "delete")
	c.fails(exitUsage, "not both", "delete", live, "--status", "waiting")
	c.fails(exitUsage, "never forces", "delete", "--tag", "live", "--force")
	c.fails(exitUsage, "give one", "delete", "--status", "failed", "--before", "1h", "--until", "2h")

	// One run.
	c.fails(exitConflict, "--force", "delete", live)
	waitStatus(c, live, "waiting")
	lines(t, c.ok("delete", old[0]), `^run `+regexp.QuoteMeta(old[0])+` \(document gate, cancelled\) deleted with its history; 0 task\(s\) of work dropped$`)
	c.fails(exitNotFound, "not found", "delete", old[0])
	c.fails(exitNotFound, "not found", "show", old[0])
	var d struct {
		ID, Status string
		Forced     bool
	}
	c.json(&d, "delete", live, "--force")
	if d.ID != live || d.Status != "waiting" || !d.Forced {
		t.Fatalf("delete --force -o json: %+v", d)
	}

	// In bulk: a confirmation, which a standard input that is no terminal
	// cannot give.
	c.fails(exitUsage, "add --yes", "delete", "--tag", "old", "--status", "cancelled")
	var op struct {
		Action, Status      string
		Total, Done, Failed int
	}
	c.json(&op, "delete", "--tag", "old", "--before", "0s", "--yes")
	if op.Action != "delete" || op.Status != "completed" || op.Done != 2 || op.Failed != 0 {
		t.Fatalf("bulk delete: %+v", op)
	}
	var list struct{ Runs []run }
	c.json(&list, "ls", "--tag", "old")
	if len(list.Runs) != 0 {
		t.Fatalf("runs left after the bulk delete: %+v", list.Runs)
	}
	c.json(&list, "ls")
	if len(list.Runs) != 0 {
		t.Fatalf("runs left: %+v", list.Runs)
	}
}
