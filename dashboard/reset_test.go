package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
)

// Reset a completed run to a step from its page, after a confirmation
// that offers the steps that ran: the step after it runs again, the run
// completes again, the history records run_reset by the caller entry by
// entry, and the audit log names the caller.
func TestRunPageReset(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	id := e.start("gate", nil)
	e.waitStatus(id, heph.StatusWaiting)
	ctx := context.Background()
	if err := e.client.ResumeRun(ctx, id, "go", nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(id, heph.StatusCompleted)

	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + id)
	b.run("reset", jsClick("#action-reset"))
	if msg := b.text("#confirm-text"); !strings.Contains(msg, "every step after it run again") {
		t.Errorf("the reset dialog says %q", msg)
	}
	var options []string
	b.run("the steps offered", chromedp.Evaluate(`[...document.querySelectorAll("#confirm-fields datalist option")].map(o => o.value)`, &options))
	if strings.Join(options, ",") != "hold,after" {
		t.Errorf("the dialog offers %v, want hold and after", options)
	}
	b.confirm("reset to after", map[string]string{"step": "after"})
	// The reset reopened the run; wait for its second completion.
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var h []heph.HistoryEvent
	for {
		var err error
		if h, err = e.client.History(ctx, id); err != nil {
			t.Fatal(err)
		}
		if count := len(h); count >= 14 {
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("the run did not complete again: %d history entries", len(h))
		case <-time.After(10 * time.Millisecond):
		}
	}
	var got []string
	for _, ev := range h {
		s := string(ev.Kind) + " " + ev.Step
		if ev.Attempt > 0 {
			s += fmt.Sprintf(" a=%d", ev.Attempt)
		}
		if ev.Kind == "run_reset" {
			s += " by=" + ev.Name
		}
		got = append(got, strings.TrimSpace(s))
	}
	want := []string{"run_started", "step_scheduled hold a=1", "step_started hold a=1", "step_waiting hold a=1", "step_resumed hold",
		"step_scheduled after a=1", "step_started after a=1", "step_completed after a=1", "run_completed",
		"run_reset after by=ops", "step_scheduled after a=2", "step_started after a=2", "step_completed after a=2", "run_completed"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	e.api.FlushAudit()
	es, err := e.store.(store.Admin).ListAudit(ctx, &store.ListAuditParams{Action: "runs.reset"})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Target != id || es[0].Actor != "ops" || es[0].Status != 200 {
		t.Errorf("the audit of runs.reset: %+v", es)
	}
	b.noErrors("resetting a run")
}
