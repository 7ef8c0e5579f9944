package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// GET /runs/{id} has waiting_for: the waiting step with its events, the
// signals and update a workflow's phase accepts; a finished run and the
// list items have none.
func TestRunWaitingFor(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		e.api.token = e.token("root", RoleAdmin)
		var gate, wf, greet Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &gate)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 1}, http.StatusCreated, &wf)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "ann"}}, http.StatusCreated, &greet)
		e.waitStatus(gate.ID, "waiting")
		e.waitStatus(greet.ID, "completed")

		var got Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+gate.ID, nil, http.StatusOK, &got)
		if len(got.WaitingFor) != 1 || got.WaitingFor[0].Kind != "step" || got.WaitingFor[0].Step != "wait" || !slices.Equal(got.WaitingFor[0].Events, []string{"go", "stop"}) {
			t.Errorf("gate run waiting_for %+v, want the step wait with events go, stop", got.WaitingFor)
		}
		var kinds []string
		deadline := time.Now().Add(30 * time.Second)
		for {
			got = Run{}
			e.api.call(http.MethodGet, "/api/v1/runs/"+wf.ID, nil, http.StatusOK, &got)
			kinds = kinds[:0]
			for _, w := range got.WaitingFor {
				kinds = append(kinds, w.Kind+" "+w.Name)
			}
			if len(kinds) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // polling for the decision, not timing it
		}
		if want := []string{"signal add", "signal done", "update set"}; !slices.Equal(kinds, want) {
			t.Errorf("workflow waiting_for %v, want %v", kinds, want)
		}
		var fin Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+greet.ID, nil, http.StatusOK, &fin)
		if fin.WaitingFor != nil {
			t.Errorf("finished run waiting_for %+v", fin.WaitingFor)
		}
		r := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs"})
		if r.status != http.StatusOK || strings.Contains(string(r.body), "waiting_for") {
			t.Errorf("the list shows waiting_for: %d %s", r.status, r.body)
		}
	})
}
