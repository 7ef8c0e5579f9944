package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/server"
)

// act clicks an action's button, fills the dialog's fields (by name) and
// confirms; it does not wait for the answer.
func (b *browser) act(what, sel string, fields map[string]string) {
	b.t.Helper()
	// The button is found and clicked in one JavaScript turn: buttons sit
	// in live parts, and a refresh between chromedp's find and click would
	// leave it clicking a node that is gone. The dialog opens in the same
	// turn, and an open dialog rests the refresh.
	b.waitJS(what+": the dialog opens", fmt.Sprintf(`(() => { const d = document.querySelector("#confirm"); if (d.open) return true; const el = document.querySelector(%q); if (!el) return false; el.click(); return d.open; })()`, sel))
	actions := []chromedp.Action{chromedp.WaitVisible("#confirm", chromedp.ByQuery)}
	for name, v := range fields {
		actions = append(actions, chromedp.SendKeys(fmt.Sprintf(`#confirm-fields [name=%q]`, name), v, chromedp.ByQuery))
	}
	actions = append(actions, chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.run(what, actions...)
}

// actOK is act, then waits until the dialog has closed: the API said
// yes.
func (b *browser) actOK(what, sel string, fields map[string]string) {
	b.t.Helper()
	b.act(what, sel, fields)
	b.waitJS(what+": the dialog closed", `!document.querySelector("#confirm").open`)
}

// expectFailedLoad forgets the failed load of a URL the test made fail
// on purpose (the browser logs every 4xx answer of a fetch), failing the
// test if the browser did not report it.
func (b *browser) expectFailedLoad(status int, urlPart string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	kept, seen := b.errs[:0], false
	for _, e := range b.errs {
		if strings.Contains(e, fmt.Sprintf("status of %d", status)) && strings.Contains(e, urlPart) {
			seen = true
			continue
		}
		kept = append(kept, e)
	}
	b.errs = kept
	if !seen {
		b.t.Errorf("the browser reported no failed load (%d) of %s", status, urlPart)
	}
}

// Every page loads without an error in the browser; an admin sees the
// actions, a reader none.
func TestPagesLoad(t *testing.T) {
	e := newPagesEnv(t, false)
	reader := e.token("viewer", server.RoleRead)
	gate := e.startDoc("leave", map[string]string{"who": "ann"})
	e.waitStatus(gate, heph.StatusWaiting)
	if _, err := e.client.SendEvent(context.Background(), "leave.asked", map[string]string{"who": "ann"}, &heph.SendEventOptions{ID: "ask-1"}); err != nil {
		t.Fatal(err)
	}

	pages := []struct {
		path string
		// actions is a selector of the admin's actions on the page.
		actions string
	}{
		{"/overview", ""},
		{"/approvals", "button.approve"},
		{"/schedules", "button.pause"},
		{"/events", ""},
		{"/events/ask-1", ""},
		{"/triggers", ""},
		{"/queues", "button.resume"},
		{"/workers", ""},
		{"/definitions", "#doc-submit"},
		{"/definitions/order?version=2", ""},
		{"/definitions/leave", ""},
		{"/definitions/report", ""},
		{"/secrets", ""},
	}
	b := newBrowser(t)
	for _, who := range []struct{ name, token string }{{"admin", e.admin}, {"reader", reader}} {
		b.login(e.url, who.token)
		for _, p := range pages {
			b.open(e.url + p.path)
			var status int
			b.eval(`document.querySelector("main .problem") ? 1 : 0`, &status)
			if status != 0 {
				t.Errorf("%s %s: the page shows a problem: %s", who.name, p.path, b.text("main .problem"))
			}
			n := b.count("button[data-api]")
			switch {
			case who.name == "reader" && n != 0:
				t.Errorf("the reader sees %d actions on %s", n, p.path)
			case who.name == "admin" && p.actions != "" && b.count(p.actions) == 0:
				t.Errorf("the admin sees no %s on %s", p.actions, p.path)
			}
			b.noErrors(who.name + " " + p.path)
		}
		b.submit("sign out", chromedp.Click(".who button", chromedp.ByQuery))
	}
}

// The inbox filters by assignee and group; approve and reject decide the
// gate as the signed-in token, with its comment, which the API's history
// records; a gate of someone else is refused in the dialog.
func TestApprovalsInbox(t *testing.T) {
	e := newPagesEnv(t, false)
	alice := e.token("alice", server.RoleAdmin)
	first := e.startDoc("leave", map[string]string{"who": "ann"})
	second := e.startDoc("leave", map[string]string{"who": "ben"})
	buy := e.startDoc("purchase", map[string]string{"what": "desk"})
	for _, id := range []string{first, second, buy} {
		e.waitStatus(id, heph.StatusWaiting)
	}

	b := newBrowser(t)
	b.login(e.url, alice)
	rows := func() []string {
		var ids []string
		b.eval(`Array.from(document.querySelectorAll("table.approvals tbody tr[data-run]")).map(r => r.dataset.run)`, &ids)
		slices.Sort(ids)
		return ids
	}
	want := func(ids ...string) []string { slices.Sort(ids); return ids }
	b.open(e.url + "/approvals")
	if got := rows(); !slices.Equal(got, want(first, second, buy)) {
		t.Errorf("the whole inbox: %v", got)
	}
	if s := b.text(`tr[data-run="` + first + `"] td.assignees`); !strings.Contains(s, "alice") || !strings.Contains(s, "@hr") {
		t.Errorf("the leave gate's assignees read %q", s)
	}
	if s := b.text(`tr[data-run="` + first + `"] td.deadline`); !strings.HasPrefix(s, "in ") {
		t.Errorf("the leave gate's deadline reads %q, want how soon", s)
	}
	// Through the form: alice's inbox.
	b.run("type alice", chromedp.SendKeys(`#approval-filters input[name=assignee]`, "alice", chromedp.ByQuery))
	b.submit("filter", chromedp.Click(`#approval-filters button[type=submit]`, chromedp.ByQuery))
	if got := rows(); !slices.Equal(got, want(first, second)) {
		t.Errorf("assignee=alice: %v", got)
	}
	b.open(e.url + "/approvals?assignee=bob")
	if got := rows(); !slices.Equal(got, want(buy)) {
		t.Errorf("assignee=bob: %v", got)
	}
	b.open(e.url + "/approvals?group=hr")
	if got := rows(); !slices.Equal(got, want(first, second)) {
		t.Errorf("group=hr: %v", got)
	}
	b.open(e.url + "/approvals?workflow=purchase")
	if got := rows(); !slices.Equal(got, want(buy)) {
		t.Errorf("workflow=purchase: %v", got)
	}
	b.noErrors("the filtered inbox")

	b.open(e.url + "/approvals")
	b.actOK("approve the first", `tr[data-run="`+first+`"] button.approve`, map[string]string{"comment": "enjoy, ann"})
	b.waitJS("the first gone from the inbox", fmt.Sprintf(`document.querySelector('tr[data-run=%q]') === null`, first))
	b.actOK("reject the second", `tr[data-run="`+second+`"] button.reject`, map[string]string{"comment": "not this week"})
	b.waitJS("the second gone from the inbox", fmt.Sprintf(`document.querySelector('tr[data-run=%q]') === null`, second))
	// bob's gate is not alice's to decide: the dialog says why and stays.
	b.act("approve bob's gate", `tr[data-run="`+buy+`"] button.approve`, nil)
	b.waitJS("the refusal", `document.querySelector("#confirm-error").textContent !== ""`)
	if msg := b.text("#confirm-error"); !strings.Contains(msg, "not an assignee") {
		t.Errorf("approving bob's gate as alice says %q", msg)
	}
	b.run("close the dialog", chromedp.Click("#confirm-no", chromedp.ByQuery))
	b.expectFailedLoad(403, "/steps/sign/approve")
	b.noErrors("deciding")

	for _, c := range []struct{ id, event, comment string }{{first, "approved", "enjoy, ann"}, {second, "rejected", "not this week"}} {
		e.waitStatus(c.id, heph.StatusCompleted)
		var h server.History
		e.apiGet("/api/v1/runs/"+c.id+"/history", &h)
		found := false
		for _, ev := range h.Events {
			if ev.Step != "review" || len(ev.Data) == 0 {
				continue
			}
			var d struct {
				Actor, Comment string
			}
			if json.Unmarshal(ev.Data, &d) == nil && d.Actor == "alice" {
				found = true
				if d.Comment != c.comment {
					t.Errorf("run %s: the decision's comment is %q, want %q", c.id, d.Comment, c.comment)
				}
				if ev.Name != c.event {
					t.Errorf("run %s: the gate was resumed with %q, want %q", c.id, ev.Name, c.event)
				}
			}
		}
		if !found {
			t.Errorf("run %s: no decision by alice in the history: %+v", c.id, h.Events)
		}
	}
	var left []server.PendingApproval
	e.apiGet("/api/v1/approvals", &left)
	if len(left) != 1 || left[0].RunID != buy {
		t.Errorf("the approvals left: %+v, want bob's only", left)
	}
}

// Pause and resume a schedule, trigger it and backfill it from the page;
// the API sees each.
func TestSchedulesActions(t *testing.T) {
	e := newPagesEnv(t, true)
	b := newBrowser(t)
	b.open(e.url + "/schedules")
	sec := fmt.Sprintf(`section[data-schedule=%q]`, reportSchedule)
	if s := b.text(sec + " .spec"); !strings.Contains(s, "0 3 * * *") {
		t.Errorf("the spec reads %q", s)
	}
	if n := b.count(sec + " .next-fires .tag"); n != 3 {
		t.Errorf("%d next fire times shown, want 3", n)
	}
	paused := func() bool {
		var s server.Schedule
		e.apiGet("/api/v1/schedules/"+reportSchedule, &s)
		return s.Paused
	}
	b.actOK("pause", sec+" button.pause", nil)
	b.waitJS("shown paused", fmt.Sprintf(`document.querySelector(%q)?.dataset.paused === "true"`, sec))
	if !paused() {
		t.Error("the API says the schedule is not paused after Pause")
	}
	b.actOK("resume", sec+" button.resume", nil)
	b.waitJS("shown active", fmt.Sprintf(`document.querySelector(%q)?.dataset.paused === "false"`, sec))
	if paused() {
		t.Error("the API says the schedule is paused after Resume")
	}

	b.actOK("trigger", sec+" button.trigger", nil)
	b.waitJS("the triggered run listed", fmt.Sprintf(`document.querySelector(%q) !== null`, sec+" ul.triggered li[data-run]"))
	var id string
	b.eval(fmt.Sprintf(`document.querySelector(%q).dataset.run`, sec+" ul.triggered li[data-run]"), &id)
	if !strings.HasPrefix(id, reportSchedule+"@trigger-") {
		t.Errorf("the triggered run is %q", id)
	}
	var run server.Run
	e.apiGet("/api/v1/runs/"+url.PathEscape(id), &run)
	if run.Workflow != "report" {
		t.Errorf("the triggered run runs %q, want report", run.Workflow)
	}

	b.actOK("backfill", sec+" button.backfill", map[string]string{"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"})
	b.waitJS("the backfill's answer", `!document.querySelector("#backfill-result").hidden`)
	var bf server.Backfill
	if err := json.Unmarshal([]byte(b.text("#backfill-result")), &bf); err != nil || len(bf.RunIDs) != 2 {
		t.Errorf("the backfill of two days answered %+v (%v), want 2 runs", bf, err)
	}
	b.waitJS("the ticks listed", fmt.Sprintf(`document.querySelectorAll(%q).length === 2`, sec+" table.ticks tbody tr td a"))
	b.noErrors("the schedules page")
}

// A queue's figures read against its limits; pause and resume from the
// page reach the API.
func TestQueuesActions(t *testing.T) {
	e := newPagesEnv(t, true)
	b := newBrowser(t)
	b.open(e.url + "/queues")
	row := fmt.Sprintf(`tr[data-queue=%q]`, batchQueue)
	if s := b.text(row + " td.concurrency"); s != "0 of 5" {
		t.Errorf("the concurrency reads %q, want 0 of 5", s)
	}
	if s := b.text(row + " td.rate"); !strings.HasPrefix(s, "0 of 10 per 1m") {
		t.Errorf("the rate reads %q, want 0 of 10 per 1m…", s)
	}
	paused := func() bool {
		var q server.Queue
		e.apiGet("/api/v1/queues/"+batchQueue, &q)
		return q.Paused
	}
	if !paused() {
		t.Fatal("the batch queue is not paused to begin with")
	}
	b.actOK("resume", row+" button.resume", nil)
	b.waitJS("shown running", fmt.Sprintf(`document.querySelector(%q)?.dataset.paused === "false"`, row))
	if paused() {
		t.Error("the API says the queue is paused after Resume")
	}
	b.actOK("pause", row+" button.pause", nil)
	b.waitJS("shown paused", fmt.Sprintf(`document.querySelector(%q)?.dataset.paused === "true"`, row))
	if !paused() {
		t.Error("the API says the queue is not paused after Pause")
	}
	b.noErrors("the queues page")

	// The workers page lists this process's client with its handlers.
	b.open(e.url + "/workers")
	if n := b.count("table.workers tbody tr[data-worker]"); n < 1 {
		t.Fatalf("%d workers listed", n)
	}
	if s := b.text("table.workers tbody tr[data-worker] td.handlers"); !strings.Contains(s, "order") {
		t.Errorf("the worker's handlers read %q", s)
	}
	if s := b.text("table.workers tbody tr[data-worker] td.build"); s != e.client.BuildID() {
		t.Errorf("the worker's build reads %q, want %q", s, e.client.BuildID())
	}
	b.noErrors("the workers page")
}
