package hephaestus

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Limits of Stats.
const (
	// MaxStatsBuckets bounds the buckets of a Stats window.
	MaxStatsBuckets = store.MaxStatsBuckets
	// MaxLatencySample bounds the runs the latency percentiles are
	// computed over: the most recently finished of those completed in the
	// window.
	MaxLatencySample = store.MaxLatencySample
	// MaxStatsRuns bounds the blocked and the stale runs Stats lists.
	MaxStatsRuns = store.MaxStatsRuns
)

// StatsOptions choose the window and the runs of Stats; zero fields take
// their defaults.
type StatsOptions struct {
	// Since and Until are the window [Since, Until). Until defaults to
	// now, Since to an hour before Until.
	Since, Until time.Time
	// Bucket is the width of a bucket: at least a microsecond, and at
	// most MaxStatsBuckets of them in the window (ErrInvalidInput
	// otherwise). Defaults to a whole number of seconds (or minutes,
	// hours) that gives about 60 buckets.
	Bucket time.Duration
	// Flow keeps the runs of one flow, document, job kind or workflow
	// ("": all).
	Flow string
	// StaleAfter is how long an active run goes without progress (an
	// update of the run) before Stats counts it stale. Defaults to an
	// hour.
	StaleAfter time.Duration
}

// Stats are the figures of an overview: throughput, failures and latency
// over a window, and the active runs that need a look.
type Stats struct {
	// Since, Until, Bucket and StaleAfter are those asked for, defaults
	// applied.
	Since, Until       time.Time
	Bucket, StaleAfter time.Duration
	// Buckets has one entry per bucket of the window, in order; the last
	// may extend past Until and counts up to Until only.
	Buckets []StatsBucket
	// Latency is that of the runs completed in the window (from creation
	// to completion).
	Latency Latency
	// Active counts the active runs by status (pending, running and
	// waiting are always present), whatever the window.
	Active map[RunStatus]int
	// Blocked are the active runs with a Condition; Stale those not
	// updated since Until-StaleAfter. Each lists the least recently
	// updated first, at most MaxStatsRuns.
	Blocked, Stale RunSample
}

// StatsBucket counts the runs of one bucket that started (were created)
// in it, and those that completed, failed or were cancelled in it.
type StatsBucket struct {
	Start                                 time.Time
	Started, Completed, Failed, Cancelled int
}

// Latency gives percentiles (nearest rank) of durations over Sampled of
// Count runs: the most recently finished, at most MaxLatencySample. They
// are zero when Count is.
type Latency struct {
	Count, Sampled int
	P50, P90, P99  time.Duration
}

// RunSample counts runs and lists the first of them.
type RunSample struct {
	Count int
	Runs  []*StatsRun
}

// StatsRun is a run as Stats lists it.
type StatsRun struct {
	ID   string
	Flow string
	// Kind is flow, workflow, document or job (RunKindOf).
	Kind      RunKind
	Status    RunStatus
	Condition Condition
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Stats computes the figures of an overview of the store's runs.
func (c *Client) Stats(ctx context.Context, opts *StatsOptions) (*Stats, error) {
	var o StatsOptions
	if opts != nil {
		o = *opts
	}
	if o.Until.IsZero() {
		o.Until = c.cfg.Clock.Now()
	}
	if o.Since.IsZero() {
		o.Since = o.Until.Add(-time.Hour)
	}
	if o.Bucket == 0 && o.Since.Before(o.Until) {
		o.Bucket = defaultBucket(o.Until.Sub(o.Since))
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = time.Hour
	}
	p := &store.RunStatsParams{Since: o.Since.UTC(), Until: o.Until.UTC(), Bucket: o.Bucket, Workflow: o.Flow, StaleAfter: o.StaleAfter}
	st, err := c.cfg.Store.RunStats(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	out := &Stats{Since: p.Since.Truncate(time.Microsecond), Until: p.Until.Truncate(time.Microsecond), Bucket: p.Bucket, StaleAfter: p.StaleAfter,
		Latency: Latency(st.Latency), Active: st.Active,
		Blocked: RunSample{Count: st.Blocked.Count}, Stale: RunSample{Count: st.Stale.Count}}
	out.Buckets = make([]StatsBucket, len(st.Buckets))
	for i, b := range st.Buckets {
		out.Buckets[i] = StatsBucket(b)
	}
	for _, r := range st.Blocked.Runs {
		out.Blocked.Runs = append(out.Blocked.Runs, statsRun(r))
	}
	for _, r := range st.Stale.Runs {
		out.Stale.Runs = append(out.Stale.Runs, statsRun(r))
	}
	return out, nil
}

func statsRun(r *store.Run) *StatsRun {
	return &StatsRun{ID: r.ID, Flow: r.Workflow, Kind: RunKindOf(r.Kind, r.Metadata), Status: r.Status, Condition: r.Condition, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// defaultBucket is the bucket width Stats picks for a window: the
// smallest of 1, 2, 5, 10, 15 or 30 seconds or minutes, 1, 2, 3, 6 or 12
// hours, or a whole number of days, that divides it into at most 60
// buckets.
func defaultBucket(window time.Duration) time.Duration {
	steps := []time.Duration{
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	}
	for _, s := range steps {
		if (window+s-1)/s <= 60 {
			return s
		}
	}
	day := 24 * time.Hour
	return (window/60 + day - 1) / day * day
}
