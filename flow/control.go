package flow

import (
	"fmt"
	"time"
)

// Snooze returns the error a step returns to run again after d without
// counting an attempt: the step's task is scheduled again, ready d from
// now, with the same attempt number, and the history records a
// step_snoozed entry. A snooze is the step's completion, fenced by its
// task's lease like any other: a worker that lost its lease snoozes
// nothing. Wrapped errors are recognised too (errors.As).
//
// A step that snoozes forever never ends: bound it yourself (count the
// snoozes in heartbeat details, or in your own data).
func Snooze(d time.Duration) error { return &SnoozeError{After: max(d, 0)} }

// SnoozeError is the error Snooze returns.
type SnoozeError struct {
	// After is how long the step waits before it runs again.
	After time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.After) }

// Cancel returns the error a step returns to end its run cancelled, with
// the reason, and no retry: the run's other scheduled steps are cancelled
// as by Client.CancelRun, and the history records run_cancelled with the
// reason. It is the step's completion, fenced by its task's lease: a
// worker that lost its lease cancels nothing. Wrapped errors are
// recognised too (errors.As).
func Cancel(reason string) error { return &CancelError{Reason: reason} }

// CancelError is the error Cancel returns.
type CancelError struct {
	// Reason becomes the run's error.
	Reason string
}

func (e *CancelError) Error() string { return "cancelled: " + e.Reason }
