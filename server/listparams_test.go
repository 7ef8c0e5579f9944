package server

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// badListParams are list requests with a parameter that does not decode
// (a cursor, a limit, a filter, a time, a status, a duration, a name that
// is not UTF-8 or holds a NUL byte, a query string that does not parse),
// each with the parameter the 400 problem must name.
func badListParams() []struct{ path, param string } {
	b64 := func(s string) string { return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(s))) }
	return []struct{ path, param string }{
		{"/api/v1/runs?cursor=garbage", "cursor"},
		{"/api/v1/runs?cursor=MTIz", "cursor"},
		{"/api/v1/runs?cursor=" + b64("abc,run-1"), "cursor"},
		{"/api/v1/runs?cursor=" + b64("123,"), "cursor"},
		{"/api/v1/runs?cursor=" + b64("1,\xff"), "cursor"},
		{"/api/v1/runs?cursor=%00", "cursor"},
		{"/api/v1/runs?limit=abc", "limit"},
		{"/api/v1/runs?limit=0", "limit"},
		{"/api/v1/runs?limit=1001", "limit"},
		{"/api/v1/runs?limit=99999999999999999999999", "limit"},
		{"/api/v1/runs?status=nope", "status"},
		{"/api/v1/runs?status=scheduled,running", "status"},
		{"/api/v1/runs?kind=job", "kind"},
		{"/api/v1/runs?version=-1", "version"},
		{"/api/v1/runs?created_after=yesterday", "created_after"},
		{"/api/v1/runs?created_before=2024-13-01T00:00:00Z", "created_before"},
		{"/api/v1/runs?workflow=%00", "workflow"},
		{"/api/v1/runs?workflow=%ff", "workflow"},
		{"/api/v1/runs?business_id=a%00b", "business_id"},
		{"/api/v1/runs?tag=%c3%28", "tag"},
		{"/api/v1/runs?q=%00", "q"},
		{"/api/v1/runs?queue=%fe", "queue"},
		{"/api/v1/runs?parent=%00", "parent"},
		{"/api/v1/runs?id=%ff", "id"},
		{"/api/v1/runs?id=" + strings.Repeat("r,", 1001) + "r", "id"},
		{"/api/v1/runs?meta.team=%00", "meta.team"},
		{"/api/v1/runs?meta.%ff=1", `"meta.\xff"`},
		{"/api/v1/runs?limit=%zz", "query string"},
		{"/api/v1/runs/%00/history", "id"},
		{"/api/v1/runs/%ff/history", "id"},
		{"/api/v1/runs/r1/history?after=x", "after"},
		{"/api/v1/runs/r1/history?after=-1", "after"},
		{"/api/v1/runs/r1/history?wait=forever", "wait"},
		{"/api/v1/approvals?run_id=%00", "run_id"},
		{"/api/v1/approvals?workflow=%ff", "workflow"},
		{"/api/v1/approvals?assignee=%00", "assignee"},
		{"/api/v1/approvals?group=%ff", "group"},
		{"/api/v1/operations?cursor=garbage", "cursor"},
		{"/api/v1/operations?cursor=1.", "cursor"},
		{"/api/v1/operations?cursor=MTIz", "cursor"},
		{"/api/v1/operations?limit=x", "limit"},
		{"/api/v1/definitions/greet/graph?version=x", "version"},
		{"/api/v1/definitions/greet/graph?format=png", "format"},
		{"/api/v1/definitions/%00/graph", "name"},
		{"/api/v1/documents?cursor=garbage", "cursor"},
		{"/api/v1/documents?cursor=MTIz", "cursor"},
		{"/api/v1/documents?cursor=" + b64("0,a"), "cursor"},
		{"/api/v1/documents?limit=0", "limit"},
		{"/api/v1/documents?name=%00", "name"},
		{"/api/v1/documents/%ff?version=1", "name"},
		{"/api/v1/documents/approval?version=x", "version"},
		{"/api/v1/schedules?limit=x", "limit"},
		{"/api/v1/schedules?after=%00", "after"},
		{"/api/v1/schedules/s1/runs?limit=x", "limit"},
		{"/api/v1/schedules/%00/runs", "id"},
		{"/api/v1/schedules/s1/next?n=0", "n"},
		{"/api/v1/schedules/s1/next?n=many", "n"},
		{"/api/v1/queues/%ff", "name"},
		{"/api/v1/stats?since=x", "since"},
		{"/api/v1/stats?until=x", "until"},
		{"/api/v1/stats?bucket=x", "bucket"},
		{"/api/v1/stats?bucket=1ns", "bucket"},
		{"/api/v1/stats?stale_after=-1s", "stale_after"},
		{"/api/v1/stats?workflow=%00", "workflow"},
		{"/api/v1/stats?since=2030-01-01T00:00:00Z&until=2020-01-01T00:00:00Z", "since"},
		{"/api/v1/audit?cursor=garbage", "cursor"},
		{"/api/v1/audit?cursor=-5", "cursor"},
		{"/api/v1/audit?limit=x", "limit"},
		{"/api/v1/audit?actor=%00", "actor"},
		{"/api/v1/audit?action=%ff", "action"},
		{"/api/v1/tokens?x=%ff", "x"},
		{"/api/v1/workers?x=%00", "x"},
		{"/api/v1/queues?x=%00", "x"},
		{"/api/v1/definitions?x=%ff", "x"},
	}
}

// Every list endpoint answers a parameter that does not decode with a
// 400 problem that names it, never a 500, on every backend.
func TestListParamsBadRequest(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		// The table's run r1 is a run that exists: a path naming no run is
		// a 404 before its query is read.
		run, err := e.client.StartRun(t.Context(), "greet", map[string]string{"name": "r1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range badListParams() {
			tc.path = strings.Replace(tc.path, "/runs/r1/", "/runs/"+run.ID+"/", 1)
			r := e.api.do(req{method: http.MethodGet, path: tc.path, unchecked: true})
			if r.status != http.StatusBadRequest {
				t.Errorf("GET %s: status %d, want 400: %s", tc.path, r.status, r.body)
				continue
			}
			p := r.problem(t, http.StatusBadRequest)
			if p.Type != ProblemTypeBase+kindBadRequest || !strings.Contains(p.Detail, tc.param) {
				t.Errorf("GET %s: problem %s %q, want bad-request naming %s", tc.path, p.Type, p.Detail, tc.param)
			}
		}
	})
}

// listRoutes are the paths of the list endpoints FuzzListParams sends its
// query strings to.
var listRoutes = []string{
	"/api/v1/runs", "/api/v1/runs/r1/history", "/api/v1/approvals", "/api/v1/operations", "/api/v1/definitions",
	"/api/v1/definitions/greet/graph", "/api/v1/documents", "/api/v1/schedules", "/api/v1/schedules/s1/runs",
	"/api/v1/schedules/s1/next", "/api/v1/queues", "/api/v1/workers", "/api/v1/stats", "/api/v1/tokens", "/api/v1/audit",
}

// FuzzListParams sends query strings (and a path segment) to the list
// endpoints on every backend: no answer is a 5xx, none panics (a panic
// is a 500), and every response matches the OpenAPI document. The seed
// corpus (the table of bad parameters) runs as a normal test.
func FuzzListParams(f *testing.F) {
	for _, tc := range badListParams() {
		path, query, _ := strings.Cut(tc.path, "?")
		route := uint8(0)
		for i, r := range listRoutes {
			if r == path {
				route = uint8(i)
			}
		}
		f.Add(route, query, "")
	}
	f.Add(uint8(1), "after=1&wait=0s", "%00")
	f.Add(uint8(8), "limit=5", "%ff")
	var envs []*env
	for _, b := range backends() {
		envs = append(envs, newEnv(f, b, nil))
	}
	f.Fuzz(func(t *testing.T, route uint8, query, segment string) {
		path := listRoutes[int(route)%len(listRoutes)]
		if segment != "" {
			// Replace the route's wildcard (r1, greet, s1) when it has one.
			for _, w := range []string{"/r1/", "/greet/", "/s1/"} {
				path = strings.Replace(path, w, "/"+url.PathEscape(segment)+"/", 1)
			}
		}
		if strings.ContainsAny(query, "# \t\r\n") {
			query = url.PathEscape(query)
		}
		for _, e := range envs {
			r, err := e.api.send(req{method: http.MethodGet, path: path + "?wait=0s&" + query, unchecked: true})
			if err != nil {
				if strings.Contains(err.Error(), "invalid URL") || strings.Contains(err.Error(), "invalid control character") {
					return // the client refuses to send it
				}
				t.Fatal(err)
			}
			if r.status >= 500 {
				t.Fatalf("GET %s?%s: status %d: %s", path, query, r.status, r.body)
			}
		}
	})
}
