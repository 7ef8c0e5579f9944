package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
)

// Triggers through the API: a managed trigger put (201, then 200 when
// replaced), listed with the declared one, read, used by the server's
// client, deleted (204, then 404); a declared trigger is not replaced
// (409); bad input names the field or the expression; who may do what.
func TestTriggersAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		reader := e.token("reader", RoleRead)
		e.api.token = e.token("operator", RoleOperator)
		ctx := t.Context()
		if err := e.client.DeclareTriggers(ctx, &heph.Trigger{Name: "coded", Event: "x", Target: heph.TargetFlow, TargetName: "greet"}); err != nil {
			t.Fatal(err)
		}
		body := map[string]any{"event": "user.joined", "target_kind": "flow", "target_name": "greet", "input": `{"name": event.data.user}`}
		var tr Trigger
		e.api.call(http.MethodPut, "/api/v1/triggers/welcome", body, http.StatusCreated, &tr)
		if tr.Name != "welcome" || tr.Declared || tr.Event != "user.joined" || tr.CreatedAt.IsZero() {
			t.Fatalf("put: %+v", tr)
		}
		body["filter"] = `event.data.user != "bot"`
		body["concurrency_key"] = "event.data.user"
		e.api.call(http.MethodPut, "/api/v1/triggers/welcome", body, http.StatusOK, &tr)
		if tr.Filter != `event.data.user != "bot"` || tr.ConcurrencyKey != "event.data.user" {
			t.Fatalf("replace: %+v", tr)
		}
		// Flow control round-trips with durations as strings.
		grouped := map[string]any{"event": "user.left", "target_kind": "flow", "target_name": "greet", "key": "event.data.user",
			"batch": map[string]any{"size": 10, "window": "1m30s"}}
		e.api.call(http.MethodPut, "/api/v1/triggers/farewell", grouped, http.StatusCreated, &tr)
		if tr.Key != "event.data.user" || tr.Batch == nil || *tr.Batch != (TriggerBatch{Size: 10, Window: "1m30s"}) || tr.Throttle != nil || tr.Debounce != "" {
			t.Fatalf("put a batch: %+v", tr)
		}
		delete(grouped, "batch")
		grouped["throttle"] = map[string]any{"limit": 2, "period": "1m"}
		tr = Trigger{}
		e.api.call(http.MethodPut, "/api/v1/triggers/farewell", grouped, http.StatusOK, &tr)
		if tr.Throttle == nil || *tr.Throttle != (TriggerThrottle{Limit: 2, Period: "1m0s"}) || tr.Batch != nil {
			t.Fatalf("put a throttle: %+v", tr)
		}
		e.api.call(http.MethodDelete, "/api/v1/triggers/farewell", nil, http.StatusNoContent, nil)
		tr = Trigger{}
		var list TriggerList
		e.api.do(req{method: http.MethodGet, path: "/api/v1/triggers", token: reader}).decode(t, &list)
		if len(list.Triggers) != 2 || list.Triggers[0].Name != "coded" || !list.Triggers[0].Declared || list.Triggers[1].Name != "welcome" {
			t.Fatalf("list: %+v", list.Triggers)
		}
		// The server's client carries it out.
		if _, err := e.client.SendEvent(ctx, "user.joined", map[string]any{"user": "ada"}, &heph.SendEventOptions{ID: "j1"}); err != nil {
			t.Fatal(err)
		}
		var ev SentEvent
		for {
			e.api.call(http.MethodGet, "/api/v1/events/j1", nil, http.StatusOK, &ev)
			if len(ev.Firings) == 1 && ev.Firings[0].Status != heph.FiringPending {
				break
			}
			if _, err := e.client.DispatchTriggers(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the firing stays pending: %+v", ev.Firings)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if ev.Firings[0].Status != heph.FiringStarted {
			t.Fatalf("firing: %+v", ev.Firings[0])
		}
		if r := e.waitStatus(ev.Firings[0].RunID, heph.StatusCompleted); !strings.Contains(string(r.Output), "hello ada") || r.ConcurrencyKey != "ada" {
			t.Fatalf("run output %s", r.Output)
		}

		p := e.api.do(req{method: http.MethodPut, path: "/api/v1/triggers/coded", body: body}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "declared in code") {
			t.Errorf("put over a declared trigger: %s", p.Detail)
		}
		for _, bad := range []struct {
			body map[string]any
			want string
		}{
			{map[string]any{"target_kind": "flow", "target_name": "greet"}, "event: is required"},
			{map[string]any{"event": "e", "target_kind": "cron", "target_name": "greet"}, `target kind "cron"`},
			{map[string]any{"event": "e", "target_kind": "flow", "target_name": "greet", "filter": "event.data.n >"}, "filter"},
			{map[string]any{"event": "e", "target_kind": "flow", "target_name": "greet", "input": "{"}, "input"},
			{map[string]any{"event": "e", "target_kind": "flow", "target_name": "greet", "business_key": "event.data."}, "business key"},
			{map[string]any{"event": "e", "target_kind": "flow", "target_name": "greet", "debounce": "1s", "batch": map[string]any{"size": 2, "window": "1s"}}, "at most one"},
			{map[string]any{"event": "e", "target_kind": "flow", "target_name": "greet", "batch": map[string]any{"size": 5000, "window": "1s"}}, "batch size 5000"},
			{map[string]any{"event": "e", "target_kind": "flow", "target_name": "greet", "debounce": "soon"}, "debounce"},
		} {
			r := e.api.do(req{method: http.MethodPut, path: "/api/v1/triggers/bad", body: bad.body, unchecked: true})
			if p := r.problem(t, http.StatusBadRequest); !strings.Contains(p.Detail, bad.want) {
				t.Errorf("put %v: %s, want %q", bad.body, p.Detail, bad.want)
			}
		}
		e.api.do(req{method: http.MethodPut, path: "/api/v1/triggers/welcome", body: body, token: reader}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/triggers/welcome", token: reader}).problem(t, http.StatusForbidden)
		e.api.call(http.MethodDelete, "/api/v1/triggers/welcome", nil, http.StatusNoContent, nil)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/triggers/welcome"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/triggers/welcome"}).problem(t, http.StatusNotFound)
	})
}

// GET /triggers/{name}/groups pages a grouped trigger's groups, filters
// them by status, and refuses bad parameters and unknown triggers.
func TestTriggerGroupsAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		reader := e.token("reader", RoleRead)
		e.api.token = e.token("operator", RoleOperator)
		ctx := t.Context()
		// A debounce of an hour: the groups stay open.
		e.api.call(http.MethodPut, "/api/v1/triggers/quiet", map[string]any{"event": "doc.edited", "target_kind": "flow", "target_name": "greet",
			"key": "event.data.doc", "debounce": "1h"}, http.StatusCreated, nil)
		for i, doc := range []string{"a", "b", "a"} {
			if _, err := e.client.SendEvent(ctx, "doc.edited", map[string]any{"doc": doc}, &heph.SendEventOptions{ID: fmt.Sprint("e", i)}); err != nil {
				t.Fatal(err)
			}
		}
		var page heph.TriggerGroupPage
		for {
			if _, err := e.client.DispatchTriggers(ctx); err != nil {
				t.Fatal(err)
			}
			page = heph.TriggerGroupPage{}
			e.api.do(req{method: http.MethodGet, path: "/api/v1/triggers/quiet/groups", token: reader}).decode(t, &page)
			if len(page.Groups) == 2 && len(page.Groups[0].Events)+len(page.Groups[1].Events) == 3 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the events are not grouped: %+v", page.Groups)
			case <-time.After(10 * time.Millisecond):
			}
		}
		for _, g := range page.Groups {
			want := map[string]int{"a": 2, "b": 1}[g.Key]
			if g.Trigger != "quiet" || g.Status != heph.GroupOpen || len(g.Events) != want || g.RunID != "" || g.EndedAt != nil || page.Next != 0 {
				t.Errorf("group %+v (next %d)", g, page.Next)
			}
		}
		var first, rest heph.TriggerGroupPage
		e.api.call(http.MethodGet, "/api/v1/triggers/quiet/groups?limit=1", nil, http.StatusOK, &first)
		if len(first.Groups) != 1 || first.Next != first.Groups[0].ID {
			t.Fatalf("a page of 1: %+v", first)
		}
		e.api.call(http.MethodGet, fmt.Sprint("/api/v1/triggers/quiet/groups?after=", first.Next), nil, http.StatusOK, &rest)
		if len(rest.Groups) != 1 || rest.Groups[0].ID == first.Groups[0].ID || rest.Next != 0 {
			t.Fatalf("the page after: %+v", rest)
		}
		var started heph.TriggerGroupPage
		e.api.call(http.MethodGet, "/api/v1/triggers/quiet/groups?status=started", nil, http.StatusOK, &started)
		if len(started.Groups) != 0 {
			t.Fatalf("started groups: %+v", started.Groups)
		}
		for q, want := range map[string]string{"status=done": "status", "limit=0": "limit", "limit=1001": "limit", "after=x": "after"} {
			p := e.api.do(req{method: http.MethodGet, path: "/api/v1/triggers/quiet/groups?" + q, invalid: true}).problem(t, http.StatusBadRequest)
			if !strings.Contains(p.Detail, want) {
				t.Errorf("?%s: %q, want it to name %s", q, p.Detail, want)
			}
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/triggers/nope/groups"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/triggers/quiet/groups", token: "-"}).problem(t, http.StatusUnauthorized)
	})
}
