package cli

import (
	"fmt"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// statusScheduled is the status that ls and show print for a run whose
// every task is due later (the API's scheduled_for), and that --status
// takes to list those runs.
const statusScheduled = "scheduled"

// runStatus is a run's status as ls and show print it: "scheduled (in
// 23h)" for a run due later, its stored status otherwise.
func runStatus(r *apiclient.Run, now time.Time) string {
	if r.Condition != nil && r.Condition.Kind == conditionPaused {
		return r.Status + " (paused)"
	}
	if r.ScheduledFor == nil {
		return r.Status
	}
	return statusScheduled + " (" + dueIn(r.ScheduledFor.Sub(now)) + ")"
}

// dueIn says how soon something is due, rounded down to the unit that
// reads best: "in 45s", "in 12m", "in 23h", "in 3d"; "due now" once it is.
func dueIn(d time.Duration) string {
	switch {
	case d <= 0:
		return "due now"
	case d < time.Minute:
		return fmt.Sprintf("in %ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("in %dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("in %dh", int(d/time.Hour))
	}
	return fmt.Sprintf("in %dd", int(d/(24*time.Hour)))
}

// notFinished is the line heph result prints on stderr for a run that
// has not ended: what it is doing, and how to wait for its result.
func notFinished(id, status string) string {
	return fmt.Sprintf("heph: run %s has not finished (%s); wait for its result with heph result %s --wait 5m, or --forever", id, status, id)
}
