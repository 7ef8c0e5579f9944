package hephtest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var double = workflow.NewActivity("double", func(ctx context.Context, n int) (int, error) { return 2 * n, nil })

// A workflow whose activity input depends on something other than its
// history (a counter of its executions) fails its next replay in a
// WorkflowEnv with a *heph.NonDeterminismError that names the input.
func TestWorkflowEnvChangedInput(t *testing.T) {
	var executions atomic.Int64
	flaky := workflow.New("flaky", func(ctx workflow.Context, _ struct{}) (int, error) {
		return double.Execute(ctx, int(executions.Add(1))) //heph:nondeterministic-ok the test's point: an input that changes on replay
	})
	env := hephtest.NewWorkflowEnv(&hephtest.WorkflowEnvConfig{Fresh: true}, flaky)
	defer env.Close()
	env.RegisterActivities(double)
	_, err := hephtest.ExecuteWorkflow(context.Background(), env, flaky, struct{}{})
	var nde *heph.NonDeterminismError
	if !errors.As(err, &nde) {
		t.Fatalf("executing a non-deterministic workflow: %v, want a *heph.NonDeterminismError", err)
	}
	if nde.Changed != "input" || nde.Workflow != "flaky" || !strings.Contains(nde.CommandAt, "nondeterminism_test.go:") {
		t.Fatalf("error fields %+v", nde)
	}
}

// ReplayHistory reports a changed activity input.
func TestReplayHistoryChangedInput(t *testing.T) {
	v1 := workflow.New("doubler", func(ctx workflow.Context, n int) (int, error) {
		return double.Execute(ctx, n)
	})
	env := hephtest.NewWorkflowEnv(nil, v1)
	defer env.Close()
	env.RegisterActivities(double)
	run, err := hephtest.StartWorkflow(env, v1, 21)
	if err != nil {
		t.Fatal(err)
	}
	history := run.History()
	if err := hephtest.ReplayHistory(history, v1); err != nil {
		t.Fatalf("the same code: %v", err)
	}
	v2 := workflow.New("doubler", func(ctx workflow.Context, n int) (int, error) {
		return double.Execute(ctx, n+1)
	})
	err = hephtest.ReplayHistory(history, v2)
	var nde *heph.NonDeterminismError
	if !errors.As(err, &nde) || nde.Changed != "input" || nde.Recorded != `step_scheduled #1 "double"` {
		t.Fatalf("replaying a changed input: %v (%+v)", err, nde)
	}
	if !strings.HasPrefix(nde.RecordedAt, "hephtest/nondeterminism_test.go:") || !strings.Contains(nde.Hint, "workflow.Patched") {
		t.Fatalf("error fields %+v", nde)
	}
}
