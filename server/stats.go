package server

import (
	"net/http"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// Stats are the figures of the overview (GET /stats).
type Stats struct {
	Since         time.Time     `json:"since"`
	Until         time.Time     `json:"until"`
	Bucket        duration      `json:"bucket"`
	BucketSeconds float64       `json:"bucket_seconds"`
	Workflow      string        `json:"workflow,omitempty"`
	StaleAfter    duration      `json:"stale_after"`
	Buckets       []StatsBucket `json:"buckets"`
	// Totals sums the buckets.
	Totals  StatsCounts    `json:"totals"`
	Latency StatsLatency   `json:"latency"`
	Active  map[string]int `json:"active"`
	Blocked StatsRuns      `json:"blocked"`
	Stale   StatsRuns      `json:"stale"`
}

// StatsCounts counts the runs started (created) and finished.
type StatsCounts struct {
	Started   int `json:"started"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// StatsBucket is one bucket of the window.
type StatsBucket struct {
	Start time.Time `json:"start"`
	StatsCounts
}

// StatsLatency gives the percentiles of the time from creation to
// completion of the runs completed in the window, over Sampled of them.
type StatsLatency struct {
	Count      int     `json:"count"`
	Sampled    int     `json:"sampled"`
	P50Seconds float64 `json:"p50_seconds"`
	P90Seconds float64 `json:"p90_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// StatsRuns is a count of runs and the first of them.
type StatsRuns struct {
	Count int         `json:"count"`
	Runs  []*StatsRun `json:"runs"`
}

// StatsRun is a run as the overview lists it.
type StatsRun struct {
	ID        string        `json:"id"`
	Kind      string        `json:"kind"`
	Workflow  string        `json:"workflow"`
	Status    string        `json:"status"`
	Condition *RunCondition `json:"condition,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// maxStatsDuration bounds the durations of the parameters of GET /stats.
const maxStatsDuration = 100 * 366 * 24 * time.Hour

func (s *Server) stats(c *call) error {
	q := c.query()
	o := &hephaestus.StatsOptions{
		Since: q.time("since"), Until: q.time("until"), Flow: q.str("workflow"),
		Bucket: q.dur("bucket", maxStatsDuration), StaleAfter: q.dur("stale_after", maxStatsDuration),
	}
	if err := q.err(); err != nil {
		return err
	}
	if o.Until.IsZero() {
		o.Until = s.cfg.Clock.Now()
	}
	if o.Since.IsZero() {
		o.Since = o.Until.Add(-time.Hour)
	}
	switch w := o.Until.Sub(o.Since); {
	case w <= 0:
		q.fail("since", "%s is not before until (%s)", o.Since.Format(time.RFC3339Nano), o.Until.Format(time.RFC3339Nano))
	case o.Bucket > 0 && o.Bucket%time.Microsecond != 0:
		q.fail("bucket", "%s is not a whole number of microseconds", o.Bucket)
	case o.Bucket > 0 && (w+o.Bucket-1)/o.Bucket > hephaestus.MaxStatsBuckets:
		q.fail("bucket", "%s divides the window of %s into %d buckets, more than %d", o.Bucket, w, (w+o.Bucket-1)/o.Bucket, hephaestus.MaxStatsBuckets)
	}
	if err := q.err(); err != nil {
		return err
	}
	st, err := s.cfg.Client.Stats(c.ctx(), o)
	if err != nil {
		return err
	}
	out := &Stats{
		Since: st.Since.UTC(), Until: st.Until.UTC(), Bucket: duration(st.Bucket), BucketSeconds: st.Bucket.Seconds(),
		Workflow: o.Flow, StaleAfter: duration(st.StaleAfter), Buckets: make([]StatsBucket, 0, len(st.Buckets)),
		Latency: StatsLatency{Count: st.Latency.Count, Sampled: st.Latency.Sampled, P50Seconds: st.Latency.P50.Seconds(),
			P90Seconds: st.Latency.P90.Seconds(), P99Seconds: st.Latency.P99.Seconds()},
		Active:  map[string]int{},
		Blocked: statsRuns(st.Blocked), Stale: statsRuns(st.Stale),
	}
	for _, b := range st.Buckets {
		n := StatsCounts{Started: b.Started, Completed: b.Completed, Failed: b.Failed, Cancelled: b.Cancelled}
		out.Buckets = append(out.Buckets, StatsBucket{Start: b.Start.UTC(), StatsCounts: n})
		out.Totals.Started += n.Started
		out.Totals.Completed += n.Completed
		out.Totals.Failed += n.Failed
		out.Totals.Cancelled += n.Cancelled
	}
	for k, v := range st.Active {
		out.Active[string(k)] = v
	}
	return c.json(http.StatusOK, out)
}

func statsRuns(s hephaestus.RunSample) StatsRuns {
	out := StatsRuns{Count: s.Count, Runs: make([]*StatsRun, 0, len(s.Runs))}
	for _, r := range s.Runs {
		sr := &StatsRun{ID: r.ID, Kind: string(r.Kind), Workflow: r.Flow, Status: string(r.Status), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
		if !r.Condition.IsZero() {
			sr.Condition = &RunCondition{Kind: r.Condition.Code, Reason: r.Condition.Message, Since: r.Condition.Since.UTC()}
		}
		out.Runs = append(out.Runs, sr)
	}
	return out
}
