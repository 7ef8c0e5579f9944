package hephaestus

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/telemetry"
)

// The public event kinds are the runtime's, spelled out for go doc: they
// must not drift apart.
func TestEventKindsMatchRuntime(t *testing.T) {
	public := []EventKind{
		RunStarted, RunCompleted, RunFailed, RunCancelled, RunContinued, RunCondition,
		StepStarted, StepCompleted, StepFailed,
		TaskStarted, TaskCompleted, TaskFailed,
		DecisionStarted, DecisionCompleted, DecisionFailed,
		WorkerStarted, WorkerStopped, WorkerPoll, WorkerFailed,
		CommitCompleted, CommitFailed, RetentionSwept, ScheduleFired, ScheduleSkipped,
	}
	if len(public) != len(telemetry.Kinds) {
		t.Fatalf("%d public kinds, the runtime has %d", len(public), len(telemetry.Kinds))
	}
	seen := map[EventKind]bool{}
	for i, pub := range public {
		if seen[pub] {
			t.Errorf("kind %q listed twice", pub)
		}
		seen[pub] = true
		if string(pub) != string(telemetry.Kinds[i]) {
			t.Errorf("public kind %q differs from the runtime's %q", pub, telemetry.Kinds[i])
		}
	}
}
