package hephtype

import (
	"fmt"
	"strconv"
	"strings"
)

// NonDeterminismError reports that replayed workflow code did not issue
// the command the history recorded: the code changed in a way that is
// incompatible with runs in flight, or it depends on something other than
// its history (the wall clock, a map's order, a global).
//
// It speaks of the history in the kinds of its entries (step_scheduled,
// timer_started, child_started, marker, …) and of the code in the words of
// the workflow API (Execute activity "charge", workflow.Sleep, …). "Decision
// N" is the Nth decision entry of the run's history: the decision that was
// being replayed.
//
// The run is not lost: nothing was written, its decision is retried with
// backoff, and it continues once the code is fixed. The error reaches
// callers through telemetry (DecisionFailed and RunCondition events), the
// run's condition, the logs, and hephtest's replayer (hephtest.ReplayHistory).
//
// The replay core (internal/replay) builds it; package hephaestus names it
// hephaestus.NonDeterminismError, and errors.As finds it through either
// name.
//
// An activity's input and queue are compared with those the history
// recorded when it recorded them (histories written since the comparison
// exists); the input as the first 8 bytes of the SHA-256 of its canonical
// JSON, in hex.
type NonDeterminismError struct {
	// Workflow is the workflow's name, RunID the run's id when known.
	Workflow string
	RunID    string
	// Decision is the decision being replayed, counted from 1.
	Decision int
	// Entry is the position in the history of the recorded entry, counted
	// from 1; zero when there is none.
	Entry int
	// RecordedKind and Recorded are the kind and the text of the history
	// entry recorded at that point (`step_scheduled #3 "charge"`); empty
	// when the code issued a command the history does not have.
	RecordedKind EventKind
	Recorded     string
	// RecordedAt is "dir/file.go:line" of the workflow code that issued the
	// recorded command, when the history knows it (activities, timers and
	// child workflows recorded since it does).
	RecordedAt string
	// Command is the command the code issued instead, in the workflow
	// API's words and with the entry it records (`Execute activity
	// "refund" (step_scheduled #3)`); empty when it issued none where the
	// history has one.
	Command string
	// CommandAt is "file:line" of the workflow code that issued Command
	// (or, without a Command, where the workflow waits instead).
	CommandAt string
	// Waiting, without a Command, says what the workflow waits for.
	Waiting string
	// Changed names what differs between the recorded command and the new
	// one when they are of the same kind ("activity name", "input",
	// "queue", "timer duration", "child workflow", "patch id", "update
	// name"), and Old and New are its values in the history and in the
	// code.
	Changed  string
	Old, New string
	// Reason explains a mismatch that is not about one command (the
	// history reports the outcome of a command the code never issued, …).
	Reason string
	// Hint says what to do: guard the change with workflow.Patched, or
	// replay the history with the old code to find it.
	Hint string
}

func (e *NonDeterminismError) Error() string {
	var b strings.Builder
	b.WriteString("workflow " + strconv.Quote(e.Workflow))
	if e.RunID != "" {
		b.WriteString(" (run " + e.RunID + ")")
	}
	b.WriteString(" is not deterministic: replaying decision " + strconv.Itoa(e.Decision) + " of its history, ")
	at := ""
	if e.CommandAt != "" {
		at = " at " + e.CommandAt
	}
	recorded := "" // a clause: what the history has there
	if e.Recorded != "" {
		recorded = "the history has " + e.Recorded
		if e.Entry > 0 {
			recorded = "the history's entry " + strconv.Itoa(e.Entry) + " is " + e.Recorded
		}
		if e.RecordedAt != "" {
			recorded += " (issued at " + e.RecordedAt + ")"
		}
	}
	switch {
	case e.Reason != "" && recorded != "":
		b.WriteString(e.Reason + ": " + recorded + at)
	case e.Reason != "":
		b.WriteString(e.Reason + at)
	case e.Changed != "":
		fmt.Fprintf(&b, "the %s changed from %s to %s: %s, the code issued %s%s", e.Changed, e.Old, e.New, recorded, e.Command, at)
	case e.Command != "" && recorded != "":
		b.WriteString(recorded + ", the code issued " + e.Command + at)
	case e.Command != "":
		b.WriteString("the code issued " + e.Command + at + ", which the history does not have")
	case recorded != "":
		b.WriteString(recorded + " but the code issued no command")
		if e.Waiting != "" {
			b.WriteString("; it waits for " + e.Waiting + at)
		} else if at != "" {
			b.WriteString("; it waits" + at)
		}
	}
	if e.Hint != "" {
		b.WriteString("; " + e.Hint)
	}
	return b.String()
}
