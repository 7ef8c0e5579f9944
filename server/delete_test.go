package server

import (
	"net/http"
	"strings"
	"testing"
)

// DELETE /runs/{id}: refused for an active run without force (409 with a
// fix), by role; forced, or of a finished run, it deletes the run with
// its history; a second delete is a 404; each call is audited with the
// caller's principal.
func TestDeleteRun(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		ops, reader := e.token("ops", RoleOperator), e.token("reader", RoleRead)
		e.api.token = e.token("root", RoleAdmin)
		var gate, greet Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &gate)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "ann"}}, http.StatusCreated, &greet)
		e.waitStatus(gate.ID, "waiting")
		e.waitStatus(greet.ID, "completed")

		e.api.do(req{method: http.MethodDelete, path: "/api/v1/runs/" + greet.ID, token: reader}).problem(t, http.StatusForbidden)
		p := e.api.do(req{method: http.MethodDelete, path: "/api/v1/runs/" + gate.ID, token: ops}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "active") || !strings.Contains(p.Fix, "heph cancel "+gate.ID) || !strings.Contains(p.Fix, "--force") {
			t.Errorf("delete of a waiting run: %+v", p)
		}
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/runs/" + gate.ID + "?force=perhaps", token: ops, invalid: true}).problem(t, http.StatusBadRequest)
		e.waitStatus(gate.ID, "waiting") // still there

		var d DeletedRun
		e.api.callAs(ops, http.MethodDelete, "/api/v1/runs/"+greet.ID, nil, http.StatusOK, &d)
		if d != (DeletedRun{ID: greet.ID, Workflow: "greet", Kind: "flow", Status: "completed"}) {
			t.Errorf("deleted %+v", d)
		}
		e.api.callAs(ops, http.MethodDelete, "/api/v1/runs/"+gate.ID+"?force=true", nil, http.StatusOK, &d)
		if d.ID != gate.ID || d.Status != "waiting" || !d.Forced {
			t.Errorf("forced delete: %+v", d)
		}
		for _, id := range []string{gate.ID, greet.ID} {
			e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + id}).problem(t, http.StatusNotFound)
			e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + id + "/history"}).problem(t, http.StatusNotFound)
			// A second delete (a retry whose answer was lost) is a 404.
			p := e.api.do(req{method: http.MethodDelete, path: "/api/v1/runs/" + id, token: ops}).problem(t, http.StatusNotFound)
			if p.Fix == "" {
				t.Errorf("second delete: a 404 without a fix: %+v", p)
			}
		}

		var al AuditList
		e.api.call(http.MethodGet, "/api/v1/audit?action=runs.delete", nil, http.StatusOK, &al)
		var got []string
		for _, a := range al.Entries {
			got = append(got, strings.Join([]string{a.Actor, a.Target, a.Detail, http.StatusText(a.Status)}, " "))
		}
		// Newest first. The forbidden call has no target: it never
		// reached the handler.
		want := []string{"ops " + greet.ID + "  Not Found", "ops " + gate.ID + "  Not Found", "ops " + gate.ID + " forced OK",
			"ops " + greet.ID + "  OK", "ops " + gate.ID + "  Bad Request", "ops " + gate.ID + "  Conflict", "reader   Forbidden"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("audit of runs.delete:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// A remote worker that holds a task of a run deleted by force cannot
// complete it, fail it or heartbeat it: the task is gone with the run.
func TestDeleteRunFencesWorker(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin := e.token("admin", RoleAdmin)
		e.api.token = e.token("py", RoleWorker)
		var r Run
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: admin, body: map[string]any{"name": "remote", "input": map[string]string{"text": "hi"}}}).decode(t, &r)
		task := e.claimOne("shout")
		if task.RunID != r.ID {
			t.Fatalf("claimed %+v", task)
		}
		var d DeletedRun
		e.api.callAs(admin, http.MethodDelete, "/api/v1/runs/"+r.ID+"?force=true", nil, http.StatusOK, &d)
		if d.Tasks != 1 || d.Status != "running" {
			t.Fatalf("forced delete of the running run: %+v", d)
		}
		for _, path := range []string{"/api/v1/tasks/complete", "/api/v1/tasks/fail"} {
			body := map[string]any{"token": task.Token, "output": "HI"}
			if path == "/api/v1/tasks/fail" {
				body = map[string]any{"token": task.Token, "error": "late"}
			}
			p := e.api.do(req{method: http.MethodPost, path: path, body: body}).problem(t, http.StatusConflict)
			if !strings.HasSuffix(p.Type, "/lease-lost") {
				t.Errorf("%s of a deleted run's task: %+v", path, p)
			}
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + r.ID, token: admin}).problem(t, http.StatusNotFound)
	})
}

// A bulk delete deletes the finished runs a filter selects and keeps the
// active ones, each counted as failed with the reason.
func TestBulkDelete(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var ids []string
		for range 3 {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "x"}}, http.StatusCreated, &r)
			ids = append(ids, r.ID)
		}
		var gate Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &gate)
		for _, id := range ids {
			e.waitStatus(id, "completed")
		}
		e.waitStatus(gate.ID, "waiting")

		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "delete", "filter": map[string]any{"workflow": "greet"}}, http.StatusAccepted, &op)
		done := e.waitOperation(op.ID)
		if done.Status != "completed" || done.Done != 3 || done.Failed != 0 || done.Total != 3 {
			t.Fatalf("the delete operation: %+v", done)
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?limit=1000", nil, http.StatusOK, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != gate.ID {
			t.Fatalf("runs left: %+v", list.Runs)
		}

		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "delete", "filter": map[string]any{"workflow": "gate"}}, http.StatusAccepted, &op)
		done = e.waitOperation(op.ID)
		if done.Done != 0 || done.Failed != 1 || len(done.Errors) != 1 || !strings.Contains(done.Errors[0], "active") {
			t.Fatalf("a bulk delete of an active run: %+v", done)
		}
		e.waitStatus(gate.ID, "waiting")
	})
}

// A delete by business id acts on the run it names: the active one
// (refused without force), then, once that is gone, the newest.
func TestDeleteRunByBusinessID(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newOrderEnv(t, b, nil)
		var old, active Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "order", "business_value": "7"}, http.StatusCreated, &old)
		e.waitStatus(old.ID, "waiting")
		e.api.call(http.MethodPost, "/api/v1/runs/"+old.ID+"/cancel", nil, http.StatusAccepted, nil)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "order", "business_value": "7"}, http.StatusCreated, &active)
		e.waitStatus(active.ID, "waiting")

		e.api.do(req{method: http.MethodDelete, path: "/api/v1/runs/order::7"}).problem(t, http.StatusConflict)
		var d DeletedRun
		e.api.call(http.MethodDelete, "/api/v1/runs/order::7?force=true", nil, http.StatusOK, &d)
		if d.ID != active.ID {
			t.Fatalf("order::7 deleted %s, want the active run %s", d.ID, active.ID)
		}
		e.api.call(http.MethodDelete, "/api/v1/runs/order::7", nil, http.StatusOK, &d)
		if d.ID != old.ID || d.Status != "cancelled" {
			t.Fatalf("then order::7 deleted %+v, want the cancelled run %s", d, old.ID)
		}
		p := e.api.do(req{method: http.MethodDelete, path: "/api/v1/runs/order::7"}).problem(t, http.StatusNotFound)
		if !strings.Contains(p.Detail, "order::7") {
			t.Errorf("a delete of a business id no run holds: %+v", p)
		}
	})
}
