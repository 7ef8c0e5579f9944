package server

import (
	"net/http"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
)

// A run's kind is the same in GET /runs/{id} and GET /runs: flow,
// document, job (the three stored as flow runs) or workflow; the key
// that marks a job's run is reserved. Only a workflow run's history
// exports for a replay check.
func TestRunKinds(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		ids := map[string]string{}
		for kind, body := range map[string]map[string]any{
			"flow":     {"kind": "flow", "name": "greet", "input": map[string]string{"name": "ada"}},
			"document": {"kind": "document", "name": "approval", "input": map[string]string{"title": "t"}},
			"job":      {"kind": "job", "name": "email", "input": map[string]string{"to": "ops@example.com"}},
			"workflow": {"kind": "workflow", "name": "counter", "input": 1},
		} {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", body, http.StatusCreated, &r)
			if r.Kind != kind {
				t.Errorf("the start of a %s answers kind %q", kind, r.Kind)
			}
			ids[r.ID] = kind
			e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID, nil, http.StatusOK, &r)
			if r.Kind != kind {
				t.Errorf("GET /runs/%s: kind %q, want %s", r.ID, r.Kind, kind)
			}
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs", nil, http.StatusOK, &list)
		seen := 0
		for _, r := range list.Runs {
			if want, ok := ids[r.ID]; ok {
				seen++
				if r.Kind != want {
					t.Errorf("GET /runs: run %s has kind %q, want %s", r.ID, r.Kind, want)
				}
			}
		}
		if seen != len(ids) {
			t.Errorf("GET /runs lists %d of the %d runs", seen, len(ids))
		}

		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"kind": "flow", "name": "greet", "metadata": map[string]any{"job": true}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `metadata key "job" is reserved`) {
			t.Errorf("a start with the job key: %+v", p)
		}

		for id, kind := range ids {
			if kind == "workflow" {
				var x heph.HistoryExport
				e.api.call(http.MethodGet, "/api/v1/runs/"+id+"/history/export", nil, http.StatusOK, &x)
				if x.RunID != id || x.Workflow != "counter" || len(x.Events) == 0 {
					t.Errorf("the export of the workflow run: %+v", x)
				}
				continue
			}
			p := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + id + "/history/export"}).problem(t, http.StatusBadRequest)
			if !strings.Contains(p.Detail, "it is a run of "+kind) {
				t.Errorf("the export of a %s run: %+v", kind, p)
			}
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/nope/history/export"}).problem(t, http.StatusNotFound)
	})
}
