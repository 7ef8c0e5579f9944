package cli

import (
	"testing"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func TestRunStatusScheduled(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		due  *time.Time
		want string
	}{
		{nil, "pending"},
		{at(-time.Second), "scheduled (due now)"},
		{at(0), "scheduled (due now)"},
		{at(45 * time.Second), "scheduled (in 45s)"},
		{at(12*time.Minute + 59*time.Second), "scheduled (in 12m)"},
		{at(23*time.Hour + 59*time.Minute), "scheduled (in 23h)"},
		{at(47 * time.Hour), "scheduled (in 47h)"},
		{at(50 * time.Hour), "scheduled (in 2d)"},
	} {
		if got := runStatus(&apiclient.Run{Status: "pending", ScheduledFor: tc.due}, now); got != tc.want {
			t.Errorf("due %v: %q, want %q", tc.due, got, tc.want)
		}
	}
}
