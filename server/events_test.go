package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
)

// Events through the API: send (201, then 200 with the first for the same
// id), get, list with every filter and the cursor, who may do what, and
// bad input named.
func TestEventsAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		reader, worker := e.token("reader", RoleRead), e.token("worker", RoleWorker)
		e.api.token = e.token("operator", RoleOperator)
		// A trigger on the server's client: GET /events/{id} shows what it
		// did (one started run, one skipped event).
		if err := e.client.DeclareTriggers(t.Context(), &heph.Trigger{Name: "greet-big", Event: "order.paid",
			Target: heph.TargetFlow, TargetName: "greet", Filter: "event.data.amount > 100", Input: `{"name": "order " + string(event.data.order)}`}); err != nil {
			t.Fatal(err)
		}

		var first SentEvent
		r := e.api.call(http.MethodPost, "/api/v1/events", map[string]any{"name": "order.paid", "id": "pay-1",
			"data": map[string]any{"order": 1, "amount": 120, "customer": map[string]any{"id": "c-7"}}}, http.StatusCreated, &first)
		if first.ID != "pay-1" || first.Seq <= 0 || first.Duplicate || r.header.Get("Location") != "/api/v1/events/pay-1" {
			t.Fatalf("send: %s %v", r.body, r.header)
		}
		// The same id again, other data: nothing written, the first back.
		var again SentEvent
		e.api.call(http.MethodPost, "/api/v1/events", map[string]any{"name": "order.paid", "id": "pay-1", "data": 9}, http.StatusOK, &again)
		if !again.Duplicate || again.Seq != first.Seq || !strings.Contains(string(again.Data), `"amount"`) {
			t.Fatalf("re-send: %+v", again)
		}
		// A worker sends too; without an id the server gives one.
		var byWorker SentEvent
		r = e.api.do(req{method: http.MethodPost, path: "/api/v1/events", token: worker, body: map[string]any{"name": "order.paid", "data": map[string]any{"order": 2, "amount": 80}}})
		r.decode(t, &byWorker)
		if r.status != http.StatusCreated || len(byWorker.ID) != 36 {
			t.Fatalf("send as a worker: %d %s", r.status, r.body)
		}
		e.api.call(http.MethodPost, "/api/v1/events", map[string]any{"name": "invoice.paid", "id": "inv-1", "data": map[string]any{"amount": 120.0}}, http.StatusCreated, nil)

		var got SentEvent
		e.api.call(http.MethodGet, "/api/v1/events/pay-1", nil, http.StatusOK, &got)
		if got.Name != "order.paid" || got.Seq != first.Seq {
			t.Errorf("get: %+v", got)
		}
		list := func(q url.Values, token string) []*SentEvent {
			t.Helper()
			var l SentEventList
			r := e.api.do(req{method: http.MethodGet, path: "/api/v1/events?" + q.Encode(), token: token})
			r.decode(t, &l)
			if r.status != http.StatusOK {
				t.Fatalf("list %v: %d %s", q, r.status, r.body)
			}
			return l.Events
		}
		ids := func(es []*SentEvent) string {
			var s []string
			for _, e := range es {
				s = append(s, e.ID)
			}
			return strings.Join(s, ",")
		}
		if got := ids(list(url.Values{}, reader)); got != "inv-1,"+byWorker.ID+",pay-1" {
			t.Errorf("all, newest first, as a reader: %s", got)
		}
		if got := ids(list(url.Values{"name": {"order.paid"}}, "")); got != byWorker.ID+",pay-1" {
			t.Errorf("by name: %s", got)
		}
		if got := ids(list(url.Values{"field": {"amount"}, "value": {"120"}}, "")); got != "inv-1,pay-1" {
			t.Errorf("amount = 120 (120.0 too): %s", got)
		}
		if got := ids(list(url.Values{"field": {"customer.id"}, "value": {`"c-7"`}}, "")); got != "pay-1" {
			t.Errorf("customer.id: %s", got)
		}
		var page SentEventList
		e.api.call(http.MethodGet, "/api/v1/events?limit=2", nil, http.StatusOK, &page)
		if len(page.Events) != 2 || page.Next != page.Events[1].Seq {
			t.Fatalf("page 1: %+v", page)
		}
		if got := ids(list(url.Values{"before_seq": {fmt.Sprint(page.Next)}}, "")); got != "pay-1" {
			t.Errorf("page 2: %s", got)
		}

		// Who may: a reader lists but does not send.
		e.api.do(req{method: http.MethodPost, path: "/api/v1/events", token: reader, body: map[string]any{"name": "x"}}).problem(t, http.StatusForbidden)
		// Bad input, named.
		for _, c := range []struct {
			rq   req
			want string
		}{
			{req{method: http.MethodPost, path: "/api/v1/events", body: map[string]any{"data": 1}, invalid: true}, "name"},
			{req{method: http.MethodPost, path: "/api/v1/events", body: map[string]any{"name": strings.Repeat("n", 201)}, invalid: true}, "name"},
			{req{method: http.MethodPost, path: "/api/v1/events", body: map[string]any{"name": "a\nb"}}, "control character"},
			{req{method: http.MethodPost, path: "/api/v1/events", body: map[string]any{"name": "x", "nope": 1}, invalid: true}, "nope"},
			{req{method: http.MethodGet, path: "/api/v1/events?field=a..b&value=1"}, "segment 2"},
			{req{method: http.MethodGet, path: "/api/v1/events?field=a&value=%7B%7D"}, "not a JSON scalar"},
			{req{method: http.MethodGet, path: "/api/v1/events?value=1"}, "without field"},
			{req{method: http.MethodGet, path: "/api/v1/events?after=yesterday", invalid: true}, "after"},
		} {
			if p := e.api.do(c.rq).problem(t, http.StatusBadRequest); !strings.Contains(fmt.Sprint(p), c.want) {
				t.Errorf("%s %s: %+v, want %q named", c.rq.method, c.rq.path, p, c.want)
			}
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/events/none"}).problem(t, http.StatusNotFound)

		// The trigger's firings, once the client's loop (or this call)
		// carried them out.
		ended := func(id string) []*heph.TriggerFiring {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for {
				if _, err := e.client.DispatchTriggers(t.Context()); err != nil {
					t.Fatal(err)
				}
				e.api.call(http.MethodGet, "/api/v1/events/"+id, nil, http.StatusOK, &got)
				if len(got.Firings) == 1 && got.Firings[0].Status != heph.FiringPending || time.Now().After(deadline) {
					return got.Firings
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		fs := ended("pay-1")
		if len(fs) != 1 || fs[0].Status != heph.FiringStarted || fs[0].RunID == "" {
			t.Fatalf("firings of pay-1: %+v", fs)
		}
		run, err := e.client.GetRun(t.Context(), fs[0].RunID)
		var in struct{ Name string }
		if err != nil || json.Unmarshal(run.Input, &in) != nil || in.Name != "order 1" {
			t.Errorf("the run pay-1 started: %+v, %v", run, err)
		}
		if fs := ended(byWorker.ID); len(fs) != 1 || fs[0].Status != heph.FiringSkipped {
			t.Errorf("firings of an event the filter skips: %+v", fs[0])
		}
	})
}
