package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
)

// The triggers page lists every trigger with its flow control and, for
// one that debounces, the groups that wait: one row per key, with its
// events counted; a key's markup is shown as text.
func TestTriggersPage(t *testing.T) {
	e := newPagesEnv(t, false)
	ctx := context.Background()
	const markup = `<i id="evil">a</i>`
	if err := e.client.DeclareTriggers(ctx, &heph.Trigger{Name: "quiet", Event: "doc.edited", Target: heph.TargetFlow, TargetName: "order",
		Key: "event.data.doc", Debounce: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{markup, "b", markup} {
		if _, err := e.client.SendEvent(ctx, "doc.edited", map[string]string{"doc": doc}, nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := e.client.DispatchTriggers(ctx); err != nil {
			t.Fatal(err)
		}
		page, err := e.client.ListTriggerGroups(ctx, "quiet", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Groups) == 2 && len(page.Groups[0].Events)+len(page.Groups[1].Events) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the events are not grouped: %+v", page.Groups)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/triggers")
	sec := `section[data-trigger="quiet"]`
	if n := b.count(sec + " tr[data-group]"); n != 2 {
		t.Fatalf("%d waiting groups shown, want 2", n)
	}
	if fc := b.text(sec + " .flow-control"); !strings.Contains(fc, "debounce 1h0m0s") || !strings.Contains(fc, "event.data.doc") {
		t.Errorf("flow control %q", fc)
	}
	if key, n := b.text(sec+" tr[data-group] td.key"), b.text(sec+" tr[data-group] td.events"); key != markup || n != "2" {
		t.Errorf("the first group: key %q with %q events, want %q with 2", key, n, markup)
	}
	if n := b.count("#evil"); n != 0 {
		t.Errorf("a key's markup became %d elements", n)
	}
	b.noErrors("triggers")
}
