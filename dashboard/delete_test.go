package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
)

// Delete runs from their page, after a confirmation: a finished run, then
// an active one (forced, as the dialog says); each time the browser goes
// to the runs, the run is gone, and the audit log names the caller.
func TestRunPageDelete(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	done := e.start("gate", nil)
	e.waitStatus(done, heph.StatusWaiting)
	if err := e.client.CancelRun(context.Background(), done, "finished"); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(done, heph.StatusCancelled)
	active := e.start("gate", nil)
	e.waitStatus(active, heph.StatusWaiting)

	b := newBrowser(t)
	b.login(e.url, e.admin)
	for _, tc := range []struct {
		id, text string
		force    bool
	}{{done, "for good", false}, {active, "is active", true}} {
		b.open(e.url + "/runs/" + tc.id)
		var api string
		b.eval(`document.querySelector("#action-delete").dataset.api + " " + document.querySelector("#action-delete").dataset.method`, &api)
		if want := "/api/v1/runs/" + tc.id; !strings.HasPrefix(api, want) || strings.Contains(api, "force=true") != tc.force || !strings.HasSuffix(api, " DELETE") {
			t.Errorf("the delete button of %s calls %q", tc.id, api)
		}
		b.run("delete", jsClick("#action-delete"))
		if msg := b.text("#confirm-text"); !strings.Contains(msg, tc.text) {
			t.Errorf("the dialog says %q, want %q in it", msg, tc.text)
		}
		// The dialog closes as the browser goes to the runs.
		b.run("confirm the delete", chromedp.WaitVisible("#confirm", chromedp.ByQuery), chromedp.Click("#confirm-yes", chromedp.ByQuery))
		b.run("the runs page", chromedp.WaitVisible("#runs-table", chromedp.ByQuery))
		b.waitJS("the browser is on the runs", `location.pathname === "/"`)
		if _, err := e.client.GetRun(context.Background(), tc.id); !errors.Is(err, heph.ErrRunNotFound) {
			t.Errorf("run %s after its delete: %v", tc.id, err)
		}
	}
	e.api.FlushAudit()
	es, err := e.store.(store.Admin).ListAudit(context.Background(), &store.ListAuditParams{Action: "runs.delete"})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Target != active || es[0].Detail != "forced" || es[1].Target != done || es[0].Actor != "ops" || es[0].Status != 200 {
		t.Errorf("the audit of the deletes: %+v", es)
	}
	b.noErrors("deleting runs")
}

// "Delete selected" deletes the ticked finished runs, as one operation,
// and keeps an active one that was ticked too.
func TestBulkDeleteSelection(t *testing.T) {
	e := newEnv(t, true)
	var gates []string
	for i := range 4 {
		gates = append(gates, e.start("gate", map[string]int{"n": i}))
	}
	for i, g := range gates {
		e.waitStatus(g, heph.StatusWaiting)
		if i < 2 {
			if err := e.client.CancelRun(context.Background(), g, "done"); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := newBrowser(t)
	b.open(e.url + "/?workflow=gate")
	for _, g := range gates[:3] {
		b.run("tick "+g, jsClick(fmt.Sprintf(`input.select[value=%q]`, g)))
	}
	b.run("delete selected", jsClick("#delete-selected"), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.waitJS("the operation completed", `document.querySelector("#operation")?.dataset.status === "completed"`)
	for i, g := range gates {
		_, err := e.client.GetRun(context.Background(), g)
		if gone := errors.Is(err, heph.ErrRunNotFound); gone != (i < 2) {
			t.Errorf("run %d: %v (gone %v, want %v)", i, err, gone, i < 2)
		}
	}
	if msg := b.text("#operation"); !strings.Contains(msg, "2 of 3 done, 1 failed") {
		t.Errorf("the operation shows %q", msg)
	}
	b.noErrors("delete selected")
}

// A refresh held while the delete dialog is open (the run moved on
// meanwhile) is not let go as the dialog closes after the delete: the
// browser is on its way to the runs, and the deleted run's page is not
// read again (it answers 404, which the browser reports). The runs page
// is held on the server until the page left has run what the dialog's
// close queued.
func TestRunPageDeleteWithHeldRefresh(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	id := e.start("gate", nil)
	e.waitStatus(id, heph.StatusWaiting)
	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + id)
	b.waitJS("the stream connected", `window.heph.live.streaming === true`)
	b.run("delete", jsClick("#action-delete"))
	b.run("the dialog", chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	if err := e.client.ResumeRun(context.Background(), id, "go", nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(id, heph.StatusCompleted)
	b.waitJS("a refresh held by the open dialog", `window.heph.held() === true`)
	// The page counts its reads of itself from now on, and once the
	// dialog closes (after the page's own close handler) says how many.
	b.eval(`window.reads = 0; const f = window.fetch;
		window.fetch = (u, o) => { if (String(u) === location.href) window.reads++; return f(u, o); };
		document.querySelector("#confirm").addEventListener("close", () => f("`+markerPath+`?reads=" + window.reads));
		true`, nil)
	arrived, release := e.pages.holdGets("/")
	defer release()
	b.run("confirm the delete", chromedp.Click("#confirm-yes", chromedp.ByQuery))
	select {
	case <-arrived:
	case <-time.After(time.Minute):
		t.Fatal("the browser did not go to the runs")
	}
	if m := e.pages.waitMark(t, 1); m != "reads=0" {
		t.Errorf("the deleted run's page, left, read itself again: %s", m)
	}
	release()
	b.run("the runs page", chromedp.WaitVisible("#runs-table", chromedp.ByQuery))
	if _, err := e.client.GetRun(context.Background(), id); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("run %s after its delete: %v", id, err)
	}
	b.noErrors("deleting a run with a refresh held")
}
