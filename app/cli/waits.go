package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// printWaits prints the "Waiting for:" block of heph show: one line per
// wait (the signals and the updates a workflow accepts on one line each).
func printWaits(w io.Writer, r *apiclient.Run, now time.Time) error {
	lines := waitLines(r, now)
	if len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("\nWaiting for:\n")
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func waitLines(r *apiclient.Run, now time.Time) []string {
	var signals, updates []string
	for _, wt := range r.WaitingFor {
		switch wt.Kind {
		case "signal":
			signals = append(signals, wt.Name)
		case "update":
			updates = append(updates, wt.Name)
		}
	}
	var out []string
	switch {
	case len(signals) == 1:
		out = append(out, "signal "+signals[0]+sendHint(r.ID, "signal", signals[0]))
	case len(signals) > 1:
		out = append(out, "signal, any of: "+strings.Join(signals, ", "))
	}
	switch {
	case len(updates) == 1:
		out = append(out, "update "+updates[0])
	case len(updates) > 1:
		out = append(out, "update, any of: "+strings.Join(updates, ", "))
	}
	for _, wt := range r.WaitingFor {
		if l := waitLine(r.ID, wt, now); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func sendHint(id, verb, name string) string {
	return fmt.Sprintf(" (heph %s %s %s)", verb, id, name)
}

// when says when a wait is due: "2026-11-27T10:00:00Z (in 3h)".
func when(t *time.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339) + " (" + dueIn(t.Sub(now)) + ")"
}

func ofStep(wt apiclient.Wait) string {
	if wt.Step == "" {
		return ""
	}
	return " (step " + wt.Step + ")"
}

// waitLine is the line of one wait; "" for the signals and updates,
// printed together.
func waitLine(id string, wt apiclient.Wait, now time.Time) string {
	q := strconv.Quote(wt.Queue)
	switch wt.Kind {
	case "signal", "update":
		return ""
	case "timer":
		return "timer until " + when(wt.Due, now) + ofStep(wt)
	case "gate":
		var by []string
		by = append(by, wt.Users...)
		for _, g := range wt.Groups {
			by = append(by, "group "+g)
		}
		who := "anyone"
		if len(by) > 0 {
			who = strings.Join(by, ", ")
		}
		l := fmt.Sprintf("approval %q by %s", wt.Step, who)
		if wt.Due != nil {
			l += ", deadline " + when(wt.Due, now)
		}
		return l + fmt.Sprintf(" (heph approve %s %s)", id, wt.Step)
	case "step":
		l := fmt.Sprintf("step %q to be resumed", wt.Step)
		if len(wt.Events) > 0 {
			l += " with " + strings.Join(wt.Events, " or ")
			l += fmt.Sprintf(" (heph resume %s %s --step %s)", id, wt.Events[0], wt.Step)
		}
		if wt.Due != nil {
			l += ", timeout " + when(wt.Due, now)
		}
		return l
	case "child":
		return fmt.Sprintf("child run %s (workflow %s)", wt.RunID, wt.Name)
	case "queue_paused":
		return "queue " + q + " is paused" + ofStep(wt)
	case "queue_limit":
		return fmt.Sprintf("queue %s is full: at most %d running%s", q, wt.Limit, ofStep(wt))
	case "concurrency_key":
		return fmt.Sprintf("concurrency key %q on queue %s: at most %d running%s", wt.Name, q, wt.Limit, ofStep(wt))
	case "rate_limit":
		return fmt.Sprintf("queue %s rate limit of %d reached, next window %s%s", q, wt.Limit, when(wt.Due, now), ofStep(wt))
	case "no_worker":
		return "no live worker for " + wt.Name + " on queue " + wt.Queue + ofStep(wt)
	case "scheduled":
		what := "a task"
		if wt.Step != "" {
			what = "step " + wt.Step
		}
		return what + " due " + when(wt.Due, now) + " on queue " + wt.Queue
	}
	return wt.Kind + " " + wt.Name
}
