package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// heph events on a server over a SQLite file.
func TestEventsSQLite(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_INSECURE=true"}, "--sqlite", filepath.Join(t.TempDir(), "heph.db"))
	testEvents(t, srv.client(t, ""))
}

// heph events on a server over PostgreSQL.
func TestEventsPostgres(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_POSTGRES=" + pgtest.DSN(t), "HEPH_SCHEMA=clievents", "HEPH_INSECURE=true"})
	testEvents(t, srv.client(t, ""))
}

// testEvents sends events (a re-send of an id shows the first), shows
// one, lists them by name and by a field of their data, and names what
// is wrong with bad flags.
func testEvents(t *testing.T, c *client) {
	type event struct {
		ID, Name  string
		Seq       int64
		Duplicate bool
		Data      map[string]any
	}
	var e event
	c.json(&e, "events", "send", "order.paid", "--data", `{"order": 42, "customer": {"id": "c-7"}}`, "--id", "pay-42")
	if e.ID != "pay-42" || e.Duplicate || e.Seq <= 0 {
		t.Fatalf("send: %+v", e)
	}
	var again event
	c.json(&again, "events", "send", "order.paid", "--data", `{"order": 1}`, "--id", "pay-42")
	if !again.Duplicate || again.Seq != e.Seq || again.Data["order"] != float64(42) {
		t.Fatalf("re-send: %+v", again)
	}
	c.ok("events", "send", "invoice.paid", "--data", `{"amount": 120}`)
	lines(t, c.ok("events", "show", "pay-42"), `^id: +pay-42$`, `^name: +order\.paid$`)

	var list struct {
		Events []event
		Next   int64
	}
	c.json(&list, "events", "ls", "--name", "order.paid")
	if len(list.Events) != 1 || list.Events[0].ID != "pay-42" {
		t.Fatalf("ls --name: %+v", list)
	}
	c.json(&list, "events", "ls", "--field", "customer.id", "--value", `"c-7"`)
	if len(list.Events) != 1 || list.Events[0].ID != "pay-42" {
		t.Fatalf("ls --field: %+v", list)
	}
	out := c.ok("events").stdout
	if !regexp.MustCompile(`(?m)^SEQ +ID +NAME`).MatchString(out) || !strings.Contains(out, "invoice.paid") || !strings.Contains(out, "pay-42") {
		t.Fatalf("heph events: %s", out)
	}

	c.fails(exitNotFound, "not found", "events", "show", "nope")
	c.fails(exitUsage, "--data is not valid JSON", "events", "send", "x", "--data", "{")
	c.fails(exitUsage, "--after", "events", "ls", "--after", "yesterday")
	c.fails(exitFailure, "segment 2", "events", "ls", "--field", "a..b", "--value", "1")
}
