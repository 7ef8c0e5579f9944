package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestRunsStartGetListHistory(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r Run
		res := e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "ann"}, "tags": []string{"t1"}}, http.StatusCreated, &r)
		if r.ID == "" || r.Kind != "flow" || r.Workflow != "greet" || res.header.Get("Location") != "/api/v1/runs/"+r.ID {
			t.Fatalf("started %+v (Location %q)", r, res.header.Get("Location"))
		}
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=30s", nil, http.StatusOK, &done)
		if done.Status != "completed" || string(done.Output) != `{"hello":"hello ann"}` || len(done.Steps) != 1 || done.Steps[0].Name != "hello" || done.FinishedAt == nil {
			t.Fatalf("result %+v", done)
		}
		var got Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID, nil, http.StatusOK, &got)
		if got.Status != "completed" || got.Steps[0].Status != "completed" || got.Steps[0].Attempts != 1 {
			t.Fatalf("get %+v", got)
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?status=completed&workflow=greet&tag=t1", nil, http.StatusOK, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != r.ID || list.Runs[0].Steps != nil {
			t.Fatalf("list %+v", list)
		}
		e.api.call(http.MethodGet, "/api/v1/runs?status=running", nil, http.StatusOK, &list)
		if len(list.Runs) != 0 {
			t.Fatalf("list of running runs %+v", list)
		}
		var h History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history", nil, http.StatusOK, &h)
		if len(h.Events) < 3 || h.Last != h.Events[len(h.Events)-1].Seq || h.Events[0].Seq != 1 {
			t.Fatalf("history %+v", h)
		}
		var rest History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history?after=2", nil, http.StatusOK, &rest)
		if len(rest.Events) != len(h.Events)-2 || rest.Events[0].Seq != 3 {
			t.Fatalf("history after 2: %+v", rest)
		}
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history?after="+jsonNum(h.Last), nil, http.StatusOK, &rest)
		if len(rest.Events) != 0 || rest.Last != h.Last {
			t.Fatalf("history after the last: %+v", rest)
		}
		// Not found.
		p := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/nope"}).problem(t, http.StatusNotFound)
		if !strings.HasSuffix(p.Type, "/not-found") || p.Instance != "/api/v1/runs/nope" {
			t.Fatalf("problem %+v", p)
		}
	})
}

func jsonNum(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
