package cli_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

	testTriggers(t, c)

	c.fails(exitNotFound, "not found", "events", "show", "nope")
	c.fails(exitUsage, "--data is not valid JSON", "events", "send", "x", "--data", "{")
	c.fails(exitUsage, "--after", "events", "ls", "--after", "yesterday")
	c.fails(exitFailure, "segment 2", "events", "ls", "--field", "a..b", "--value", "1")
}

// testTriggers puts a managed trigger, lists and shows it, sends an event
// it fires on (the server has no flow "onboard": the firing fails, and
// says why), and deletes it.
func testTriggers(t *testing.T, c *client) {
	lines(t, c.ok("triggers", "put", "welcome", "--event", "user.joined", "--target-name", "onboard", "--filter", `event.data.plan == "pro"`),
		`^name: +welcome$`, `^target: +flow onboard$`, `^declared: +false$`)
	if out := c.ok("triggers").stdout; !regexp.MustCompile(`(?m)^welcome +user\.joined +flow onboard +event\.data\.plan == "pro" +false$`).MatchString(out) {
		t.Fatalf("heph triggers: %s", out)
	}
	c.ok("events", "send", "user.joined", "--data", `{"plan": "pro"}`, "--id", "join-1")
	deadline := time.Now().Add(time.Minute)
	for {
		out := c.ok("events", "show", "join-1").stdout
		if regexp.MustCompile(`(?m)^trigger welcome: +failed run \S+: .*not found`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the firing of join-1: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.fails(exitUsage, "--event and --target-name are required", "triggers", "put", "x", "--event", "e")
	c.fails(exitFailure, "filter", "triggers", "put", "x", "--event", "e", "--target-name", "f", "--filter", "event.data.n >")
	lines(t, c.ok("triggers", "put", "digest", "--event", "comment.added", "--target-name", "digest", "--key", "event.data.thread", "--batch", "50/5m"),
		`^key: +event\.data\.thread$`, `^flow control: +batch 50/5m0s$`)
	testTriggerGroups(t, c)
	lines(t, c.ok("triggers", "put", "digest", "--event", "comment.added", "--target-name", "digest", "--throttle", "2/1m"),
		`^flow control: +throttle 2/1m0s$`)
	c.fails(exitUsage, "want N/duration", "triggers", "put", "x", "--event", "e", "--target-name", "f", "--batch", "50")
	c.fails(exitFailure, "at most one", "triggers", "put", "x", "--event", "e", "--target-name", "f", "--debounce", "1s", "--batch", "2/1s")
	c.ok("triggers", "rm", "digest")
	c.ok("triggers", "rm", "welcome")
	c.fails(exitNotFound, "not found", "triggers", "show", "welcome")
}

// testTriggerGroups sends three events to the batching trigger "digest"
// (50 per 5 minutes, so its groups stay open), two of one thread, and
// lists its groups: as a table, as JSON, by status, a page at a time;
// bad flags and an unknown trigger fail, naming what is wrong.
func testTriggerGroups(t *testing.T, c *client) {
	for i, thread := range []string{"t1", "t2", "t1"} {
		c.ok("events", "send", "comment.added", "--data", fmt.Sprintf(`{"thread": %q}`, thread), "--id", fmt.Sprint("comment-", i))
	}
	type groups struct {
		Groups []struct {
			ID     int64
			Key    string
			Status string
			Events []string
		}
		Next int64
	}
	var l groups
	deadline := time.Now().Add(time.Minute)
	for {
		l = groups{}
		c.json(&l, "triggers", "groups", "digest")
		if len(l.Groups) == 2 && len(l.Groups[0].Events)+len(l.Groups[1].Events) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the groups of digest: %+v", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g := l.Groups[0]; g.Key != "t1" || g.Status != "open" || strings.Join(g.Events, ",") != "comment-0,comment-2" || l.Next != 0 {
		t.Fatalf("the first group: %+v (next %d)", g, l.Next)
	}
	if out := c.ok("triggers", "groups", "digest", "--status", "open").stdout; !regexp.MustCompile(`(?m)^ID +KEY +STATUS +DUE +EVENTS`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\d+ +t2 +open +\S+ +1\b`).MatchString(out) {
		t.Fatalf("heph triggers groups --status open: %s", out)
	}
	var page groups
	c.json(&page, "triggers", "groups", "digest", "--limit", "1")
	if len(page.Groups) != 1 || page.Next != page.Groups[0].ID {
		t.Fatalf("--limit 1: %+v", page)
	}
	if out := c.ok("triggers", "groups", "digest", "--limit", "1").stdout; !strings.Contains(out, fmt.Sprint("more: --after ", page.Next)) {
		t.Fatalf("a page of one says where the next starts: %s", out)
	}
	page = groups{}
	c.json(&page, "triggers", "groups", "digest", "--after", fmt.Sprint(l.Groups[0].ID))
	if len(page.Groups) != 1 || page.Groups[0].Key != "t2" || page.Next != 0 {
		t.Fatalf("--after: %+v", page)
	}
	c.json(&page, "triggers", "groups", "digest", "--status", "started")
	if len(page.Groups) != 0 {
		t.Fatalf("--status started: %+v", page)
	}
	c.fails(exitFailure, "status", "triggers", "groups", "digest", "--status", "done")
	c.fails(exitFailure, "limit", "triggers", "groups", "digest", "--limit", "5000")
	c.fails(exitNotFound, "not found", "triggers", "groups", "nope")
}
