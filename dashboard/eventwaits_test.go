package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
)

// A run's waits for events on its page ("Waits for event …", then
// "Resumed by event <link>" once one matched), and the waiting runs on the
// event's page, over plain HTTP.
func TestEventWaitsPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	run := e.start("order", order{ID: "o-1", Amount: 3})
	reader := e.token("viewer", server.RoleRead)
	now := time.Now().UTC()
	st := e.client.Store()
	if _, err := st.PutEventWait(ctx, &store.EventWait{ID: run + ":pay#0", RunID: run, Kind: store.EventWaitStep, Step: "pay", ResumeWith: "received",
		Event: "invoice.paid", Match: "event.data.invoice == input.invoice", From: now, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	status, body := e.page("/runs/"+run, reader)
	if status != http.StatusOK || !strings.Contains(body, `class="event-wait"`) || !strings.Contains(body, "event invoice.paid") {
		t.Fatalf("the run's page before a match: %d\n%s", status, body)
	}
	if _, err := e.client.SendEvent(ctx, "invoice.paid", map[string]any{"invoice": 1}, &heph.SendEventOptions{ID: "inv-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.MatchEventWait(ctx, run+":pay#0", "inv-1", now); err != nil {
		t.Fatal(err)
	}
	status, body = e.page("/runs/"+run, reader)
	if status != http.StatusOK || !strings.Contains(body, "Resumed by") || !strings.Contains(body, `<a href="/events/inv-1" class="mono">inv-1</a>`) {
		t.Errorf("the run's page after the match: %d\n%s", status, body)
	}
	status, body = e.page("/events/inv-1", reader)
	if status != http.StatusOK || !strings.Contains(body, "Waiting runs") || !strings.Contains(body, `href="/runs/`+run+`"`) {
		t.Errorf("the event's page: %d\n%s", status, body)
	}
	if _, body = e.page("/events/nothing-waits", reader); strings.Contains(body, "Waiting runs") {
		t.Errorf("an event no wait matched shows Waiting runs")
	}
}
