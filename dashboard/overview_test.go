package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
)

// The overview counts the window's runs, draws them in the throughput
// chart, and its window selector changes the window.
func TestOverview(t *testing.T) {
	e := newPagesEnv(t, true)
	ok := e.start("order", order{ID: "a1", Amount: 10})
	bad := e.start("order", order{ID: "b2", Amount: 5000})
	gate := e.start("gate", nil)
	e.waitStatus(ok, heph.StatusCompleted)
	e.waitStatus(bad, heph.StatusFailed)
	e.waitStatus(gate, heph.StatusWaiting)

	b := newBrowser(t)
	sum := func(attr string) int {
		var n int
		b.eval(`Array.from(document.querySelectorAll("#throughput g.bucket")).reduce((s, g) => s + Number(g.dataset.`+attr+`), 0)`, &n)
		return n
	}
	for _, w := range []string{"1h", "24h", "7d"} {
		b.open(e.url + "/overview?window=" + w)
		for card, want := range map[string]string{"started": "3", "completed": "1", "failed": "1", "failure-rate": "50%", "active": "1"} {
			if got := b.text("#card-" + card + " .value"); got != want {
				t.Errorf("window %s: the %s card reads %q, want %q", w, card, got, want)
			}
		}
		if c, f := sum("completed"), sum("failed"); c != 1 || f != 1 {
			t.Errorf("window %s: the chart draws %d completed and %d failed, want 1 and 1", w, c, f)
		}
		if n := b.count("#throughput rect.bar.completed"); n != 1 {
			t.Errorf("window %s: %d completed bars", w, n)
		}
		if cur := b.text(".windows a[aria-current]"); cur != w {
			t.Errorf("window %s: the selector marks %q", w, cur)
		}
		if s := b.text("#card-active .label"); !strings.Contains(s, "1 waiting") {
			t.Errorf("window %s: the active card reads %q", w, s)
		}
		if s := b.text(`table.backlog tr[data-queue="batch"]`); !strings.Contains(s, "paused") {
			t.Errorf("window %s: the batch queue's backlog reads %q", w, s)
		}
		b.noErrors("the overview of " + w)
	}
	// The selector is a link to each window.
	b.open(e.url + "/overview")
	b.submit("choose 24h", chromedp.Click(`.windows a[href="/overview?window=24h"]`, chromedp.ByQuery))
	if cur := b.text(".windows a[aria-current]"); cur != "24h" {
		t.Errorf("after choosing 24h the selector marks %q", cur)
	}
	b.noErrors("choosing a window")
}
