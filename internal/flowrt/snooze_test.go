package flowrt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// A snooze and a cancellation from inside are completions of the step's
// task, fenced by its lease: made with a lease taken over since (another
// token) or spent (the task completed), they are refused with
// ErrLeaseLost and write nothing; the holder's go through once.
func TestSnoozeAndCancelAreFenced(t *testing.T) {
	exec := &remoteExecutor{jobs: make(chan job)}
	r := newRig(t, func(*rig) worker.Executor { return exec }, twoSteps(t))
	run, err := r.flows.Start(context.Background(), "remote", 1, &flowrt.StartOptions{Priority: ptr(9)})
	if err != nil {
		t.Fatal(err)
	}
	history := func() []store.Event {
		h, err := r.st.History(context.Background(), &store.HistoryParams{RunID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	j := next(t, exec.jobs)
	ta := j.held.Task()
	if ta.Priority != 9 {
		t.Fatalf("first task priority %d, want the run's 9", ta.Priority)
	}
	forged := *ta
	forged.Token++
	n := len(history())
	for _, o := range []*flowrt.Outcome{{Snoozed: true, Snooze: time.Millisecond}, {Cancelled: true, CancelReason: "x"}} {
		if _, err := r.flows.Complete(&forged, o, ""); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("%+v with another token: %v, want ErrLeaseLost", o, err)
		}
	}
	if len(history()) != n {
		t.Fatal("refused completions wrote history")
	}
	// The holder snoozes: the same attempt comes back, with the run's
	// priority.
	if _, err := r.flows.Complete(ta, &flowrt.Outcome{Snoozed: true, Snooze: time.Millisecond}, ""); err != nil {
		t.Fatalf("snooze: %v", err)
	}
	j.done <- nil
	if _, err := r.flows.Complete(ta, &flowrt.Outcome{Snoozed: true, Snooze: time.Millisecond}, ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the snooze again (a retried commit): %v, want ErrLeaseLost", err)
	}
	j = next(t, exec.jobs)
	ta2 := j.held.Task()
	if ta2.Step != "a" || ta2.Attempt != 1 || ta2.Priority != 9 {
		t.Fatalf("after the snooze: %+v, want attempt 1 of a, priority 9", ta2)
	}
	if _, err := r.flows.Complete(ta2, &flowrt.Outcome{Cancelled: true, CancelReason: "enough"}, ""); err != nil {
		t.Fatalf("cancel from inside: %v", err)
	}
	j.done <- nil
	if _, err := r.flows.Complete(ta2, &flowrt.Outcome{Cancelled: true, CancelReason: "again"}, ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the cancellation again: %v, want ErrLeaseLost", err)
	}
	done := waitDone(t, r, run.ID)
	if done.Status != hephtype.StatusCancelled || done.Error != "enough" {
		t.Fatalf("run %s %q, want cancelled: enough", done.Status, done.Error)
	}
	var snoozes, cancels int
	for _, e := range history() {
		switch e.Kind {
		case hephtype.EventStepSnoozed:
			snoozes++
		case hephtype.EventRunCancelled:
			cancels++
		}
	}
	if snoozes != 1 || cancels != 1 {
		t.Fatalf("%d step_snoozed, %d run_cancelled; want one each", snoozes, cancels)
	}
}

func ptr[T any](v T) *T { return &v }
