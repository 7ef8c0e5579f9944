package server

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// claimOne claims one task of the action, waiting for it.
func (e *env) claimOne(action string) Task {
	e.t.Helper()
	var ts Tasks
	e.api.call(http.MethodPost, "/api/v1/tasks/claim", map[string]any{"worker_id": "py-1", "actions": []string{action}, "wait": "60s", "lease": "30s"}, http.StatusOK, &ts)
	if len(ts.Tasks) != 1 {
		e.t.Fatalf("claimed %d tasks, want 1 (a 60s wait ended without one)", len(ts.Tasks))
	}
	return ts.Tasks[0]
}

// A worker of the HTTP protocol runs a remote step: claim (long-poll),
// heartbeat with details, a retryable failure, the retry that reads the
// details, completion, and a stale completion refused.
func TestWorkerProtocol(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, worker := e.token("admin", RoleAdmin), e.token("py", RoleWorker)
		e.api.token = worker

		// Nothing to claim: an empty list.
		var ts Tasks
		e.api.call(http.MethodPost, "/api/v1/tasks/claim", map[string]any{"worker_id": "py-1", "actions": []string{"shout"}, "wait": "0s"}, http.StatusOK, &ts)
		if len(ts.Tasks) != 0 {
			t.Fatalf("claimed %+v from an empty queue", ts)
		}
		// A claim that waits is served by the run started meanwhile.
		type answer struct {
			r   *resp
			err error
		}
		claimed := make(chan answer, 1)
		go func() {
			r, err := e.api.send(req{method: http.MethodPost, path: "/api/v1/tasks/claim", body: map[string]any{"worker_id": "py-1", "actions": []string{"shout"}, "wait": "60s"}})
			claimed <- answer{r, err}
		}()
		var r Run
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: admin, body: map[string]any{"name": "remote", "input": map[string]string{"text": "hi"}}}).decode(t, &r)
		a := <-claimed
		if a.err != nil {
			t.Fatal(a.err)
		}
		a.r.decode(t, &ts)
		if a.r.status != http.StatusOK || len(ts.Tasks) != 1 {
			t.Fatalf("the waiting claim: %d %s", a.r.status, a.r.body)
		}
		task := ts.Tasks[0]
		if task.RunID != r.ID || task.Kind != "step" || task.Name != "shout" || task.Step != "shout" || task.Attempt != 1 || !strings.Contains(string(task.Input), `"hi"`) {
			t.Fatalf("task %+v", task)
		}

		var hb Heartbeat
		e.api.call(http.MethodPost, "/api/v1/tasks/heartbeat", map[string]any{"token": task.Token, "details": map[string]int{"done": 1}}, http.StatusOK, &hb)
		if hb.Cancelled {
			t.Fatal("a heartbeat of a live run says cancelled")
		}
		e.api.call(http.MethodPost, "/api/v1/tasks/fail", map[string]any{"token": task.Token, "error": "flaky network", "details": map[string]int{"done": 2}}, http.StatusOK, nil)
		retry := e.claimOne("shout")
		if retry.Attempt != 2 || string(retry.Details) != `{"done":2}` {
			t.Fatalf("the retry: %+v", retry)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/complete", body: map[string]any{"token": task.Token, "output": "stale"}}).problem(t, http.StatusConflict)
		e.api.call(http.MethodPost, "/api/v1/tasks/complete", map[string]any{"token": retry.Token, "output": "HI"}, http.StatusOK, nil)
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/complete", body: map[string]any{"token": retry.Token, "output": "again"}}).problem(t, http.StatusConflict)
		if !strings.HasSuffix(p.Type, "/lease-lost") {
			t.Fatalf("a second completion: %+v", p)
		}
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" || string(done.Output) != `{"shout":"HI"}` {
			t.Fatalf("the run: %+v", done)
		}

		// Bad requests.
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/complete", body: map[string]any{"token": "garbage"}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/claim", body: map[string]any{"worker_id": "py-1"}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/claim", body: map[string]any{"worker_id": "py-1", "actions": []string{"shout"}, "max_tasks": 1000}, invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/fail", body: map[string]any{"token": retry.Token}, invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/claim", token: e.token("ro", RoleRead), body: map[string]any{"worker_id": "x", "actions": []string{"shout"}}}).problem(t, http.StatusForbidden)

		// The worker is in the registry.
		var ws []Worker
		e.api.do(req{method: http.MethodGet, path: "/api/v1/workers", token: admin}).decode(t, &ws)
		found := false
		for _, w := range ws {
			found = found || w.ID == "py-1" && len(w.Handlers) > 0
		}
		if !found {
			t.Errorf("py-1 is not a live worker: %+v", ws)
		}
		// Completions and failures are audited, claims and heartbeats not.
		var al AuditList
		e.api.do(req{method: http.MethodGet, path: "/api/v1/audit?limit=1000", token: admin}).decode(t, &al)
		actions := map[string]int{}
		for _, en := range al.Entries {
			actions[en.Action]++
		}
		if actions["tasks.complete"] != 4 || actions["tasks.fail"] != 2 || actions["tasks.claim"] != 0 || actions["tasks.heartbeat"] != 0 {
			t.Errorf("audited actions %v", actions)
		}
	})
}

// A heartbeat tells the worker that the run was cancelled; a failure that
// is not retryable fails the run; a document's remote action receives its
// resolved arguments.
func TestWorkerCancelFailAndDocuments(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "remote", "input": map[string]string{"text": "a"}}, http.StatusCreated, &r)
		task := e.claimOne("shout")
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/cancel", nil, http.StatusAccepted, nil)
		var hb Heartbeat
		e.api.call(http.MethodPost, "/api/v1/tasks/heartbeat", map[string]any{"token": task.Token}, http.StatusOK, &hb)
		if !hb.Cancelled {
			t.Fatal("the heartbeat of a cancelled run's task does not say so")
		}

		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "remote", "input": map[string]string{"text": "b"}}, http.StatusCreated, &r)
		task = e.claimOne("shout")
		e.api.call(http.MethodPost, "/api/v1/tasks/fail", map[string]any{"token": task.Token, "error": "bad input", "retryable": false}, http.StatusOK, nil)
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &r)
		if r.Status != "failed" || !strings.Contains(r.Error, "bad input") {
			t.Fatalf("a run whose remote step failed for good: %+v", r)
		}

		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "remote-doc", "input": map[string]string{"text": "doc"}}, http.StatusCreated, &r)
		task = e.claimOne("upper")
		var args map[string]string
		if err := json.Unmarshal(task.Input, &args); err != nil || args["text"] != "doc" {
			t.Fatalf("the action's arguments: %s", task.Input)
		}
		e.api.call(http.MethodPost, "/api/v1/tasks/complete", map[string]any{"token": task.Token, "output": map[string]string{"text": "DOC"}}, http.StatusOK, nil)
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &r)
		if r.Status != "completed" || !strings.Contains(string(r.Output), "DOC") {
			t.Fatalf("the document run: %+v", r)
		}
	})
}

// A task's token is good for the credentials that claimed it only: a
// second worker token, or an admin one, that uses it is refused (403)
// exactly as a made-up token is, and nothing is written; a token of the
// older format is refused with what to do; the holder completes after.
func TestWorkerTokenBoundToCaller(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, py1, py2 := e.token("admin", RoleAdmin), e.token("py1", RoleWorker), e.token("py2", RoleWorker)
		var r Run
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: admin, body: map[string]any{"name": "remote", "input": map[string]string{"text": "hi"}}}).decode(t, &r)
		e.api.token = py1
		task := e.claimOne("shout")
		var before History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history", nil, http.StatusOK, &before)
		raw, err := base64.RawURLEncoding.DecodeString(task.Token)
		if err != nil || len(raw) < 34 || raw[0] != 2 {
			t.Fatalf("token %q is not a version 2 token", task.Token)
		}
		forged := slices.Clone(raw)
		forged[len(forged)-1] ^= 1
		v1 := append([]byte{1}, raw[1:len(raw)-32]...)
		v1 = append(v1, 2, 2, 2)
		v1 = append(v1, r.ID...)
		type try struct {
			token, as string
			status    int
		}
		details := map[string]any{}
		for _, c := range []try{
			{task.Token, py2, http.StatusForbidden},
			{task.Token, admin, http.StatusForbidden},
			{base64.RawURLEncoding.EncodeToString(forged), py1, http.StatusForbidden},
			{base64.RawURLEncoding.EncodeToString(v1), py1, http.StatusBadRequest},
		} {
			for _, call := range []struct {
				path string
				body map[string]any
			}{
				{"/api/v1/tasks/heartbeat", map[string]any{"token": c.token, "details": map[string]int{"evil": 1}}},
				{"/api/v1/tasks/complete", map[string]any{"token": c.token, "output": "intruder"}},
				{"/api/v1/tasks/fail", map[string]any{"token": c.token, "error": "intruder", "retryable": false}},
			} {
				p := e.api.do(req{method: http.MethodPost, path: call.path, token: c.as, body: call.body}).problem(t, c.status)
				details[call.path+" "+strconv.Itoa(c.status)+" "+p.Detail] = nil
			}
		}
		// The stolen and the forged token are told apart by nothing: per
		// path, one 403 detail for both (and one 400 for the old format).
		if len(details) != 6 {
			t.Errorf("refusal details %v: want one per path and status", slices.Collect(maps.Keys(details)))
		}
		for d := range details {
			if strings.Contains(d, " 400 ") && !strings.Contains(d, "older server; claim the task again") {
				t.Errorf("an old-format token's refusal %q does not say to claim again", d)
			}
		}
		var h History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history", nil, http.StatusOK, &h)
		if len(h.Events) != len(before.Events) || h.Last != before.Last {
			t.Fatalf("the refusals wrote history: %+v, was %+v", h.Events, before.Events)
		}
		e.api.call(http.MethodPost, "/api/v1/tasks/complete", map[string]any{"token": task.Token, "output": "HI"}, http.StatusOK, nil)
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" || string(done.Output) != `{"shout":"HI"}` {
			t.Fatalf("the run: %+v", done)
		}
	})
}
