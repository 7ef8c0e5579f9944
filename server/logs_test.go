package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus"
)

// A worker of the HTTP protocol sends its logs with a heartbeat, a
// failure and a completion; GET /runs/{id}/logs reads them per attempt,
// filtered, with secret-named attributes redacted; bad records are 400s
// naming the record and field, and write nothing.
func TestRemoteWorkerLogs(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, worker := e.token("admin", RoleAdmin), e.token("py", RoleWorker)
		var r Run
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: admin, body: map[string]any{"name": "remote", "input": map[string]string{"text": "hi"}}}).decode(t, &r)
		e.api.token = worker
		task := e.claimOne("shout")
		e.api.call(http.MethodPost, "/api/v1/tasks/heartbeat", map[string]any{"token": task.Token, "logs": []map[string]any{
			{"message": "starting", "attrs": map[string]any{"password": "p", "n": 1}},
			{"level": "debug", "message": "details", "time": "2030-01-02T03:04:05Z"},
		}}, http.StatusOK, nil)
		for _, bad := range []struct {
			logs    []map[string]any
			says    string
			invalid bool // for the OpenAPI document too
		}{
			{[]map[string]any{{"message": "ok"}, {"level": "loud", "message": "x"}}, "logs[1].level", false},
			{[]map[string]any{{"message": "x", "attrs": []int{1}}}, "logs[0]", true},
			{[]map[string]any{{"message": strings.Repeat("x", 20000)}}, "logs[0]", true},
		} {
			p := e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/heartbeat", body: map[string]any{"token": task.Token, "logs": bad.logs}, invalid: bad.invalid}).problem(t, http.StatusBadRequest)
			if !strings.Contains(p.Detail+p.Title, bad.says) {
				t.Errorf("bad logs %v: %+v, want it to name %s", bad.logs, p, bad.says)
			}
		}
		e.api.call(http.MethodPost, "/api/v1/tasks/fail", map[string]any{"token": task.Token, "error": "flaky", "logs": []map[string]any{{"level": "ERROR", "message": "network down"}}}, http.StatusOK, nil)
		retry := e.claimOne("shout")
		e.api.call(http.MethodPost, "/api/v1/tasks/complete", map[string]any{"token": retry.Token, "output": "HI", "logs": []map[string]any{{"message": "done", "attrs": map[string]any{"auth": map[string]string{"Authorization": "Bearer x"}}}}}, http.StatusOK, nil)
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &r)

		e.api.token = e.token("viewer", RoleRead)
		var page hephaestus.LogPage
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/logs", nil, http.StatusOK, &page)
		var got []string
		for _, rec := range page.Records {
			got = append(got, rec.Step+"#"+string(rune('0'+rec.Attempt))+" "+rec.Worker+" "+rec.Level+" "+rec.Message+" "+string(rec.Attrs))
		}
		want := []string{
			`shout#1 py-1 INFO starting {"n":1,"password":"[redacted]"}`,
			`shout#1 py-1 DEBUG details `,
			`shout#1 py-1 ERROR network down `,
			`shout#2 py-1 INFO done {"auth":{"Authorization":"[redacted]"}}`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("logs:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if page.Records[1].Time.Year() != 2030 || page.Next != page.Records[3].Seq {
			t.Errorf("time %v, next %d", page.Records[1].Time, page.Next)
		}
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/logs?attempt=2", nil, http.StatusOK, &page)
		if len(page.Records) != 1 || page.Records[0].Message != "done" {
			t.Errorf("attempt 2: %+v", page.Records)
		}
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/logs?level=warn&step=shout", nil, http.StatusOK, &page)
		if len(page.Records) != 1 || page.Records[0].Message != "network down" {
			t.Errorf("warnings: %+v", page.Records)
		}
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/logs?after=4&wait=1ms", nil, http.StatusOK, &page)
		if len(page.Records) != 0 || page.Next != 4 {
			t.Errorf("after the last: %+v", page)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + r.ID + "/logs?level=loud"}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/nope/logs"}).problem(t, http.StatusNotFound)
	})
}
