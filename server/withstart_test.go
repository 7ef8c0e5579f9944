package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

// inbox collects the messages it is sent: signal msg appends one, update
// ask appends one and replies with how many it holds, signal close ends
// the run with them. It declares its messages, so another name is refused.
var (
	inboxMsg   = workflow.NewSignal[string]("msg")
	inboxClose = workflow.NewSignal[struct{}]("close")
	inboxAsk   = workflow.NewUpdate[string, int]("ask")
	inbox      = workflow.New("inbox", inboxFn).Declare(inboxMsg, inboxClose, inboxAsk)
)

func inboxFn(ctx workflow.Context, _ struct{}) ([]string, error) {
	got := []string{}
	workflow.Publish(ctx, got)
	return workflow.Phase(ctx, got,
		workflow.HandleSignal(inboxMsg, func(ctx workflow.Context, m string, got []string) workflow.Next[[]string] {
			got = append(slices.Clone(got), m)
			workflow.Publish(ctx, got)
			return workflow.Continue(got)
		}),
		workflow.HandleSignal(inboxClose, func(ctx workflow.Context, _ struct{}, got []string) workflow.Next[[]string] {
			return workflow.Stop(got)
		}),
		workflow.HandleUpdate(inboxAsk, func(ctx workflow.Context, m string, got []string) (workflow.Reply[[]string, int], error) {
			got = append(slices.Clone(got), m)
			workflow.Publish(ctx, got)
			return workflow.Respond(got, len(got)), nil
		}),
	)
}

// waitState waits (30 s at most) until the run's published state is want.
func waitState(t *testing.T, e *env, runID, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st State
		e.api.call(http.MethodGet, "/api/v1/runs/"+runID+"/state", nil, http.StatusOK, &st)
		if string(st.State) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: state %s after 30s, want %s", runID, st.State, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signalsIn counts the signal_received entries of a run's history.
func signalsIn(t *testing.T, e *env, runID string) map[string]int {
	t.Helper()
	var h History
	e.api.call(http.MethodGet, "/api/v1/runs/"+runID+"/history", nil, http.StatusOK, &h)
	n := map[string]int{}
	for _, ev := range h.Events {
		if strings.Contains(ev.Kind, "signal") {
			n[ev.Name]++
		}
	}
	return n
}

// Signal-with-start over POST /runs: the first request starts the run
// with the signal, a retried request (same Idempotency-Key) neither starts
// another nor signals again, a new key signals the open run once however
// often it is retried, and a start after the run ended starts a new run.
func TestSignalWithStart(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		send := func(key, payload string) StartedRun {
			t.Helper()
			r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", header: map[string]string{"Idempotency-Key": key},
				body: map[string]any{"kind": "workflow", "name": "inbox", "workflow_id": "in-1", "signal": map[string]any{"name": "msg", "payload": payload}}})
			if r.status != http.StatusOK {
				t.Fatalf("signal-with-start %s: status %d: %s", key, r.status, r.body)
			}
			var out StartedRun
			r.decode(t, &out)
			if out.Run == nil || out.Update != nil {
				t.Fatalf("signal-with-start %s: %s", key, r.body)
			}
			return out
		}
		first := send("k1", "a")
		if first.Kind != "workflow" || first.Workflow != "inbox" || len(first.Metadata["created_by"]) == 0 {
			t.Fatalf("started %+v", first.Run)
		}
		if again := send("k1", "a"); again.ID != first.ID {
			t.Fatalf("the retried request answered run %s, want %s", again.ID, first.ID)
		}
		waitState(t, e, first.ID, `["a"]`)
		// A second message to the open run, retried: delivered once.
		for range 3 {
			if r := send("k2", "b"); r.ID != first.ID {
				t.Fatalf("signal-with-start k2 went to run %s, want the open run %s", r.ID, first.ID)
			}
		}
		// A signal sent after them is applied after them: once it shows,
		// a duplicate would have shown too.
		e.api.call(http.MethodPost, "/api/v1/runs/"+first.ID+"/signals/msg", map[string]any{"payload": "c"}, http.StatusAccepted, nil)
		waitState(t, e, first.ID, `["a","b","c"]`)
		if n := signalsIn(t, e, first.ID); n["msg"] != 3 {
			t.Fatalf("the history holds %d msg signals, want 3: %v", n["msg"], n)
		}
		var runs RunList
		e.api.call(http.MethodGet, "/api/v1/runs?workflow=inbox", nil, http.StatusOK, &runs)
		if len(runs.Runs) != 1 {
			t.Fatalf("%d runs of inbox, want 1", len(runs.Runs))
		}
		// The run ends; a new request starts a new run, a retry of the
		// first still answers the first run.
		e.api.call(http.MethodPost, "/api/v1/runs/"+first.ID+"/signals/close", nil, http.StatusAccepted, nil)
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+first.ID+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" || string(done.Output) != `["a","b","c"]` {
			t.Fatalf("the first run ended %s with %s", done.Status, done.Output)
		}
		if r := send("k1", "a"); r.ID != first.ID {
			t.Fatalf("a retry of the first request after the run ended answered %s, want %s", r.ID, first.ID)
		}
		second := send("k3", "d")
		if second.ID == first.ID || second.Status == "completed" {
			t.Fatalf("a start after the run ended answered %+v", second.Run)
		}
		waitState(t, e, second.ID, `["d"]`)
		if r := send("k3", "d"); r.ID != second.ID {
			t.Fatalf("a retry answered %s, want %s", r.ID, second.ID)
		}
		// An explicit signal id wins over the key.
		body := map[string]any{"kind": "workflow", "name": "inbox", "workflow_id": "in-1", "signal": map[string]any{"name": "msg", "payload": "e", "id": "e-1"}}
		for _, key := range []string{"k4", "k5"} {
			r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", header: map[string]string{"Idempotency-Key": key}, body: body})
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
		}
		e.api.call(http.MethodPost, "/api/v1/runs/"+second.ID+"/signals/msg", map[string]any{"payload": "f"}, http.StatusAccepted, nil)
		waitState(t, e, second.ID, `["d","e","f"]`)
	})
}

// Update-with-start over POST /runs: the reply comes back with the run; a
// retried request returns the same reply without running the handler
// again; a new update goes to the open run.
func TestUpdateWithStart(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		ask := func(key string, update map[string]any) StartedRun {
			t.Helper()
			r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", header: map[string]string{"Idempotency-Key": key},
				body: map[string]any{"kind": "workflow", "name": "inbox", "workflow_id": "in-2", "update": update}})
			if r.status != http.StatusOK {
				t.Fatalf("update-with-start %s: status %d: %s", key, r.status, r.body)
			}
			var out StartedRun
			r.decode(t, &out)
			if out.Run == nil || out.Update == nil {
				t.Fatalf("update-with-start %s: %s", key, r.body)
			}
			return out
		}
		first := ask("u1", map[string]any{"name": "ask", "args": "x"})
		if first.Update.Stage != "completed" || string(first.Update.Result) != "1" {
			t.Fatalf("the first update: %+v", first.Update)
		}
		again := ask("u1", map[string]any{"name": "ask", "args": "x"})
		if again.ID != first.ID || string(again.Update.Result) != "1" {
			t.Fatalf("the retried update: run %s (want %s), %+v", again.ID, first.ID, again.Update)
		}
		second := ask("u2", map[string]any{"name": "ask", "args": "y", "timeout": "30s"})
		if second.ID != first.ID || string(second.Update.Result) != "2" {
			t.Fatalf("the second update: run %s (want %s), %+v", second.ID, first.ID, second.Update)
		}
		acc := ask("u3", map[string]any{"name": "ask", "args": "z", "wait_for": "accepted", "id": "z-1"})
		if acc.Update.Stage != "accepted" || acc.Update.Result != nil {
			t.Fatalf("an update waited for acceptance: %+v", acc.Update)
		}
		waitState(t, e, first.ID, `["x","y","z"]`)
	})
}

// Bad starts with a message: each a 400 (or 404) naming what is wrong.
func TestStartWithMessageErrors(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		wf := func(extra map[string]any) map[string]any {
			m := map[string]any{"kind": "workflow", "name": "inbox", "workflow_id": "in-3"}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		for _, c := range []struct {
			name   string
			body   map[string]any
			status int
			want   string
		}{
			{"unknown signal", wf(map[string]any{"signal": map[string]any{"name": "nope"}}), http.StatusBadRequest, `declares no signal "nope"`},
			{"not a workflow", map[string]any{"name": "greet", "signal": map[string]any{"name": "msg"}}, http.StatusBadRequest, `only a code-first workflow (kind "workflow") starts with a signal`},
			{"job kind", map[string]any{"kind": "job", "name": "email", "update": map[string]any{"name": "ask"}}, http.StatusBadRequest, `starts with a update`},
			{"no workflow id", map[string]any{"kind": "workflow", "name": "inbox", "signal": map[string]any{"name": "msg"}}, http.StatusBadRequest, "workflow_id: is required with a signal"},
			{"both", wf(map[string]any{"signal": map[string]any{"name": "msg"}, "update": map[string]any{"name": "ask"}}), http.StatusBadRequest, "a signal or an update, not both"},
			{"bad signal id", wf(map[string]any{"signal": map[string]any{"name": "msg", "id": "a b"}}), http.StatusBadRequest, "signal id"},
			{"bad wait_for", wf(map[string]any{"update": map[string]any{"name": "ask", "wait_for": "soon"}}), http.StatusBadRequest, "update.wait_for"},
			{"unknown workflow", map[string]any{"kind": "workflow", "name": "nowhere", "workflow_id": "x", "signal": map[string]any{"name": "msg"}}, http.StatusNotFound, "nowhere"},
			{"created_by", wf(map[string]any{"created_by": "mallory", "signal": map[string]any{"name": "msg"}}), http.StatusBadRequest, "created_by"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: c.body, unchecked: true})
				p := r.problem(t, c.status)
				if !strings.Contains(p.Detail, c.want) {
					t.Fatalf("detail %q, want it to contain %q", p.Detail, c.want)
				}
			})
		}
		r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: wf(map[string]any{"update": map[string]any{"name": "nope"}})})
		if r.status < 400 || r.status >= 500 || !strings.Contains(string(r.body), "nope") {
			t.Fatalf("an unknown update: status %d: %s", r.status, r.body)
		}
		// Nothing was started by any of them.
		var runs RunList
		e.api.call(http.MethodGet, "/api/v1/runs?workflow=inbox", nil, http.StatusOK, &runs)
		if len(runs.Runs) != 0 {
			raw, _ := json.Marshal(runs.Runs)
			t.Fatalf("bad starts left runs: %s", raw)
		}
	})
}
