package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newStats(g *globals) *cobra.Command {
	var (
		since, until, workflow string
		bucket, staleAfter     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show the overview: runs started and finished, failures, latency, blocked and stale runs",
		Long: "stats shows, for a window (by default the last hour), the runs started and those that\n" +
			"completed, failed or were cancelled in each bucket of it (the table leaves empty\n" +
			"buckets out), the latency percentiles of the completed runs, the active runs by\n" +
			"status, and the blocked runs (with a condition) and stale ones (not updated for\n" +
			"--stale-after before the window's end), up to 20 of each.",
		Example: `  heph stats
  heph stats --since 24h --bucket 1h --workflow order
  heph stats --since 2031-03-04 --until 2031-03-05 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			q := &apiclient.StatsQuery{Workflow: workflow, Bucket: bucket, StaleAfter: staleAfter}
			for _, f := range []struct {
				flag, v string
				to      *time.Time
			}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
				t, err := parseTime(f.flag, f.v, now)
				if err != nil {
					return err
				}
				if t != nil {
					*f.to = *t
				}
			}
			if bucket < 0 || staleAfter < 0 {
				return usagef("--bucket and --stale-after must not be negative")
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Stats, *apiclient.Response, error) {
				return api.Stats(ctx, q)
			}, printStats)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "start of the window: RFC 3339, a date, or a duration ago (24h); default an hour before --until")
	fl.StringVar(&until, "until", "", "end of the window: RFC 3339, a date, or a duration ago; default now")
	fl.DurationVar(&bucket, "bucket", 0, "bucket width (at most 500 buckets); default a round width giving about 60")
	fl.StringVar(&workflow, "workflow", "", "runs of this flow, workflow, document or job kind")
	fl.DurationVar(&staleAfter, "stale-after", 0, "an active run not updated for this long is stale (default 1h)")
	return cmd
}

func printStats(w io.Writer, st *apiclient.Stats) error {
	secs := func(s float64) string {
		return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
	}
	t := st.Totals
	err := kv(w,
		"window", fmt.Sprintf("%s to %s by %s", st.Since.Format(time.RFC3339), st.Until.Format(time.RFC3339), time.Duration(st.Bucket)),
		"runs", fmt.Sprintf("started %d, completed %d, failed %d, cancelled %d", t.Started, t.Completed, t.Failed, t.Cancelled),
		"latency", fmt.Sprintf("p50 %s, p90 %s, p99 %s (over %d of %d completed)", secs(st.Latency.P50Seconds), secs(st.Latency.P90Seconds),
			secs(st.Latency.P99Seconds), st.Latency.Sampled, st.Latency.Count),
		"active", fmt.Sprintf("pending %d, running %d, waiting %d", st.Active["pending"], st.Active["running"], st.Active["waiting"]),
		"blocked", st.Blocked.Count,
		"stale", st.Stale.Count)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := newTable(w, "BUCKET", "STARTED", "COMPLETED", "FAILED", "CANCELLED")
	for _, b := range st.Buckets {
		if b.Started+b.Completed+b.Failed+b.Cancelled > 0 {
			row(tw, b.Start, b.Started, b.Completed, b.Failed, b.Cancelled)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, list := range []struct {
		name string
		runs []*apiclient.StatsRun
	}{{"BLOCKED", st.Blocked.Runs}, {"STALE", st.Stale.Runs}} {
		if len(list.runs) == 0 {
			continue
		}
		fmt.Fprintln(w)
		tw := newTable(w, list.name, "WORKFLOW", "STATUS", "UPDATED", "CONDITION", "REASON")
		for _, r := range list.runs {
			cond, reason := "", ""
			if r.Condition != nil {
				cond, reason = r.Condition.Kind, truncate(r.Condition.Reason, 60)
			}
			row(tw, r.ID, r.Workflow, r.Status, r.UpdatedAt, cond, reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
