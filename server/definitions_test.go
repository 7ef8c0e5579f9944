package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const echoDoc = `{
  "name": "echo-doc",
  "steps": {
    "say": {"action": "echo", "args": {"text": "{{input.text}}"}, "done": true}
  }
}`

func TestDefinitionsDocumentsGraph(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		// Submit a document twice: one version; then run it.
		var d Document
		e.api.call(http.MethodPost, "/api/v1/documents", map[string]any{"name": "echo-doc", "format": "json", "content": echoDoc}, http.StatusCreated, &d)
		if d.Version != 1 || d.Hash == "" || d.Content != nil {
			t.Fatalf("stored %+v", d)
		}
		e.api.call(http.MethodPost, "/api/v1/documents", map[string]any{"name": "echo-doc", "format": "json", "content": echoDoc}, http.StatusCreated, &d)
		if d.Version != 1 {
			t.Fatalf("the same content again: %+v", d)
		}
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "echo-doc", "input": map[string]string{"text": "hi"}}, http.StatusCreated, &r)
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &r)
		if r.Status != "completed" || !strings.Contains(string(r.Output), `"text":"hi"`) {
			t.Fatalf("document run %+v", r)
		}

		// Invalid documents: 422 with positioned errors; nothing stored.
		bad := "name: bad\nsteps:\n  a:\n    action: echo\n    next: nowhere\n"
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/documents", body: map[string]any{"name": "bad", "format": "yaml", "content": bad}}).problem(t, http.StatusUnprocessableEntity)
		if len(p.Errors) == 0 || p.Errors[0].Line == 0 || !strings.Contains(p.Errors[0].Message, "nowhere") {
			t.Fatalf("an invalid document: %+v", p)
		}
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/documents/validate", body: map[string]any{"format": "yaml", "content": "steps:\n  a:\n    action: nope\n    done: true\n"}}).problem(t, http.StatusUnprocessableEntity)
		if len(p.Errors) == 0 {
			t.Fatalf("an unknown action: %+v", p)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/documents/validate", body: map[string]any{"format": "json", "content": "a: 1"}}).problem(t, http.StatusUnprocessableEntity)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/documents/validate", body: map[string]any{"format": "toml", "content": "x"}, invalid: true}).problem(t, http.StatusBadRequest)
		var v Validation
		e.api.call(http.MethodPost, "/api/v1/documents/validate", map[string]any{"format": "json", "content": echoDoc}, http.StatusOK, &v)
		if !v.Valid {
			t.Fatal("a valid document is not valid")
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/documents/bad"}).problem(t, http.StatusNotFound)

		// List and get.
		var dl DocumentList
		e.api.call(http.MethodGet, "/api/v1/documents", nil, http.StatusOK, &dl)
		if len(dl.Documents) != 4 || dl.Documents[0].Content != nil {
			t.Fatalf("documents %+v", dl)
		}
		e.api.call(http.MethodGet, "/api/v1/documents?name=echo-doc", nil, http.StatusOK, &dl)
		if len(dl.Documents) != 1 {
			t.Fatalf("documents named echo-doc: %+v", dl)
		}
		e.api.call(http.MethodGet, "/api/v1/documents/echo-doc?version=1", nil, http.StatusOK, &d)
		if d.Content == nil || *d.Content != echoDoc {
			t.Fatalf("document with content %+v", d)
		}

		// Definitions: the flows, the job kind, the workflow and the
		// documents.
		var ds []Definition
		e.api.call(http.MethodGet, "/api/v1/definitions", nil, http.StatusOK, &ds)
		var names []string
		for _, d := range ds {
			names = append(names, d.Kind+":"+d.Name)
		}
		want := "document:approval document:approval-ann document:echo-doc document:remote-doc flow:flaky flow:gate flow:greet flow:remote job:email workflow:counter workflow:inbox"
		if strings.Join(names, " ") != want {
			t.Fatalf("definitions %s, want %s", strings.Join(names, " "), want)
		}

		// Graphs of a Go flow and of a document; a workflow has none.
		var g struct {
			Flow  string `json:"flow"`
			Nodes []struct {
				ID, Kind string
			} `json:"nodes"`
			Edges []struct{ From, To, Event string } `json:"edges"`
		}
		e.api.call(http.MethodGet, "/api/v1/definitions/gate/graph", nil, http.StatusOK, &g)
		if g.Flow != "gate" || len(g.Nodes) != 4 || len(g.Edges) != 4 {
			t.Fatalf("graph of gate: %+v", g)
		}
		e.api.call(http.MethodGet, "/api/v1/definitions/approval/graph?format=json", nil, http.StatusOK, &g)
		if g.Flow != "approval" || g.Nodes[1].ID != "review" || g.Nodes[1].Kind != "wait" {
			t.Fatalf("graph of the approval document: %+v", g)
		}
		res := e.api.call(http.MethodGet, "/api/v1/definitions/gate/graph?format=mermaid", nil, http.StatusOK, nil)
		if !strings.HasPrefix(string(res.body), "flowchart TD\n") || !strings.HasPrefix(res.header.Get("Content-Type"), "text/vnd.mermaid") {
			t.Fatalf("mermaid: %s %s", res.header.Get("Content-Type"), res.body)
		}
		res = e.api.call(http.MethodGet, "/api/v1/definitions/gate/graph?format=dot", nil, http.StatusOK, nil)
		if !strings.HasPrefix(string(res.body), `digraph "gate" {`) {
			t.Fatalf("dot: %s", res.body)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/definitions/counter/graph"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/definitions/gate/graph?format=png", invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/definitions/gate/graph?version=9"}).problem(t, http.StatusNotFound)
	})
}

func TestSchedules(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var s Schedule
		e.api.call(http.MethodPost, "/api/v1/schedules", map[string]any{
			"id": "nightly", "target_kind": "flow", "target_name": "greet", "cron": "0 3 * * *", "time_zone": "Europe/Paris",
			"input": map[string]string{"name": "cron"}, "catch_up": map[string]any{"ticks": 0}, "paused": true,
		}, http.StatusCreated, &s)
		if s.ID != "nightly" || s.Overlap != "skip" || !s.Paused || s.TimeZone != "Europe/Paris" {
			t.Fatalf("created %+v", s)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/schedules", body: map[string]any{"id": "nightly", "target_kind": "flow", "target_name": "greet", "cron": "0 3 * * *"}}).problem(t, http.StatusConflict)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/schedules", body: map[string]any{"id": "bad", "target_kind": "flow", "target_name": "greet", "cron": "every day"}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/schedules", body: map[string]any{"id": "bad", "target_kind": "flow", "target_name": "greet", "every": "soon"}, invalid: false}).problem(t, http.StatusBadRequest)

		var u Schedule
		e.api.call(http.MethodPut, "/api/v1/schedules/nightly", map[string]any{"target_kind": "flow", "target_name": "greet", "every": "1h", "paused": true}, http.StatusOK, &u)
		if u.Every != "1h0m0s" || u.Cron != "" || u.Input != nil {
			t.Fatalf("updated %+v", u)
		}
		e.api.call(http.MethodPost, "/api/v1/schedules/nightly/resume", nil, http.StatusOK, &s)
		if s.Paused || s.NextFire == nil {
			t.Fatalf("resumed %+v", s)
		}
		e.api.call(http.MethodPost, "/api/v1/schedules/nightly/pause", nil, http.StatusOK, &s)
		if !s.Paused {
			t.Fatalf("paused %+v", s)
		}
		var times []time.Time
		e.api.call(http.MethodGet, "/api/v1/schedules/nightly/next?n=3", nil, http.StatusOK, &times)
		if len(times) != 3 || times[1].Sub(times[0]) != time.Hour {
			t.Fatalf("next fire times %v", times)
		}
		var r Run
		e.api.call(http.MethodPost, "/api/v1/schedules/nightly/trigger", nil, http.StatusCreated, &r)
		if r.Workflow != "greet" {
			t.Fatalf("triggered %+v", r)
		}
		now := time.Now().UTC().Truncate(time.Hour)
		var bf Backfill
		e.api.call(http.MethodPost, "/api/v1/schedules/nightly/backfill", map[string]any{"from": now.Add(-3 * time.Hour), "to": now.Add(-time.Hour)}, http.StatusOK, &bf)
		if len(bf.RunIDs) != 3 {
			t.Fatalf("backfill %+v", bf)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/schedules/nightly/backfill", body: map[string]any{"from": "yesterday", "to": now}, invalid: true}).problem(t, http.StatusBadRequest)
		var log []ScheduleRun
		e.api.call(http.MethodGet, "/api/v1/schedules/nightly/runs?limit=10", nil, http.StatusOK, &log)
		if len(log) != 3 || log[0].Outcome != "started" || log[0].RunID != bf.RunIDs[2] {
			t.Fatalf("tick log %+v (a trigger is not a tick)", log)
		}
		var list ScheduleList
		e.api.call(http.MethodGet, "/api/v1/schedules", nil, http.StatusOK, &list)
		if len(list.Schedules) != 1 || list.Next != "" {
			t.Fatalf("schedules %+v", list)
		}
		e.api.call(http.MethodGet, "/api/v1/schedules/nightly", nil, http.StatusOK, &s)
		e.api.call(http.MethodDelete, "/api/v1/schedules/nightly", nil, http.StatusNoContent, nil)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/schedules/nightly"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/schedules/nightly"}).problem(t, http.StatusNotFound)
	})
}

func TestQueuesAndWorkers(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var q Queue
		e.api.call(http.MethodPut, "/api/v1/queues/bulk", map[string]any{"max_running": 4, "rate": map[string]any{"limit": 10, "period": "1s"}, "fair": true}, http.StatusOK, &q)
		if q.Name != "bulk" || !q.Configured || q.Options.MaxRunning != 4 || q.Options.Rate == nil || q.Options.Rate.Limit != 10 || !q.Options.Fair {
			t.Fatalf("set %+v", q)
		}
		e.api.do(req{method: http.MethodPut, path: "/api/v1/queues/bulk", body: map[string]any{"max_running": -1}, invalid: true}).problem(t, http.StatusBadRequest)
		e.api.call(http.MethodPost, "/api/v1/queues/bulk/pause", nil, http.StatusOK, &q)
		if !q.Paused {
			t.Fatalf("paused %+v", q)
		}
		e.api.call(http.MethodPost, "/api/v1/queues/bulk/resume", nil, http.StatusOK, &q)
		if q.Paused {
			t.Fatalf("resumed %+v", q)
		}
		var qs []Queue
		e.api.call(http.MethodGet, "/api/v1/queues", nil, http.StatusOK, &qs)
		if len(qs) == 0 {
			t.Fatal("no queues")
		}
		e.api.call(http.MethodGet, "/api/v1/queues/bulk", nil, http.StatusOK, &q)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/queues/nope"}).problem(t, http.StatusNotFound)

		// The client's own worker is live.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var ws []Worker
			e.api.call(http.MethodGet, "/api/v1/workers", nil, http.StatusOK, &ws)
			if len(ws) > 0 {
				if len(ws[0].Handlers) == 0 || len(ws[0].Queues) == 0 {
					t.Fatalf("workers %+v", ws)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no live worker after 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// Paths and methods the API does not have are problems too.
func TestNotFoundAndMethod(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	get := func(method, path string) *resp { return rawDo(t, e, method, path) }
	get(http.MethodGet, "/api/v1/nothing").problem(t, http.StatusNotFound)
	r := get(http.MethodPatch, "/api/v1/runs")
	p := r.problem(t, http.StatusMethodNotAllowed)
	if !strings.Contains(r.header.Get("Allow"), "POST") || !strings.Contains(p.Detail, "GET") {
		t.Fatalf("405: %v %+v", r.header, p)
	}
}
