package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The result long-poll answers 202 while the run waits, and 200 once it
// ends: a poll that is waiting when the run is resumed is released by the
// run's end.
func TestResultLongPollAndResume(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &r)
		e.waitStatus(r.ID, "waiting")

		res := e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result", nil, http.StatusAccepted, nil)
		if res.header.Get("Retry-After") == "" {
			t.Error("a 202 result without Retry-After")
		}
		// A wait that ends before the run does: 202 too.
		var w Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=1ms", nil, http.StatusAccepted, &w)
		if w.Status != "waiting" || w.Steps[0].Status != "waiting" {
			t.Fatalf("the waiting run: %+v", w)
		}

		type answer struct {
			r   *resp
			err error
		}
		polled := make(chan answer, 1)
		go func() {
			r, err := e.api.send(req{method: http.MethodGet, path: "/api/v1/runs/" + r.ID + "/result?wait=60s"})
			polled <- answer{r, err}
		}()

		// Bad resumes change nothing.
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/resume", body: map[string]any{"event": "nope"}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/resume", body: map[string]any{}, invalid: true}).problem(t, http.StatusBadRequest)

		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/resume", map[string]any{"event": "go", "payload": map[string]int{"n": 1}}, http.StatusAccepted, nil)
		a := <-polled
		if a.err != nil {
			t.Fatal(a.err)
		}
		var done Run
		if a.r.status != http.StatusOK {
			t.Fatalf("the long poll answered %d: %s", a.r.status, a.r.body)
		}
		a.r.decode(t, &done)
		if done.Status != "completed" || string(done.Output) != `{"after":"done"}` {
			t.Fatalf("the run after the resume: %+v", done)
		}
		// Resuming a finished run is a conflict.
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/resume", body: map[string]any{"event": "go"}}).problem(t, http.StatusConflict)
	})
}

func TestCancel(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &r)
		var c Run
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", map[string]any{"reason": "changed my mind"}, http.StatusAccepted, &c)
		if c.Status != "cancelled" || !strings.Contains(c.Error, "changed my mind") {
			t.Fatalf("cancelled run %+v", c)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/cancel"}).problem(t, http.StatusConflict)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/nope/cancel"}).problem(t, http.StatusNotFound)
	})
}

// A workflow run: signals, updates (completed, accepted, failed,
// not accepted), named queries, the published state, and its result.
func TestWorkflowMessages(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 1, "workflow_id": "c-1"}, http.StatusCreated, &r)
		if r.Kind != "workflow" || r.BusinessID == "" {
			t.Fatalf("started %+v", r)
		}
		base := "/api/v1/runs/" + r.ID
		e.api.call(http.MethodPost, base+"/signals/add", map[string]any{"payload": 2}, http.StatusAccepted, nil)
		// The signal is applied when the query reads 3.
		deadline := time.Now().Add(30 * time.Second)
		for {
			var q QueryResult
			e.api.call(http.MethodPost, base+"/queries/count", map[string]any{}, http.StatusOK, &q)
			if string(q.Result) == "3" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the count is %s after 30s, want 3", q.Result)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var u UpdateResult
		e.api.call(http.MethodPost, base+"/updates/set", map[string]any{"args": 10}, http.StatusOK, &u)
		if u.Stage != "completed" || string(u.Result) != "3" {
			t.Fatalf("update set 10: %+v", u)
		}
		var st State
		e.api.call(http.MethodGet, base+"/state", nil, http.StatusOK, &st)
		if string(st.State) != "10" {
			t.Fatalf("state %s, want 10", st.State)
		}
		// A failing handler: 422; an update no phase takes: 409.
		e.api.do(req{method: http.MethodPost, path: base + "/updates/set", body: map[string]any{"args": -1}}).problem(t, http.StatusUnprocessableEntity)
		e.api.do(req{method: http.MethodPost, path: base + "/updates/nope", body: map[string]any{"args": 1}}).problem(t, http.StatusConflict)
		e.api.do(req{method: http.MethodPost, path: base + "/updates/set", body: map[string]any{"wait_for": "soon"}, invalid: true}).problem(t, http.StatusBadRequest)
		// Unknown query: 400.
		e.api.do(req{method: http.MethodPost, path: base + "/queries/nope"}).problem(t, http.StatusBadRequest)

		e.api.call(http.MethodPost, base+"/updates/set", map[string]any{"args": 7, "wait_for": "accepted", "id": "set-7"}, http.StatusAccepted, &u)
		if u.Stage != "accepted" {
			t.Fatalf("update accepted: %+v", u)
		}
		e.api.call(http.MethodPost, base+"/signals/done", nil, http.StatusAccepted, nil)
		var done Run
		e.api.call(http.MethodGet, base+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" || string(done.Output) != "7" {
			t.Fatalf("the workflow's result: %+v", done)
		}
		e.api.do(req{method: http.MethodPost, path: base + "/signals/add", body: map[string]any{"payload": 1}}).problem(t, http.StatusConflict)
	})
}

// Approval gates: the pending list, a caller who is not an assignee
// (403), approve, and a repeated approval.
func TestApprovals(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r, ann Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approval", "input": map[string]string{"title": "plan"}}, http.StatusCreated, &r)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approval-ann", "input": map[string]string{"title": "plan"}}, http.StatusCreated, &ann)
		if r.Document == nil || r.Document.Name != "approval" {
			t.Fatalf("document run %+v", r)
		}
		e.waitStatus(r.ID, "waiting")
		e.waitStatus(ann.ID, "waiting")
		var ps []PendingApproval
		e.api.call(http.MethodGet, "/api/v1/approvals?assignee=insecure", nil, http.StatusOK, &ps)
		if len(ps) != 1 || ps[0].RunID != r.ID || ps[0].Step != "review" || ps[0].Prompt != "Ship it?" {
			t.Fatalf("pending approvals %+v", ps)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + ann.ID + "/steps/review/approve"}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/steps/ship/approve"}).problem(t, http.StatusBadRequest)
		var d Decision
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/steps/review/approve", map[string]any{"comment": "ok"}, http.StatusOK, &d)
		if d.Event != "approved" || d.Actor != "insecure" || d.Comment != "ok" || d.Repeated {
			t.Fatalf("decision %+v", d)
		}
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/steps/review/approve", map[string]any{"comment": "ok"}, http.StatusOK, &d)
		if !d.Repeated {
			t.Fatalf("a repeated approval: %+v", d)
		}
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" {
			t.Fatalf("approved run %+v", done)
		}
		// The body names no groups: they come from the credential.
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + ann.ID + "/steps/review/reject", body: map[string]any{"groups": []string{"x"}}, invalid: true}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, "come from its credentials") {
			t.Errorf("groups in the body: %+v", p)
		}
	})
}

// Requests that do not decode are 400 problems naming the field; too
// large ones 413.
func TestStartErrors(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{Insecure: true, MaxBodyBytes: 1024})
		post := func(body any, invalid bool) *resp {
			return e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: body, invalid: invalid})
		}
		for _, tc := range []struct {
			body    any
			invalid bool
			status  int
			detail  string
		}{
			{map[string]any{"name": "nope"}, false, http.StatusNotFound, "nope"},
			{map[string]any{"name": ""}, true, http.StatusBadRequest, "name"},
			{map[string]any{}, true, http.StatusBadRequest, "name"},
			{map[string]any{"name": "greet", "colour": "red"}, true, http.StatusBadRequest, `unknown field "colour"`},
			{map[string]any{"name": 3}, true, http.StatusBadRequest, "name: expected a string, got number"},
			{map[string]any{"name": "greet", "tags": "x"}, true, http.StatusBadRequest, "tags: expected an array"},
			{map[string]any{"name": "greet", "version": "1"}, true, http.StatusBadRequest, "version: expected an integer"},
			{map[string]any{"name": "greet", "kind": "robot"}, true, http.StatusBadRequest, "kind"},
			{map[string]any{"kind": "workflow", "name": "counter", "business_value": "x"}, false, http.StatusBadRequest, "business_value"},
			{map[string]any{"name": "greet", "workflow_id": "x"}, false, http.StatusBadRequest, "workflow_id"},
			{`{"name": "greet"`, true, http.StatusBadRequest, "not valid JSON"},
			{`{"name": "greet"} {}`, true, http.StatusBadRequest, "more than one"},
			{`[]`, true, http.StatusBadRequest, "expected an object"},
			{map[string]any{"name": "greet", "input": strings.Repeat("x", 2048)}, false, http.StatusRequestEntityTooLarge, "larger than 1024"},
		} {
			p := post(tc.body, tc.invalid).problem(t, tc.status)
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("%v: detail %q, want it to say %q", tc.body, p.Detail, tc.detail)
			}
		}
		// No body at all.
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", invalid: true}).problem(t, http.StatusBadRequest)
	})
}
