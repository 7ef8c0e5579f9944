package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// waitOperation polls an operation until it is completed (60s at most).
func (e *env) waitOperation(id string) *Operation {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var op Operation
		e.api.call(http.MethodGet, "/api/v1/operations/"+id, nil, http.StatusOK, &op)
		if op.Status == store.OperationCompleted || op.Status == store.OperationFailed {
			return &op
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("operation %s is %s after 60s: %+v", id, op.Status, op)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startApprovals starts n runs of the approval document and waits until
// they all wait at the gate.
func (e *env) startApprovals(n int) []string {
	e.t.Helper()
	var ids []string
	for range n {
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approval", "input": map[string]string{"title": "t"}}, http.StatusCreated, &r)
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		e.waitStatus(id, "waiting")
	}
	return ids
}

// Fifty runs waiting on an approval, cancelled by one operation over a
// filter; a run the filter does not select is left alone.
func TestBulkCancel(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var other Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate"}, http.StatusCreated, &other)
		e.startApprovals(50)
		e.waitStatus(other.ID, "waiting")

		e.api.do(req{method: http.MethodPost, path: "/api/v1/operations", body: map[string]any{"action": "cancel", "filter": map[string]any{}}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/operations", body: map[string]any{"action": "archive", "filter": map[string]any{"workflow": "x"}}, invalid: true}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/operations", body: map[string]any{"action": "cancel", "filter": map[string]any{"statuses": []string{"asleep"}}}, invalid: true}).problem(t, http.StatusBadRequest)

		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "cancel", "reason": "release frozen", "filter": map[string]any{"statuses": []string{"waiting"}, "workflow": "approval"}}, http.StatusAccepted, &op)
		if op.Status != store.OperationPending || op.CreatedBy != "insecure" || op.Filter.Workflow != "approval" {
			t.Fatalf("created %+v", op)
		}
		done := e.waitOperation(op.ID)
		if done.Status != store.OperationCompleted || done.Done != 50 || done.Total != 50 || done.Failed != 0 || len(done.Errors) != 0 {
			t.Fatalf("the operation ended as %+v", done)
		}
		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?workflow=approval&status=cancelled&limit=1000", nil, http.StatusOK, &list)
		if len(list.Runs) != 50 || list.Runs[0].Error == "" {
			t.Fatalf("%d cancelled runs, want 50", len(list.Runs))
		}
		var r Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+other.ID, nil, http.StatusOK, &r)
		if r.Status != "waiting" {
			t.Fatalf("a run the filter does not select is %s", r.Status)
		}
		var ops OperationList
		e.api.call(http.MethodGet, "/api/v1/operations?limit=1", nil, http.StatusOK, &ops)
		if len(ops.Operations) != 1 || ops.Operations[0].ID != op.ID || ops.Next == "" {
			t.Fatalf("operations %+v", ops)
		}
		e.api.call(http.MethodGet, "/api/v1/operations?cursor="+ops.Next, nil, http.StatusOK, &ops)
		if len(ops.Operations) != 0 {
			t.Fatalf("the page after the only operation: %+v", ops)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/operations/nope"}).problem(t, http.StatusNotFound)
	})
}

// An operation a dead server left half done is finished by another: each
// run is counted once, and the dead server's late save is refused.
func TestBulkResumed(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		e.server.Stop() // the test plays the dead server first
		ids := e.startApprovals(5)
		ctx := context.Background()
		filter, _ := json.Marshal(RunFilter{Workflow: "approval", Statuses: []string{"waiting"}})
		op := &store.Operation{ID: "half-done", Action: store.OperationCancel, Filter: filter, CreatedBy: "test", CreatedAt: time.Now()}
		if err := e.admin().CreateOperation(ctx, op); err != nil {
			t.Fatal(err)
		}
		dead, err := e.admin().ClaimOperation(ctx, &store.ClaimOperationParams{Owner: "dead", LeaseFor: time.Microsecond, Now: time.Now()})
		if err != nil || dead == nil {
			t.Fatalf("claim: %v %v", dead, err)
		}
		// The dead server counted 5 runs and cancelled the newest two.
		for _, id := range ids[3:] {
			if err := e.client.CancelRun(ctx, id, "by the dead server"); err != nil {
				t.Fatal(err)
			}
		}
		cur, _ := json.Marshal(progress{Counted: true, Done: []string{ids[4], ids[3]}})
		save := &store.SaveOperationParams{ID: dead.ID, Owner: "dead", Token: dead.Token, Status: store.OperationRunning, Total: 5, Done: 2, Cursor: string(cur), Now: time.Now()}
		if err := e.admin().SaveOperation(ctx, save); err != nil {
			t.Fatal(err)
		}

		// Another server takes it over once the lease has ended.
		e2 := newEnvOn(t, e)
		got := e2.waitOperation("half-done")
		if got.Done != 5 || got.Total != 5 || got.Failed != 0 {
			t.Fatalf("the resumed operation: %+v", got)
		}
		for _, id := range ids {
			var r Run
			e2.api.call(http.MethodGet, "/api/v1/runs/"+id, nil, http.StatusOK, &r)
			if r.Status != "cancelled" {
				t.Errorf("run %s is %s", id, r.Status)
			}
		}
		save.Done, save.Now = 3, time.Now()
		if err := e.admin().SaveOperation(ctx, save); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("the dead server's late save: %v, want ErrLeaseLost", err)
		}
	})
}

// A retry operation runs every failed run of a flow again.
func TestBulkRetry(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		e.fail.Store(true)
		var ids []string
		for range 3 {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "flaky"}, http.StatusCreated, &r)
			ids = append(ids, r.ID)
		}
		for _, id := range ids {
			e.waitStatus(id, "failed")
		}
		e.fail.Store(false)
		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "retry", "filter": map[string]any{"statuses": []string{"failed"}, "workflow": "flaky"}}, http.StatusAccepted, &op)
		done := e.waitOperation(op.ID)
		if done.Status != store.OperationCompleted || done.Done != 3 || done.Failed != 0 {
			t.Fatalf("the retry operation: %+v", done)
		}
		for _, id := range ids {
			var r Run
			e.api.call(http.MethodGet, "/api/v1/runs/"+id+"/result?wait=60s", nil, http.StatusOK, &r)
			if r.Status != "completed" {
				t.Errorf("run %s is %s after the retry", id, r.Status)
			}
		}
	})
}

// An operation whose filter no store query takes fails at once, with the
// reason, rather than being tried again and again.
func TestBulkBadFilter(t *testing.T) {
	e := newEnv(t, backends()[0], nil)
	op := &store.Operation{ID: "bad-filter", Action: store.OperationCancel, Filter: json.RawMessage(`{"kind": "robot"}`), CreatedBy: "test", CreatedAt: time.Now()}
	if err := e.admin().CreateOperation(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	e.server.ops.wake()
	got := e.waitOperation("bad-filter")
	if got.Status != store.OperationFailed || len(got.Errors) != 1 {
		t.Fatalf("an operation with a bad filter: %+v", got)
	}
}
