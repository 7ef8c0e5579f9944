package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Limits of RunStats, the same on every backend.
const (
	// MaxStatsBuckets bounds the buckets of a window.
	MaxStatsBuckets = 500
	// MaxLatencySample bounds the runs whose latency the percentiles are
	// computed over: the most recently finished of those completed in the
	// window.
	MaxLatencySample = 10000
	// MaxStatsRuns bounds the blocked and the stale runs listed.
	MaxStatsRuns = 20
)

// RunStatsParams asks for the figures of an overview.
type RunStatsParams struct {
	// Since and Until are the window [Since, Until). Required; Since is
	// before Until.
	Since, Until time.Time
	// Bucket is the width of a bucket, positive; the window has
	// ceil((Until-Since)/Bucket) buckets (the last may end after Until
	// and counts up to Until only), at most MaxStatsBuckets.
	Bucket time.Duration
	// Workflow keeps the runs of one workflow ("": all).
	Workflow string
	// StaleAfter is how long an active run goes without an update before
	// it is stale: one not updated since Until-StaleAfter. Positive.
	StaleAfter time.Duration
}

// Check validates the parameters: its errors wrap
// hephtype.ErrInvalidInput and name the field.
func (p *RunStatsParams) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", hephtype.ErrInvalidInput, fmt.Sprintf(format, args...))
	}
	switch {
	case p.Since.IsZero() || p.Until.IsZero():
		return bad("Since and Until are required")
	case !p.Since.Before(p.Until):
		return bad("Since (%s) is not before Until (%s)", p.Since.Format(time.RFC3339Nano), p.Until.Format(time.RFC3339Nano))
	case p.Bucket < time.Microsecond || p.Bucket%time.Microsecond != 0:
		return bad("Bucket must be a positive whole number of microseconds, got %s", p.Bucket)
	case p.StaleAfter <= 0:
		return bad("StaleAfter must be positive, got %s", p.StaleAfter)
	}
	if n := p.Buckets(); n > MaxStatsBuckets {
		return bad("Bucket %s divides the window of %s into %d buckets, more than %d", p.Bucket, p.Until.Sub(p.Since), n, MaxStatsBuckets)
	}
	return nil
}

// Buckets is the number of buckets of the window (valid parameters).
func (p *RunStatsParams) Buckets() int {
	w := p.Until.Truncate(time.Microsecond).Sub(p.Since.Truncate(time.Microsecond))
	return int((w + p.Bucket - 1) / p.Bucket)
}

// BucketOf returns the index of the bucket that holds t: backends compute
// it as (t - Since) / Bucket in whole microseconds, rounded down.
func (p *RunStatsParams) BucketOf(t time.Time) int {
	return int((t.UnixMicro() - p.Since.UnixMicro()) / p.Bucket.Microseconds())
}

// RunStats are the figures of an overview. Buckets and Latency count the
// runs of the window; Active, Blocked and Stale describe the active runs
// as they are (whatever the window).
type RunStats struct {
	// Buckets has one entry per bucket of the window, in order.
	Buckets []StatsBucket
	// Latency is that of the runs completed in the window (finished_at -
	// created_at).
	Latency Latency
	// Active counts the active runs by status: every one of pending,
	// running and waiting is present.
	Active map[hephtype.RunStatus]int
	// Blocked are the active runs with a Condition; Stale those not
	// updated since Until-StaleAfter. Both list the least recently
	// updated first (then by id), at most MaxStatsRuns.
	Blocked, Stale RunSample
}

// StatsBucket counts the runs of one bucket: Started by their creation
// time, the others by the time they finished.
type StatsBucket struct {
	Start                                 time.Time
	Started, Completed, Failed, Cancelled int
}

// Latency gives percentiles of durations by the nearest-rank method over
// Sampled of Count runs (the most recently finished, at most
// MaxLatencySample). They are zero when Count is.
type Latency struct {
	Count, Sampled int
	P50, P90, P99  time.Duration
}

// RunSample is a count of runs and the first of them.
type RunSample struct {
	Count int
	Runs  []*Run
}

// NewRunStats returns the figures of p with every bucket and status in
// place and zero: backends fill them in.
func NewRunStats(p *RunStatsParams) *RunStats {
	st := &RunStats{Buckets: make([]StatsBucket, p.Buckets()), Active: map[hephtype.RunStatus]int{}}
	since := p.Since.Truncate(time.Microsecond).UTC()
	for i := range st.Buckets {
		st.Buckets[i].Start = since.Add(time.Duration(i) * p.Bucket)
	}
	for _, s := range ActiveStatuses() {
		st.Active[s] = 0
	}
	return st
}

// AddStarted counts c runs created in bucket b (one outside the window
// is ignored).
func (st *RunStats) AddStarted(b, c int64) {
	if b >= 0 && b < int64(len(st.Buckets)) {
		st.Buckets[b].Started = int(c)
	}
}

// AddFinished counts c runs that finished in bucket b with a status (one
// outside the window is ignored), and returns how many of them completed:
// what the latency's Count adds up.
func (st *RunStats) AddFinished(b int64, status hephtype.RunStatus, c int64) (completed int) {
	if b < 0 || b >= int64(len(st.Buckets)) {
		return 0
	}
	switch status {
	case hephtype.StatusCompleted:
		st.Buckets[b].Completed = int(c)
		return int(c)
	case hephtype.StatusFailed:
		st.Buckets[b].Failed = int(c)
	case hephtype.StatusCancelled:
		st.Buckets[b].Cancelled = int(c)
	}
	return 0
}

// ActiveStatuses are the statuses of a run that has not finished.
func ActiveStatuses() []hephtype.RunStatus {
	return []hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusRunning, hephtype.StatusWaiting}
}

// OnlyActive reports whether statuses is not empty and holds active
// statuses only: the runs a listing of them keeps are all in the
// backends' index of the active runs (runs_active), which it then reads
// instead of every run.
func OnlyActive(statuses []hephtype.RunStatus) bool {
	for _, s := range statuses {
		if !slices.Contains(ActiveStatuses(), s) {
			return false
		}
	}
	return len(statuses) > 0
}

// LatencyOf computes the percentiles of durations (in any order; sorted in
// place) of count runs.
func LatencyOf(count int, durations []time.Duration) Latency {
	l := Latency{Count: count, Sampled: len(durations)}
	if len(durations) == 0 {
		return l
	}
	slices.Sort(durations)
	rank := func(pct int) time.Duration {
		// Nearest rank: the smallest value with at least pct% of the
		// sample at or below it.
		i := (pct*len(durations) + 99) / 100
		return durations[max(i, 1)-1]
	}
	l.P50, l.P90, l.P99 = rank(50), rank(90), rank(99)
	return l
}
