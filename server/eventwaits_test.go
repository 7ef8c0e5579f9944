package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// A run's waits for events through the API (GET /runs/{id}/event-waits),
// and the waits an event matched with the event (GET /events/{id}).
func TestEventWaitsAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		e.api.token = e.token("operator", RoleOperator)
		ctx := t.Context()
		run, err := e.client.StartRun(ctx, "greet", map[string]string{"name": "ann"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.api.call(http.MethodPost, "/api/v1/events", map[string]any{"name": "never.waited", "id": "ev-1"}, http.StatusCreated, nil)
		now := time.Now().UTC()
		st := e.client.Store()
		if _, err := st.PutEventWait(ctx, &store.EventWait{ID: run.ID + ":x", RunID: run.ID, Kind: store.EventWaitWorkflow,
			Event: "invoice.paid", Match: "true", From: now, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.MatchEventWait(ctx, run.ID+":x", "ev-1", now); err != nil {
			t.Fatal(err)
		}
		var l EventWaitList
		e.api.call(http.MethodGet, "/api/v1/runs/"+run.ID+"/event-waits", nil, http.StatusOK, &l)
		if len(l.Waits) != 1 || l.Waits[0].ID != run.ID+":x" || l.Waits[0].MatchedEventID != "ev-1" || l.Waits[0].Event != "invoice.paid" {
			t.Fatalf("waits of the run: %+v", l.Waits)
		}
		var ev SentEvent
		e.api.call(http.MethodGet, "/api/v1/events/ev-1", nil, http.StatusOK, &ev)
		if len(ev.Waits) != 1 || ev.Waits[0].RunID != run.ID {
			t.Fatalf("waits of the event: %+v", ev.Waits)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/nope/event-waits"}).problem(t, http.StatusNotFound)
	})
}
