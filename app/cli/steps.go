package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// printSteps prints a run's steps table: per step its status, attempts,
// first start, end, duration, last worker and (on one line, cut short)
// error; with attempts, each step's attempts follow it, indented.
func printSteps(w io.Writer, steps []apiclient.Step, attempts bool, now time.Time) error {
	if len(steps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w, "STEP", "STATUS", "ATTEMPTS", "STARTED", "FINISHED", "DURATION", "WORKER", "ERROR")
	for _, s := range steps {
		dur := s.DurationMS
		if dur == nil && s.StartedAt != nil && s.FinishedAt == nil { // so far
			ms := now.Sub(*s.StartedAt).Milliseconds()
			dur = &ms
		}
		row(tw, s.Name, s.Status, s.Attempts, s.StartedAt, s.FinishedAt, stepDuration(dur), s.Worker, oneLine(s.Error, 60))
		if !attempts {
			continue
		}
		for _, a := range s.AttemptDetails {
			var dur *int64
			if a.DurationMS != nil {
				dur = a.DurationMS
			} else if a.StartedAt != nil && a.FinishedAt == nil {
				ms := now.Sub(*a.StartedAt).Milliseconds()
				dur = &ms
			}
			started := a.StartedAt
			if started == nil && a.Outcome == "queued" {
				started = a.ReadyAt
			}
			label := "  #" + strconv.Itoa(a.Number)
			if a.Reexecution {
				label += " (re-executed)"
			}
			row(tw, label, a.Outcome, "", started, a.FinishedAt, stepDuration(dur), a.Worker, oneLine(a.Error, 60))
		}
	}
	return tw.Flush()
}

// stepDuration formats a duration in milliseconds ("-" for none).
func stepDuration(ms *int64) string {
	if ms == nil {
		return "-"
	}
	d := time.Duration(*ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// oneLine is s on one line, cut to n runes.
func oneLine(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}
