package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Builds: a workflow run records the build of the process that started
// it (the run JSON, the runs' build filter); the workflow's builds list
// its open runs and live workers; retiring it is refused with 409 while
// the run is open; a build without runs retires; the workers show their
// build; a bad build id is a 400 naming it.
func TestWorkflowBuilds(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		build := e.client.BuildID()
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 1}, http.StatusCreated, &r)
		if r.BuildID != build {
			t.Fatalf("started run's build_id = %q, want the client's %q", r.BuildID, build)
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?build="+build, nil, http.StatusOK, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != r.ID {
			t.Fatalf("runs of build %s: %+v, want the one started", build, list.Runs)
		}
		e.api.call(http.MethodGet, "/api/v1/runs?build=other", nil, http.StatusOK, &list)
		if len(list.Runs) != 0 {
			t.Fatalf("runs of build other: %+v, want none", list.Runs)
		}

		// The worker record is written by the client's maintenance loop,
		// after Start: wait for it.
		var bs []WorkflowBuild
		deadline := time.Now().Add(60 * time.Second)
		for {
			e.api.call(http.MethodGet, "/api/v1/workflows/counter/builds", nil, http.StatusOK, &bs)
			if len(bs) == 1 && bs[0].LiveWorkers == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("builds of counter: %+v, want one with a live worker", bs)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := bs[0]; got.BuildID != build || got.OpenRuns != 1 || !got.Newest || got.Draining || got.Retired {
			t.Fatalf("builds of counter: %+v", bs)
		}
		var ws []Worker
		e.api.call(http.MethodGet, "/api/v1/workers", nil, http.StatusOK, &ws)
		if len(ws) != 1 || ws[0].BuildID != build {
			t.Fatalf("workers: %+v, want one of build %s", ws, build)
		}

		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/workflows/counter/builds/" + build + "/retire", body: map[string]any{}}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "1 open run") {
			t.Fatalf("retiring a build with an open run: %+v", p)
		}
		e.api.call(http.MethodPost, "/api/v1/workflows/counter/builds/old-1/retire", map[string]any{}, http.StatusOK, &bs)
		if len(bs) != 2 || bs[1].BuildID != "old-1" || !bs[1].Retired || bs[1].RetiredAt == nil || bs[1].OpenRuns != 0 {
			t.Fatalf("builds after retiring old-1: %+v", bs)
		}
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/workflows/counter/builds/b%20c/retire", body: map[string]any{}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `"b c"`) {
			t.Fatalf("retiring build \"b c\": %+v", p)
		}
	})
}
