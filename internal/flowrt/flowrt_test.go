package flowrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/worker"
)

func inProcess(r *rig) worker.Executor { return r.flows }

// The in-process executor runs registered step code and commits each
// outcome; a waiting step is resumed from outside; the registry refuses a
// changed flow under an old version.
func TestInProcessFlowWithResume(t *testing.T) {
	b := flow.New("approve")
	a := flow.Step(b, "double", func(ctx context.Context, in int) (int, error) { return 2 * in, nil })
	flow.EventStep(b, "gate", func(ctx context.Context, in int) (flow.Result[int], error) { return flow.Wait[int](), nil },
		flow.DependsOn(a.Name()), flow.Events("approved"), flow.Waits(time.Hour))
	b.Edge("gate", "approved", flow.Done).Edge("gate", "timeout", flow.Done)
	f := b.MustBuild()
	r := newRig(t, inProcess, f)
	ctx := context.Background()

	changed := flow.New("approve")
	flow.Step(changed, "other", func(ctx context.Context, in int) (int, error) { return in, nil })
	if err := r.flows.Register(changed.MustBuild()); !errors.Is(err, flowrt.ErrFlowConflict) {
		t.Fatalf("registering a changed shape under version 1: %v, want ErrFlowConflict", err)
	}
	if _, err := r.flows.Start(ctx, "approve", json.RawMessage("{"), nil); !errors.Is(err, limits.ErrInvalidInput) {
		t.Fatalf("start with input that is not JSON: %v, want ErrInvalidInput", err)
	}
	if _, err := r.flows.Start(ctx, "nope", 1, nil); !errors.Is(err, flowrt.ErrFlowNotFound) {
		t.Fatalf("start of an unknown flow: %v, want ErrFlowNotFound", err)
	}
	run, err := r.flows.Start(ctx, "approve", 21, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Resume before the gate waits is refused.
	err = r.flows.Resume(ctx, run.ID, "gate", "approved", json.RawMessage(`"ok"`), nil)
	for errors.Is(err, engine.ErrNotWaiting) {
		err = r.flows.Resume(ctx, run.ID, "", "approved", json.RawMessage(`"ok"`), nil)
	}
	if err != nil {
		g, _ := r.st.GetRun(ctx, run.ID)
		t.Fatalf("resume: %v (run error %q)", err, g.Error)
	}
	done := waitDone(t, r, run.ID)
	if done.Status != hephtype.StatusCompleted {
		t.Fatalf("run %s: %s (%s)", run.ID, done.Status, done.Error)
	}
	if err := r.flows.Resume(ctx, run.ID, "gate", "approved", nil, nil); !errors.Is(err, engine.ErrRunFinished) && !errors.Is(err, engine.ErrNotWaiting) {
		t.Fatalf("resume of a finished run: %v", err)
	}
}

// Cancel cancels a flow run once: a second cancel finds it finished.
func TestCancel(t *testing.T) {
	b := flow.New("slow")
	flow.EventStep(b, "gate", func(ctx context.Context, in int) (flow.Result[int], error) { return flow.Wait[int](), nil }, flow.Events("go"), flow.Waits(time.Hour))
	b.Edge("gate", "go", flow.Done).Edge("gate", "timeout", flow.Done)
	r := newRig(t, inProcess, b.MustBuild())
	ctx := context.Background()
	run, err := r.flows.Start(ctx, "slow", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.flows.Cancel(ctx, run.ID, "", nil)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if got.Status != hephtype.StatusCancelled || got.Error != "cancelled" {
		t.Fatalf("cancelled run: %s %q, want cancelled with the default reason", got.Status, got.Error)
	}
	if _, err := r.flows.Cancel(ctx, run.ID, "again", nil); !errors.Is(err, engine.ErrRunFinished) {
		t.Fatalf("second cancel: %v, want ErrRunFinished", err)
	}
}
