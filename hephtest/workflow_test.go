package hephtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var countdown = workflow.New("countdown", func(ctx workflow.Context, n int) (string, error) {
	if n == 0 {
		return "liftoff", nil
	}
	if err := workflow.Sleep(ctx, time.Hour); err != nil {
		return "", err
	}
	return "", workflow.ContinueAsNew(ctx, n-1)
})

func TestWorkflowEnvContinueAsNew(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		env := hephtest.NewWorkflowEnv(&hephtest.WorkflowEnvConfig{Fresh: fresh}, countdown)
		start := env.Now()
		out, err := hephtest.ExecuteWorkflow(context.Background(), env, countdown, 3)
		env.Close()
		if err != nil || out != "liftoff" {
			t.Fatalf("fresh=%t: %q, %v", fresh, out, err)
		}
		if d := env.Now().Sub(start); d != 3*time.Hour {
			t.Fatalf("virtual time %s, want 3h", d)
		}
	}
}

func TestWorkflowEnvFailureAndWaiting(t *testing.T) {
	boom := workflow.New("boom", func(ctx workflow.Context, _ struct{}) (int, error) {
		return 0, errors.New("kaput")
	})
	waiter := workflow.New("waiter", func(ctx workflow.Context, _ struct{}) (int, error) {
		return workflow.WaitSignal[int](ctx, "n")
	})
	env := hephtest.NewWorkflowEnv(nil, boom, waiter)
	defer env.Close()
	ctx := context.Background()
	_, err := hephtest.ExecuteWorkflow(ctx, env, boom, struct{}{})
	var we *heph.WorkflowError
	if !errors.As(err, &we) || we.Message != "kaput" {
		t.Fatalf("error %v", err)
	}
	run, err := hephtest.StartWorkflow(env, waiter, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(); err == nil || !strings.Contains(err.Error(), "not finished") {
		t.Fatalf("result of a waiting run: %v", err)
	}
	if run.Status() != hephtype.StatusWaiting {
		t.Fatalf("status %s", run.Status())
	}
	if _, err := hephtest.Update[int](ctx, run, "nope", nil); !errors.Is(err, heph.ErrUpdateNotAccepted) {
		t.Fatalf("update outside a phase: %v", err)
	}
	if err := run.Signal("n", 7); err != nil {
		t.Fatal(err)
	}
	if n, err := run.Result(); err != nil || n != 7 {
		t.Fatalf("%d, %v", n, err)
	}
}

func TestReplayHistoryErrors(t *testing.T) {
	env := hephtest.NewWorkflowEnv(nil, countdown)
	defer env.Close()
	run, err := hephtest.StartWorkflow(env, countdown, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := run.History()
	if err := hephtest.ReplayHistory(h); err == nil || !strings.Contains(err.Error(), `"countdown"`) {
		t.Fatalf("replay without the workflow: %v", err)
	}
	if err := hephtest.ReplayHistory([]byte("{")); err == nil {
		t.Fatal("replay of bad JSON: no error")
	}
	// A run cancelled by the runtime ends with run_cancelled: replay stops there.
	var x heph.HistoryExport
	if err := json.Unmarshal(h, &x); err != nil {
		t.Fatal(err)
	}
	x.Events = append(x.Events, heph.ExportedEvent{Seq: int64(len(x.Events) + 1)})
	x.Events[len(x.Events)-1].Kind = hephtype.EventRunCancelled
	b, _ := json.Marshal(x)
	if err := hephtest.ReplayHistory(b, countdown); err != nil {
		t.Fatalf("replay of a cancelled run: %v", err)
	}
}
