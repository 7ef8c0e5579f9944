package dashboard_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Retry a failed workflow run from its page, after a confirmation: the
// browser goes to the new run, which links back to the old one; then
// Reset, re-apply signals… of that run to its first decision makes
// another run that completes with the signal applied again.
func TestRunPageResetWorkflow(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	charge := workflow.NewActivity("dash_charge", func(_ context.Context, n int) (int, error) {
		if broken.Load() {
			return 0, flow.NonRetryable(errors.New("card declined"))
		}
		return n * 10, nil
	})
	wf := workflow.New("dash_reset_wf", func(ctx workflow.Context, _ struct{}) (int, error) {
		n, err := workflow.WaitSignal[int](ctx, "go")
		if err != nil {
			return 0, err
		}
		return charge.Execute(ctx, n)
	})
	e := newEnv(t, false, func(_ context.Context, c *heph.Client) error {
		return errors.Join(c.RegisterWorkflows(wf), c.RegisterActivities(charge))
	})
	ctx := context.Background()
	r, err := heph.StartWorkflow(ctx, e.client, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	if err := r.Signal(ctx, "go", 3); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusFailed)
	broken.Store(false)

	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + r.ID)
	b.run("retry", jsClick("#action-retry-workflow"), chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	if msg := b.text("#confirm-text"); !strings.Contains(msg, "last good decision") {
		t.Errorf("the retry dialog says %q", msg)
	}
	b.run("confirm the retry", chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.run("the new run's page", chromedp.WaitVisible("#run-reset-from", chromedp.ByQuery))
	old, err := e.client.GetRun(ctx, r.ID)
	if err != nil || old.ResetTo == "" {
		t.Fatalf("the old run after Retry: %+v, %v", old, err)
	}
	if from := b.text("#run-reset-from"); !strings.Contains(from, old.ID[len(old.ID)-8:]) {
		t.Errorf("the new run's page shows reset from %q, want %s", from, old.ID)
	}
	retried := e.waitStatus(old.ResetTo, heph.StatusCompleted)
	if string(retried.Output) != "30" {
		t.Fatalf("the retried run's output %s", retried.Output)
	}

	b.open(e.url + "/runs/" + retried.ID)
	b.run("reset", jsClick("#action-reset-workflow-signals"), chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.SendKeys(`#confirm-fields input[name=point]`, "first", chromedp.ByQuery),
		chromedp.SendKeys(`#confirm-fields input[name=reason]`, "from the page", chromedp.ByQuery),
		chromedp.Click("#confirm-yes", chromedp.ByQuery))
	again, err := e.client.GetRun(ctx, retried.ID)
	for deadline := time.Now().Add(time.Minute); err == nil && again.ResetTo == "" && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		again, err = e.client.GetRun(ctx, retried.ID)
	}
	if err != nil || again.ResetTo == "" {
		t.Fatalf("the retried run after Reset: %+v, %v", again, err)
	}
	if loc := waitLocation(t, b, e.url+"/runs/"+again.ResetTo); !strings.HasPrefix(loc, e.url+"/runs/"+again.ResetTo) {
		t.Errorf("after Reset the browser is at %s, want the new run's page", loc)
	}
	if got := e.waitStatus(again.ResetTo, heph.StatusCompleted); string(got.Output) != "30" {
		t.Fatalf("the reset run's output %s", got.Output)
	}
	h, err := e.client.History(ctx, again.ResetTo)
	if err != nil {
		t.Fatal(err)
	}
	var info string
	for _, ev := range h {
		if ev.Kind == hephtype.EventWorkflowReset {
			info = string(ev.Data)
		}
	}
	if !strings.Contains(info, `"by":"ops"`) || !strings.Contains(info, `"reason":"from the page"`) || !strings.Contains(info, `"point":"first"`) {
		t.Errorf("the reset entry: %s", info)
	}
}
