package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Pause a run from its page, after a confirmation: the page shows the
// paused condition and offers Unpause, which undoes it; the history and
// the audit log name the caller.
func TestRunPagePause(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	id := e.start("gate", nil)
	e.waitStatus(id, heph.StatusWaiting)

	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + id)
	b.run("pause", jsClick("#action-pause"))
	if msg := b.text("#confirm-text"); !strings.Contains(msg, "None of its tasks is claimed") {
		t.Errorf("the pause dialog says %q", msg)
	}
	b.run("confirm the pause", chromedp.WaitVisible("#confirm", chromedp.ByQuery), chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.run("the unpause button", chromedp.WaitVisible("#action-unpause", chromedp.ByQuery))
	// The condition is a live part of the page: wait for its refresh.
	b.waitJS("the paused condition", `(document.querySelector("#run-condition")?.textContent || "").includes("paused by ops")`)
	r, err := e.client.GetRun(context.Background(), id)
	if err != nil || r.Condition.Code != heph.ConditionPaused {
		t.Fatalf("the run after Pause: %+v, %v", r, err)
	}

	b.run("unpause", jsClick("#action-unpause"), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.run("the pause button", chromedp.WaitVisible("#action-pause", chromedp.ByQuery))
	if r, err := e.client.GetRun(context.Background(), id); err != nil || !r.Condition.IsZero() {
		t.Fatalf("the run after Unpause: %+v, %v", r, err)
	}
	h, err := e.client.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range h {
		if ev.Kind == hephtype.EventRunPaused || ev.Kind == hephtype.EventRunUnpaused {
			got = append(got, string(ev.Kind)+" "+ev.Name)
		}
	}
	if strings.Join(got, "|") != "run_paused ops|run_unpaused ops" {
		t.Errorf("history: %v", got)
	}
	for _, action := range []string{"runs.pause", "runs.unpause"} {
		e.api.FlushAudit()
		es, err := e.store.(store.Admin).ListAudit(context.Background(), &store.ListAuditParams{Action: action})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].Target != id || es[0].Actor != "ops" || es[0].Status != 200 {
			t.Errorf("the audit of %s: %+v", action, es)
		}
	}
	b.noErrors("pausing a run")
}
