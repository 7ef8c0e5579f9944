package server

import (
	"net/http"
	"strings"
	"testing"
)

// POST /runs/{id}/pause and /unpause: by role, repeated
// (a no-op that answers the run), refused with a fix for a finished run;
// the condition shows who paused the run, the history records
// run_paused and run_unpaused with the caller's principal once each, and
// each call is audited.
func TestPauseRun(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		ops, reader := e.token("ops", RoleOperator), e.token("reader", RoleRead)
		e.api.token = e.token("root", RoleAdmin)
		var gate, greet Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &gate)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "ann"}}, http.StatusCreated, &greet)
		e.waitStatus(gate.ID, "waiting")
		e.waitStatus(greet.ID, "completed")

		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + gate.ID + "/pause", token: reader}).problem(t, http.StatusForbidden)
		var r Run
		for range 2 {
			e.api.callAs(ops, http.MethodPost, "/api/v1/runs/"+gate.ID+"/pause", map[string]any{}, http.StatusOK, &r)
			if r.ID != gate.ID || r.Condition == nil || r.Condition.Kind != "paused" || r.Condition.Reason != "paused by ops" || r.Condition.Since.IsZero() {
				t.Fatalf("paused run: %+v (condition %+v)", r, r.Condition)
			}
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + gate.ID + "/pause", token: ops,
			body: map[string]any{"cancel_running": "yes"}, invalid: true}).problem(t, http.StatusBadRequest)
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + greet.ID + "/pause", token: ops}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "finished") || !strings.Contains(p.Fix, "heph show "+greet.ID) {
			t.Errorf("pause of a completed run: %+v", p)
		}
		for range 2 {
			r = Run{} // absent fields stay as they were in a reused value
			e.api.callAs(ops, http.MethodPost, "/api/v1/runs/"+gate.ID+"/unpause", nil, http.StatusOK, &r)
			if r.Condition != nil || r.Status != "waiting" {
				t.Fatalf("unpaused run: %+v (condition %+v)", r, r.Condition)
			}
		}
		var h History
		e.api.call(http.MethodGet, "/api/v1/runs/"+gate.ID+"/history", nil, http.StatusOK, &h)
		var got []string
		for _, ev := range h.Events {
			if ev.Kind == "run_paused" || ev.Kind == "run_unpaused" {
				got = append(got, ev.Kind+" "+ev.Name)
			}
		}
		if strings.Join(got, "|") != "run_paused ops|run_unpaused ops" {
			t.Errorf("history: %v", got)
		}

		var al AuditList
		e.api.call(http.MethodGet, "/api/v1/audit?action=runs.pause", nil, http.StatusOK, &al)
		got = nil
		for _, a := range al.Entries {
			got = append(got, strings.Join([]string{a.Actor, a.Target, http.StatusText(a.Status)}, " "))
		}
		want := []string{"ops " + greet.ID + " Conflict", "ops " + gate.ID + " Bad Request", "ops " + gate.ID + " OK", "ops " + gate.ID + " OK", "reader  Forbidden"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("audit of runs.pause:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// A pause by business id pauses the active run that holds it.
func TestPauseRunByBusinessID(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newOrderEnv(t, b, nil)
		var active Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "order", "business_value": "7"}, http.StatusCreated, &active)
		e.waitStatus(active.ID, "waiting")
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs/order::7/pause", map[string]any{"cancel_running": true}, http.StatusOK, &r)
		if r.ID != active.ID || r.Condition == nil || r.Condition.Kind != "paused" {
			t.Fatalf("order::7 paused %+v (condition %+v)", r, r.Condition)
		}
		r = Run{}
		e.api.call(http.MethodPost, "/api/v1/runs/order::7/unpause", nil, http.StatusOK, &r)
		if r.ID != active.ID || r.Condition != nil {
			t.Fatalf("order::7 unpaused %+v (condition %+v)", r, r.Condition)
		}
	})
}

// POST /operations pause and unpause: every waiting gate run the filter
// selects is paused, then unpaused, each recorded once with the
// operation's creator; a completed run selected too is done (nothing to
// pause); a pause takes no reason but cancel_running.
func TestBulkPause(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		e.api.token = e.token("root", RoleAdmin)
		var ids []string
		for range 3 {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &r)
			ids = append(ids, r.ID)
		}
		for _, id := range ids {
			e.waitStatus(id, "waiting")
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/operations",
			body: map[string]any{"action": "pause", "filter": map[string]any{"workflow": "gate"}, "reason": "why not"}}).problem(t, http.StatusBadRequest)
		for _, action := range []string{"pause", "unpause"} {
			var op Operation
			e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": action, "filter": map[string]any{"workflow": "gate"}}, http.StatusAccepted, &op)
			done := e.waitOperation(op.ID)
			if done.Status != "completed" || done.Done != 3 || done.Failed != 0 {
				t.Fatalf("the %s operation: %+v", action, done)
			}
			for _, id := range ids {
				var r Run
				e.api.call(http.MethodGet, "/api/v1/runs/"+id, nil, http.StatusOK, &r)
				if paused := r.Condition != nil && r.Condition.Kind == "paused" && r.Condition.Reason == "paused by root"; paused != (action == "pause") {
					t.Fatalf("after %s: run %s condition %+v", action, id, r.Condition)
				}
			}
		}
		for _, id := range ids {
			var h History
			e.api.call(http.MethodGet, "/api/v1/runs/"+id+"/history", nil, http.StatusOK, &h)
			var got []string
			for _, ev := range h.Events {
				if ev.Kind == "run_paused" || ev.Kind == "run_unpaused" {
					got = append(got, ev.Kind+" "+ev.Name)
				}
			}
			if strings.Join(got, "|") != "run_paused root|run_unpaused root" {
				t.Errorf("run %s history: %v", id, got)
			}
		}
	})
}
