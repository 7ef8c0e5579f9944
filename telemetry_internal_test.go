package hephaestus

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/telemetry"
)

// The public event kinds are the runtime's, spelled out for go doc: they
// must not drift apart.
func TestEventKindsMatchRuntime(t *testing.T) {
	pairs := map[EventKind]telemetry.Kind{
		RunStarted: telemetry.RunStarted, RunCompleted: telemetry.RunCompleted, RunFailed: telemetry.RunFailed,
		RunCancelled: telemetry.RunCancelled, RunContinued: telemetry.RunContinued, StepStarted: telemetry.StepStarted,
		StepCompleted: telemetry.StepCompleted, StepFailed: telemetry.StepFailed, TaskStarted: telemetry.TaskStarted,
		TaskCompleted: telemetry.TaskCompleted, TaskFailed: telemetry.TaskFailed, WorkerStarted: telemetry.WorkerStarted,
		WorkerStopped: telemetry.WorkerStopped, WorkerFailed: telemetry.WorkerFailed, CommitFailed: telemetry.CommitFailed,
		RetentionSwept: telemetry.RetentionSwept, DecisionFailed: telemetry.DecisionFailed, RunCondition: telemetry.RunCondition,
	}
	if len(pairs) != 18 {
		t.Fatalf("%d distinct kinds, want 18", len(pairs))
	}
	for pub, in := range pairs {
		if string(pub) != string(in) {
			t.Errorf("public kind %q differs from the runtime's %q", pub, in)
		}
	}
}
