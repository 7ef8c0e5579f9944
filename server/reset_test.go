package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// resetHistory is a run's history from the API, one line per entry
// (kind, step, attempt, name).
func (e *env) resetHistory(t *testing.T, id string) []string {
	t.Helper()
	var h History
	e.api.call(http.MethodGet, "/api/v1/runs/"+id+"/history", nil, http.StatusOK, &h)
	var out []string
	for _, ev := range h.Events {
		s := ev.Kind
		if ev.Step != "" {
			s += " " + ev.Step
		}
		if ev.Attempt != 0 {
			s += fmt.Sprintf(" a=%d", ev.Attempt)
		}
		if ev.Kind == "run_reset" {
			s += " by=" + ev.Name + " " + string(ev.Data)
		}
		out = append(out, s)
	}
	return out
}

// POST /runs/{id}/reset: refused to a reader; a waiting gate run reset to
// its waiting step waits again (attempt 2); resumed, it completes; reset
// to its last step, that step runs again and the run completes again with
// the gate's output kept. A repeated Idempotency-Key resets once. The
// history is checked entry by entry, with the caller as the actor; an
// unknown step is a 400 naming it; a cancelled run and a workflow run a
// 409 with a fix; each call is audited.
func TestResetRun(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		ops, reader := e.token("ops", RoleOperator), e.token("reader", RoleRead)
		e.api.token = e.token("root", RoleAdmin)
		var gate Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &gate)
		e.waitStatus(gate.ID, "waiting")
		path := "/api/v1/runs/" + gate.ID + "/reset"
		e.api.do(req{method: http.MethodPost, path: path, token: reader, body: map[string]any{"step": "wait"}}).problem(t, http.StatusForbidden)
		p := e.api.do(req{method: http.MethodPost, path: path, token: ops, body: map[string]any{"step": "wiat"}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `"wiat"`) || !strings.Contains(p.Detail, `"wait"`) {
			t.Errorf("reset to an unknown step: %+v", p)
		}
		var r Run
		for range 2 {
			e.api.do(req{method: http.MethodPost, path: path, token: ops, body: map[string]any{"step": "wait"},
				header: map[string]string{"Idempotency-Key": "k1"}}).decode(t, &r)
			if r.ID != gate.ID || r.Status == "completed" {
				t.Fatalf("reset run: %+v", r)
			}
		}
		e.waitStatus(gate.ID, "waiting")
		e.api.call(http.MethodPost, "/api/v1/runs/"+gate.ID+"/resume", map[string]any{"event": "go", "payload": "ok"}, http.StatusAccepted, nil)
		e.waitStatus(gate.ID, "completed")
		e.api.callAs(ops, http.MethodPost, path, map[string]any{"step": "after"}, http.StatusOK, &r)
		done := e.waitStatus(gate.ID, "completed")
		if string(done.Output) != `{"after":"done"}` {
			t.Errorf("output after the reset: %s", done.Output)
		}
		want := []string{"run_started", "step_scheduled wait a=1", "step_started wait a=1", "step_waiting wait a=1",
			`run_reset wait by=ops {"steps":["wait","after"]}`, "step_cancelled wait", "step_scheduled wait a=2", "step_started wait a=2", "step_waiting wait a=2",
			"step_resumed wait", "step_scheduled after a=1", "step_started after a=1", "step_completed after a=1", "run_completed",
			`run_reset after by=ops {"steps":["after"]}`, "step_scheduled after a=2", "step_started after a=2", "step_completed after a=2", "run_completed"}
		if got := e.resetHistory(t, gate.ID); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("history:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}

		e.api.call(http.MethodPost, "/api/v1/runs/"+gate.ID+"/cancel", map[string]any{}, http.StatusConflict, nil)
		var other Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &other)
		e.waitStatus(other.ID, "waiting")
		e.api.call(http.MethodPost, "/api/v1/runs/"+other.ID+"/cancel", map[string]any{}, http.StatusAccepted, nil)
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + other.ID + "/reset", token: ops, body: map[string]any{"step": "wait"}}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "cancelled") || !strings.Contains(p.Fix, "start a new run") {
			t.Errorf("reset of a cancelled run: %+v", p)
		}

		var wf Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 1}, http.StatusCreated, &wf)
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + wf.ID + "/reset", token: ops, body: map[string]any{"step": "x"}}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "code-first workflow run") {
			t.Errorf("reset of a workflow run: %+v", p)
		}

		var al AuditList
		e.api.call(http.MethodGet, "/api/v1/audit?action=runs.reset", nil, http.StatusOK, &al)
		var got []string
		for _, a := range al.Entries {
			got = append(got, strings.Join([]string{a.Actor, a.Target, http.StatusText(a.Status)}, " "))
		}
		wantAudit := []string{"ops " + wf.ID + " Conflict", "ops " + other.ID + " Conflict", "ops " + gate.ID + " OK", "ops " + gate.ID + " OK", "ops " + gate.ID + " OK",
			"ops " + gate.ID + " Bad Request", "reader  Forbidden"}
		if strings.Join(got, "|") != strings.Join(wantAudit, "|") {
			t.Errorf("audit of runs.reset:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantAudit, "\n"))
		}
	})
}

// POST /operations reset: every completed greet run the filter selects
// (jobs-like runs of one step: no step named) runs again once, recorded
// with the operation's creator; a gate run selected too, whose reset
// names no step, fails the operation for that run only.
func TestBulkReset(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		e.api.token = e.token("root", RoleAdmin)
		var ids []string
		for range 3 {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "ann"}}, http.StatusCreated, &r)
			ids = append(ids, r.ID)
		}
		var gate Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate", "tags": []string{"bulk"}}, http.StatusCreated, &gate)
		for _, id := range ids {
			e.waitStatus(id, "completed")
		}
		e.waitStatus(gate.ID, "waiting")
		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "reset", "filter": map[string]any{"ids": append(ids, gate.ID)}}, http.StatusAccepted, &op)
		done := e.waitOperation(op.ID)
		if done.Status != "completed" || done.Done != 3 || done.Failed != 1 || len(done.Errors) != 1 || !strings.Contains(done.Errors[0], "the step to reset to is empty") {
			t.Fatalf("the reset operation: %+v", done)
		}
		for _, id := range ids {
			e.waitStatus(id, "completed")
			want := []string{"run_started", "step_scheduled hello a=1", "step_started hello a=1", "step_completed hello a=1", "run_completed",
				`run_reset hello by=root {"steps":["hello"]}`, "step_scheduled hello a=2", "step_started hello a=2", "step_completed hello a=2", "run_completed"}
			if got := e.resetHistory(t, id); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("run %s history:\n  %s\nwant:\n  %s", id, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
	})
}
