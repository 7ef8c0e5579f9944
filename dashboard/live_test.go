package dashboard_test

import (
	"context"
	"fmt"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
)

// A run's page follows the run's stream of events: the run moving on (a
// step resumed through the API) shows without a reload, refreshed by the
// stream (the timed refresh rests while it is connected).
func TestLiveRunPage(t *testing.T) {
	e := newEnv(t, true)
	id := e.start("gate", nil)
	e.waitStatus(id, heph.StatusWaiting)
	b := newBrowser(t)
	b.open(e.url + "/runs/" + id)
	b.eval(`window.loadedOnce = true`, nil)
	b.waitJS("the stream connected", `window.heph.live.streaming === true`)
	if err := e.client.ResumeRun(context.Background(), id, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the run shown completed", `document.querySelector("#run-header")?.dataset.status === "completed"`)
	var same bool
	b.eval(`window.loadedOnce === true && window.heph.live.events > 0`, &same)
	if !same {
		t.Error("the page reloaded, or changed without an event of the stream")
	}
	// The run ended: the stream sent "end" and the page stops following.
	b.waitJS("the stream ended", `window.heph.live.streaming === false`)
	b.noErrors("the live run page")
}

// The runs list follows the stream of the list's changes: a run started
// after the page loaded is listed, and a run that changes status shows
// its new status, without a reload.
func TestLiveRunsList(t *testing.T) {
	e := newEnv(t, true)
	first := e.start("gate", nil)
	e.waitStatus(first, heph.StatusWaiting)
	b := newBrowser(t)
	b.open(e.url + "/?workflow=gate")
	b.eval(`window.loadedOnce = true`, nil)
	b.waitJS("the stream connected", `window.heph.live.streaming === true`)
	second := e.start("gate", nil)
	b.waitJS("the new run listed", fmt.Sprintf(`document.querySelector('tr[data-run=%q]') !== null`, second))
	if err := e.client.ResumeRun(context.Background(), first, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the first run's new status", fmt.Sprintf(`document.querySelector('tr[data-run=%q]')?.dataset.status === "completed"`, first))
	var same bool
	b.eval(`window.loadedOnce === true && window.heph.live.events > 0 && window.heph.live.streaming === true`, &same)
	if !same {
		t.Error("the page reloaded, or changed without the stream")
	}
	b.noErrors("the live runs list")
}
