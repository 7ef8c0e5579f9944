package dashboard

import (
	"time"
)

// The run page's steps table shows what each step did (the API's step
// times, attempts and errors): these format its cells.

// StepDur formats a duration in milliseconds; "" for none.
func (d *runData) StepDur(ms *int64) string {
	if ms == nil {
		return ""
	}
	return fmtDur(time.Duration(*ms) * time.Millisecond)
}

// StepTime formats a step's or attempt's time; "" for none.
func (d *runData) StepTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

// SoFar is how long a step that started and has not ended has run, up to
// the page's now.
func (d *runData) SoFar(start *time.Time) string {
	if start == nil || d.now.Before(*start) {
		return ""
	}
	return fmtDur(d.now.Sub(*start)) + " so far"
}
