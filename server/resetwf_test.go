package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// newResetEnv serves a client with "rs-wf": it waits for the signal "go"
// and charges its payload with "rs-charge", which fails while broken.
func newResetEnv(t *testing.T, b backend, broken *atomic.Bool) *env {
	t.Helper()
	st := b.open(t)
	c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger(), SecretKeys: testKeys(t, "k1:1")})
	if err != nil {
		t.Fatal(err)
	}
	charge := workflow.NewActivity("rs-charge", func(_ context.Context, n int) (int, error) {
		if broken.Load() {
			return 0, flow.NonRetryable(errors.New("card declined"))
		}
		return n * 10, nil
	})
	wf := workflow.New("rs-wf", func(ctx workflow.Context, _ struct{}) (int, error) {
		n, err := workflow.WaitSignal[int](ctx, "go")
		if err != nil {
			return 0, err
		}
		return charge.Execute(ctx, n)
	})
	if err := errors.Join(c.RegisterWorkflows(wf), c.RegisterActivities(charge)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return serve(t, st, c, &Config{})
}

// POST /runs/{id}/retry of a failed workflow run and POST
// /runs/{id}/reset-workflow: by role, bad points refused, the new run
// linked both ways, the reset recorded with the caller's principal.
func TestResetWorkflowAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		broken := &atomic.Bool{}
		broken.Store(true)
		e := newResetEnv(t, b, broken)
		ops, reader := e.token("ops", RoleOperator), e.token("reader", RoleRead)
		ctx := context.Background()
		r, err := e.client.StartWorkflow(ctx, "rs-wf", struct{}{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.client.SignalWorkflow(ctx, r.ID, "go", 4); err != nil {
			t.Fatal(err)
		}
		e.api.token = ops
		e.waitStatus(r.ID, heph.StatusFailed)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/retry", token: reader}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/reset-workflow", token: reader}).problem(t, http.StatusForbidden)
		for _, bad := range []any{"zz", 1.5, 0, 7, true} {
			_, unknown := bad.(string) // or a decision the run does not have: the schema allows them
			e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + r.ID + "/reset-workflow", token: ops,
				body: map[string]any{"point": bad}, invalid: !unknown && bad != 7}).problem(t, http.StatusBadRequest)
		}
		broken.Store(false)
		var retried Run
		e.api.callAs(ops, http.MethodPost, "/api/v1/runs/"+r.ID+"/retry", nil, http.StatusOK, &retried)
		if retried.ID == r.ID || retried.ResetFrom != r.ID {
			t.Fatalf("retried: %+v", retried)
		}
		done := e.waitStatus(retried.ID, heph.StatusCompleted)
		if string(done.Output) != "40" {
			t.Fatalf("retried run's output %s, want 40", done.Output)
		}
		var old Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID, nil, http.StatusOK, &old)
		if old.ResetTo != retried.ID || old.Status != "failed" {
			t.Fatalf("old run: %+v", old)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + retried.ID + "/retry", token: ops}).problem(t, http.StatusConflict)

		var reset Run
		e.api.callAs(ops, http.MethodPost, "/api/v1/runs/"+retried.ID+"/reset-workflow",
			map[string]any{"point": "first", "reapply_signals": true, "reason": "again"}, http.StatusCreated, &reset)
		if reset.ResetFrom != retried.ID {
			t.Fatalf("reset: %+v", reset)
		}
		var same Run
		e.api.callAs(ops, http.MethodPost, "/api/v1/runs/"+retried.ID+"/reset-workflow",
			map[string]any{"point": "first", "reapply_signals": true}, http.StatusCreated, &same)
		if same.ID != reset.ID {
			t.Fatalf("the same reset again made run %s, want %s", same.ID, reset.ID)
		}
		if got := e.waitStatus(reset.ID, heph.StatusCompleted); string(got.Output) != "40" {
			t.Fatalf("reset run's output %s", got.Output)
		}
		var h History
		e.api.call(http.MethodGet, "/api/v1/runs/"+retried.ID+"/history", nil, http.StatusOK, &h)
		last := h.Events[len(h.Events)-1]
		var info map[string]string
		if err := json.Unmarshal(last.Data, &info); err != nil || last.Kind != "workflow_reset" || last.Name != reset.ID ||
			info["by"] != "ops" || info["reason"] != "again" || info["point"] != "first" {
			t.Fatalf("last entry of the reset run: %+v (%v)", last, err)
		}
	})
}

// A bulk retry resets each failed workflow run it selects to its last
// good point, as the operation's creator; the new runs complete.
func TestBulkRetryWorkflows(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		broken := &atomic.Bool{}
		broken.Store(true)
		e := newResetEnv(t, b, broken)
		e.api.token = e.token("ops", RoleOperator)
		ctx := context.Background()
		var ids []string
		for i := range 2 {
			r, err := e.client.StartWorkflow(ctx, "rs-wf", struct{}{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.client.SignalWorkflow(ctx, r.ID, "go", i+1); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		for _, id := range ids {
			e.waitStatus(id, heph.StatusFailed)
		}
		broken.Store(false)
		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "retry", "filter": map[string]any{"statuses": []string{"failed"}, "workflow": "rs-wf"}}, http.StatusAccepted, &op)
		if done := e.waitOperation(op.ID); done.Status != store.OperationCompleted || done.Done != 2 || done.Failed != 0 {
			t.Fatalf("the retry operation: %+v", done)
		}
		for i, id := range ids {
			var old Run
			e.api.call(http.MethodGet, "/api/v1/runs/"+id, nil, http.StatusOK, &old)
			if old.ResetTo == "" {
				t.Fatalf("run %s was not reset: %+v", id, old)
			}
			if r := e.waitStatus(old.ResetTo, heph.StatusCompleted); string(r.Output) != strconv.Itoa((i+1)*10) {
				t.Errorf("the new run of %s: output %s", id, r.Output)
			}
			h, err := e.client.History(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if last := h[len(h)-1]; last.Kind != "workflow_reset" || !strings.Contains(string(last.Data), `"by":"ops"`) {
				t.Errorf("the last entry of %s: %+v", id, last)
			}
		}
	})
}
