package server

import (
	"encoding/json"
	"fmt"
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

// A start with an Idempotency-Key returns the same run when repeated:
// 201, then 200; another key (or another name) starts another run.
func TestIdempotentStart(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		for _, body := range []map[string]any{
			{"name": "greet", "input": map[string]string{"name": "a"}},
			{"kind": "workflow", "name": "counter", "input": 0},
			// A workflow id is a business id: the repeated start finds it
			// held by the run the key names (the run is still active), and
			// that is the same run, not a conflict.
			{"kind": "workflow", "name": "counter", "input": 0, "workflow_id": "idem-wf"},
			{"kind": "job", "name": "email", "input": map[string]string{"to": "a@b"}},
			{"kind": "document", "name": "approval", "input": map[string]string{"title": "t"}},
		} {
			start := func(key string) (int, Run) {
				// The run id derives from the key, kind and name only: each
				// body has its own keys.
				key = fmt.Sprint(body["name"], body["workflow_id"], "-", key)
				r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: body, header: map[string]string{"Idempotency-Key": key}})
				var run Run
				r.decode(t, &run)
				return r.status, run
			}
			s1, r1 := start("key-1")
			s2, r2 := start("key-1")
			if body["workflow_id"] != nil {
				// Another key for the same workflow id conflicts with the
				// active run: 409, naming it.
				r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: body, header: map[string]string{"Idempotency-Key": "other"}})
				if p := r.problem(t, http.StatusConflict); !strings.Contains(p.Detail, r1.ID) {
					t.Fatalf("conflict %q does not name the run %s", p.Detail, r1.ID)
				}
				if s1 != http.StatusCreated || s2 != http.StatusOK || r1.ID != r2.ID {
					t.Fatalf("%v: statuses %d %d, runs %s %s: want 201 200 and the same run", body, s1, s2, r1.ID, r2.ID)
				}
				continue
			}
			s3, r3 := start("key-2")
			if s1 != http.StatusCreated || s2 != http.StatusOK || s3 != http.StatusCreated {
				t.Fatalf("%v: statuses %d %d %d, want 201 200 201", body, s1, s2, s3)
			}
			if r1.ID != r2.ID || r1.ID == r3.ID {
				t.Fatalf("%v: runs %s %s %s", body, r1.ID, r2.ID, r3.ID)
			}
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?limit=1000", nil, http.StatusOK, &list)
		if len(list.Runs) != 9 {
			t.Fatalf("%d runs, want 9", len(list.Runs))
		}
		long := strings.Repeat("k", 201)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"name": "greet"}, header: map[string]string{"Idempotency-Key": long}}).problem(t, http.StatusBadRequest)
	})
}

// Jobs start by kind name with JSON arguments; the list filters by kind,
// queue, metadata and text.
func TestJobsAndFilters(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var j Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "job", "name": "email", "input": map[string]string{"to": "x@y"}, "metadata": map[string]any{"tenant": "acme"}}, http.StatusCreated, &j)
		e.api.call(http.MethodGet, "/api/v1/runs/"+j.ID+"/result?wait=60s", nil, http.StatusOK, &j)
		if j.Status != "completed" || j.Kind != "job" || j.Workflow != "email" {
			t.Fatalf("job %+v", j)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"kind": "job", "name": "email", "input": map[string]int{"to": 1}}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"kind": "job", "name": "sms"}}).problem(t, http.StatusNotFound)
		var w Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 0, "metadata": map[string]any{"tenant": "globex", "tier": 2}}, http.StatusCreated, &w)

		ids := func(path string) []string {
			var list RunList
			e.api.call(http.MethodGet, path, nil, http.StatusOK, &list)
			var out []string
			for _, r := range list.Runs {
				out = append(out, r.ID)
			}
			return out
		}
		for _, tc := range []struct {
			path string
			want []string
		}{
			{"/api/v1/runs?kind=workflow", []string{w.ID}},
			{"/api/v1/runs?kind=flow", []string{j.ID}},
			{"/api/v1/runs?meta.tenant=acme", []string{j.ID}},
			{"/api/v1/runs?meta.tier=2&meta.tenant=globex", []string{w.ID}},
			{"/api/v1/runs?q=EMAIL", []string{j.ID}},
			{"/api/v1/runs?queue=default&kind=flow", []string{j.ID}},
			{"/api/v1/runs?limit=1", []string{w.ID}},
		} {
			if got := ids(tc.path); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s: %v, want %v", tc.path, got, tc.want)
			}
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?kind=robot", invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?limit=0", invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?created_after=today", invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?status=asleep", invalid: true}).problem(t, http.StatusBadRequest)
	})
}

// A history long-poll that waits is released by the run's next event; a
// wait that ends first returns no event.
func TestHistoryLongPoll(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &r)
		e.waitStatus(r.ID, "waiting")
		var h History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history", nil, http.StatusOK, &h)
		var none History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history?wait=1ms&after="+jsonNum(h.Last), nil, http.StatusOK, &none)
		if len(none.Events) != 0 || none.Last != h.Last {
			t.Fatalf("a wait with no event: %+v", none)
		}
		type answer struct {
			r   *resp
			err error
		}
		polled := make(chan answer, 1)
		go func() {
			r, err := e.api.send(req{method: http.MethodGet, path: "/api/v1/runs/" + r.ID + "/history?wait=60s&after=" + jsonNum(h.Last)})
			polled <- answer{r, err}
		}()
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/resume", map[string]any{"event": "stop"}, http.StatusAccepted, nil)
		a := <-polled
		if a.err != nil {
			t.Fatal(a.err)
		}
		var next History
		a.r.decode(t, &next)
		if a.r.status != http.StatusOK || len(next.Events) == 0 || next.Events[0].Seq != h.Last+1 {
			t.Fatalf("the long poll: %d %+v", a.r.status, next)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/nope/history?wait=1s"}).problem(t, http.StatusNotFound)
	})
}

// A failed run runs again from its failed step; its first step does not.
// A run that is not failed, and a workflow run, are 409.
func TestRetry(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		e.fail.Store(true)
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "flaky"}, http.StatusCreated, &r)
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &r)
		if r.Status != "failed" || !strings.Contains(r.Error, "second fails") {
			t.Fatalf("the flaky run: %+v", r)
		}
		e.fail.Store(false)
		var again Run
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", nil, http.StatusOK, &again)
		if again.Status == "failed" || again.Error != "" {
			t.Fatalf("retried %+v", again)
		}
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &again)
		if again.Status != "completed" || e.firstCalls.Load() != 1 {
			t.Fatalf("after the retry: %+v (first ran %d times)", again, e.firstCalls.Load())
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/retry"}).problem(t, http.StatusConflict)
		var w Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 0}, http.StatusCreated, &w)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + w.ID + "/retry"}).problem(t, http.StatusConflict)
	})
}
