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
	"github.com/hephaestus-go/hephaestus/store"
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

// A completed run's output is stored once, in the run's output column:
// the engine state kept on the row leaves it out, and a reset that runs
// the last step again completes with the output computed anew (the
// output is keyed by the flow's last step; inc reads the run's input).
func TestCompletedStateStoresOutputOnce(t *testing.T) {
	b := flow.New("twice")
	a := flow.Step(b, "double", func(ctx context.Context, in int) (int, error) { return 2 * in, nil })
	flow.Step(b, "inc", func(ctx context.Context, in int) (map[string]int, error) { return map[string]int{"n": in + 1}, nil },
		flow.DependsOn(a.Name()))
	r := newRig(t, inProcess, b.MustBuild())
	ctx := context.Background()
	run, err := r.flows.Start(ctx, "twice", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, done *store.Run) {
		t.Helper()
		if done.Status != hephtype.StatusCompleted || string(done.Output) != `{"inc":{"n":6}}` {
			t.Fatalf("%s: run %s %s with output %s (%s), want completed with {\"inc\":{\"n\":6}}", what, done.ID, done.Status, done.Output, done.Error)
		}
		var state map[string]json.RawMessage
		if err := json.Unmarshal(done.State, &state); err != nil {
			t.Fatalf("%s: state %s: %v", what, done.State, err)
		}
		if out, ok := state["output"]; ok {
			t.Fatalf("%s: the state repeats the output %s: %s", what, out, done.State)
		}
		if string(state["status"]) != `"completed"` {
			t.Fatalf("%s: state %s, want status completed", what, done.State)
		}
	}
	first := waitDone(t, r, run.ID)
	check("first run", first)
	if _, err := r.flows.Reset(ctx, run.ID, "inc", "test", ""); err != nil {
		t.Fatalf("reset to inc: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := r.st.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == hephtype.StatusCompleted && got.Seq > first.Seq {
			check("after the reset", got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s after the reset: %s at seq %d", run.ID, got.Status, got.Seq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
