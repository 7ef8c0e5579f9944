package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The overview's figures over runs the test started: three greetings
// that completed and a gate that waits, in a window of two hours around
// now, by the hour.
func TestStats(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		now := time.Now().UTC()
		for range 3 {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]string{"name": "ann"}}, http.StatusCreated, &r)
			e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=30s", nil, http.StatusOK, nil)
		}
		var gate Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &gate)
		e.waitStatus(gate.ID, "waiting")

		window := url.Values{"since": {now.Add(-time.Hour).Format(time.RFC3339Nano)}, "until": {now.Add(time.Hour).Format(time.RFC3339Nano)}, "bucket": {"1h"}}
		var st Stats
		e.api.call(http.MethodGet, "/api/v1/stats?"+window.Encode(), nil, http.StatusOK, &st)
		if len(st.Buckets) != 2 || st.BucketSeconds != 3600 || !st.Buckets[1].Start.Equal(st.Since.Add(time.Hour)) || time.Duration(st.StaleAfter) != time.Hour {
			t.Fatalf("window: %+v", st)
		}
		if st.Totals != (StatsCounts{Started: 4, Completed: 3}) || st.Buckets[0].Started+st.Buckets[1].Started != 4 {
			t.Fatalf("totals %+v, buckets %+v", st.Totals, st.Buckets)
		}
		if st.Latency.Count != 3 || st.Latency.Sampled != 3 || st.Latency.P50Seconds > st.Latency.P90Seconds || st.Latency.P90Seconds > st.Latency.P99Seconds {
			t.Fatalf("latency %+v", st.Latency)
		}
		if st.Active["waiting"] != 1 || st.Active["running"] != 0 || st.Active["pending"] != 0 || st.Blocked.Count != 0 || st.Stale.Count != 0 {
			t.Fatalf("active %v, blocked %+v, stale %+v", st.Active, st.Blocked, st.Stale)
		}

		// One workflow; every active run is stale a millisecond before
		// the end of a window an hour ahead.
		window.Set("workflow", "gate")
		window.Set("stale_after", "1ms")
		e.api.call(http.MethodGet, "/api/v1/stats?"+window.Encode(), nil, http.StatusOK, &st)
		if st.Workflow != "gate" || st.Totals != (StatsCounts{Started: 1}) || st.Latency.Count != 0 || st.Stale.Count != 1 || len(st.Stale.Runs) != 1 {
			t.Fatalf("stats of the gate: %+v", st)
		}
		if s := st.Stale.Runs[0]; s.ID != gate.ID || s.Workflow != "gate" || s.Status != "waiting" || s.Kind != "flow" || s.Condition != nil {
			t.Fatalf("stale run %+v", s)
		}

		// The defaults: the last hour, in minutes.
		e.api.call(http.MethodGet, "/api/v1/stats", nil, http.StatusOK, &st)
		if st.Until.Sub(st.Since) != time.Hour || st.BucketSeconds != 60 || len(st.Buckets) != 60 || st.Totals.Started != 4 {
			t.Fatalf("defaults: %v to %v by %vs, %d buckets, %+v", st.Since, st.Until, st.BucketSeconds, len(st.Buckets), st.Totals)
		}

		for q, names := range map[string]string{
			"bucket=1s": "bucket", "since=2030-01-01T00:00:00Z&until=2029-01-01T00:00:00Z": "since",
		} {
			p := e.api.do(req{method: http.MethodGet, path: "/api/v1/stats?" + q}).problem(t, http.StatusBadRequest)
			if len(p.Errors) != 1 || p.Errors[0].Path != names {
				t.Fatalf("%s: %+v", q, p)
			}
		}
	})
}

// The runs of a parent, by version and by id, show their parent_id.
func TestListByParentVersionAndIDs(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var parent Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &parent)
		// A child as the runtime stores one (no workflow of the harness
		// starts children).
		res, err := e.store.Apply(context.Background(), &store.ApplyParams{Now: time.Now(), Changes: []store.Change{{Create: &store.NewRun{
			ID: "child-1", Workflow: "counter", Version: 1, Kind: hephtype.KindWorkflow, Status: hephtype.StatusCompleted, ParentID: parent.ID,
		}}}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatalf("create the child: %v %+v", err, res)
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?parent="+parent.ID, nil, http.StatusOK, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != "child-1" || list.Runs[0].ParentID != parent.ID {
			t.Fatalf("children %+v", list.Runs)
		}
		var child Run
		e.api.call(http.MethodGet, "/api/v1/runs/child-1", nil, http.StatusOK, &child)
		if child.ParentID != parent.ID {
			t.Fatalf("child %+v", child)
		}
		e.api.call(http.MethodGet, "/api/v1/runs?id=child-1&id="+parent.ID+",nope", nil, http.StatusOK, &list)
		if len(list.Runs) != 2 || list.Runs[0].ID != "child-1" || list.Runs[1].ID != parent.ID || list.Runs[1].ParentID != "" {
			t.Fatalf("by id %+v", list.Runs)
		}
		e.api.call(http.MethodGet, "/api/v1/runs?version=2", nil, http.StatusOK, &list)
		if len(list.Runs) != 0 {
			t.Fatalf("version 2: %+v", list.Runs)
		}
		e.api.call(http.MethodGet, "/api/v1/runs?version=1&workflow=gate", nil, http.StatusOK, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != parent.ID {
			t.Fatalf("version 1 of gate: %+v", list.Runs)
		}
		many := strings.Repeat("x,", 1000) + "y"
		p := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?id=" + many}).problem(t, http.StatusBadRequest)
		if len(p.Errors) != 1 || p.Errors[0].Path != "id" {
			t.Fatalf("1001 ids: %+v", p)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?version=-1", invalid: true}).problem(t, http.StatusBadRequest)
	})
}

// A bulk cancel of a selection of run ids, more than a page of the
// processor, as one operation; then one whose ids include runs created
// after it, which it leaves alone.
func TestBulkCancelSelection(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var runs []Run
		for range operationPage + 10 {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &r)
			runs = append(runs, r)
		}
		var sel []string
		for _, r := range runs[:operationPage+5] {
			sel = append(sel, r.ID)
		}
		sel = append(sel, runs[operationPage+8].ID, "no-such-run")

		e.api.do(req{method: http.MethodPost, path: "/api/v1/operations", body: map[string]any{"action": "cancel", "filter": map[string]any{"ids": make([]string, 1001)}}, invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/operations", body: map[string]any{"action": "cancel", "filter": map[string]any{"ids": []string{}}}}).problem(t, http.StatusBadRequest)

		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "cancel", "filter": map[string]any{"ids": sel}}, http.StatusAccepted, &op)
		if len(op.Filter.IDs) != len(sel) {
			t.Fatalf("created %+v", op)
		}
		done := e.waitOperation(op.ID)
		if done.Status != store.OperationCompleted || done.Total != operationPage+6 || done.Done != operationPage+6 || done.Failed != 0 {
			t.Fatalf("the operation ended as %+v", done)
		}
		status := func(i int) string {
			var r Run
			e.api.call(http.MethodGet, "/api/v1/runs/"+runs[i].ID, nil, http.StatusOK, &r)
			return r.Status
		}
		for i := range runs {
			want := i < operationPage+5 || i == operationPage+8
			if got := status(i) == "cancelled"; got != want {
				t.Fatalf("run %d is %s; cancelled: want %v", i, status(i), want)
			}
		}

		// The operation selects the runs created before it only.
		var later Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+runs[operationPage+7].ID, nil, http.StatusOK, &later)
		filter := `{"ids": ["` + strings.Join([]string{runs[operationPage+5].ID, runs[operationPage+6].ID, runs[operationPage+7].ID, runs[operationPage+9].ID}, `", "`) + `"]}`
		sop := &store.Operation{ID: "before", Action: store.OperationCancel, Filter: []byte(filter), CreatedBy: "test", CreatedAt: later.CreatedAt}
		if err := e.admin().CreateOperation(context.Background(), sop); err != nil {
			t.Fatal(err)
		}
		e.server.ops.wake()
		if got := e.waitOperation("before"); got.Status != store.OperationCompleted || got.Done != 2 || got.Total != 2 {
			t.Fatalf("the operation ended as %+v", got)
		}
		for _, i := range []int{operationPage + 5, operationPage + 6} {
			if got := status(i); got != "cancelled" {
				t.Fatalf("run %d is %s, want cancelled", i, got)
			}
		}
		for _, i := range []int{operationPage + 7, operationPage + 9} {
			e.waitStatus(runs[i].ID, "waiting")
		}
	})
}
