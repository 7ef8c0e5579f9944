package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// A page that is left closes its stream, and follows again when it is
// shown again. A browser may keep a page it leaves (the back/forward
// cache) with its stream open, holding one of its six connections to the
// server: a few pages later, the next page waited a minute for one.
func TestLiveStreamClosedWhenLeft(t *testing.T) {
	e := newEnv(t, true)
	id := e.start("gate", nil)
	e.waitStatus(id, heph.StatusWaiting)
	b := newBrowser(t)
	b.open(e.url + "/?workflow=gate")
	b.waitJS("the stream connected", `window.heph.live.streaming === true`)
	waitStreams(t, e, 1, "the runs list open")
	b.open(e.url + "/definitions")
	// Without the close, the kept page held its stream for a minute.
	waitStreams(t, e, 0, "the runs list left")
	// history.back, not chromedp.NavigateBack: a page the browser kept
	// comes back without a load event, which NavigateBack waits for.
	// (The server's count is the witness: chromedp loses track of a page
	// that comes back from the cache.)
	b.eval(`setTimeout(() => history.back(), 0)`, nil)
	waitStreams(t, e, 1, "the runs list shown again")
	b.noErrors("leaving and coming back")
}

// waitStreams waits, for up to 20 s (a kept page's stream stayed open
// for a minute), until the server has n streams open.
func waitStreams(t *testing.T, e *env, n int, when string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.api.OpenStreams() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d streams open, want %d", when, e.api.OpenStreams(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
