package hephaestus_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
)

// Stats over runs started and cancelled at known times of the fake clock:
// the default window is the last hour in minutes, and the new list
// filters select by id and version.
func TestClientStatsAndListFilters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	start := time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	c := docClient(t, filepath.Join(t.TempDir(), "stats.db"), clk)
	b := flow.New("job")
	flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in, nil })
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, d := range []time.Duration{0, 0, 10 * time.Minute} {
		clk.Advance(d)
		r, err := c.StartRun(ctx, "job", i, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	clk.Advance(5 * time.Minute)
	if err := c.CancelRun(ctx, ids[0], "enough"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Minute)

	st, err := c.Stats(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Since.Equal(start.Add(-30*time.Minute)) || !st.Until.Equal(start.Add(30*time.Minute)) || st.Bucket != time.Minute || len(st.Buckets) != 60 {
		t.Fatalf("window %v to %v by %v, %d buckets; want the last hour by the minute", st.Since, st.Until, st.Bucket, len(st.Buckets))
	}
	want := map[int]heph.StatsBucket{
		30: {Start: start, Started: 2},
		40: {Start: start.Add(10 * time.Minute), Started: 1},
		45: {Start: start.Add(15 * time.Minute), Cancelled: 1},
	}
	for i, got := range st.Buckets {
		w, ok := want[i]
		if !ok {
			w = heph.StatsBucket{Start: start.Add(time.Duration(i-30) * time.Minute)}
		}
		if !got.Start.Equal(w.Start) || got.Started != w.Started || got.Completed != w.Completed || got.Failed != w.Failed || got.Cancelled != w.Cancelled {
			t.Fatalf("bucket %d = %+v, want %+v", i, got, w)
		}
	}
	if st.Active[heph.StatusRunning] != 2 || st.Active[heph.StatusPending] != 0 || st.Latency.Count != 0 || st.Stale.Count != 0 || st.Blocked.Count != 0 {
		t.Fatalf("active %v, latency %+v, stale %+v, blocked %+v", st.Active, st.Latency, st.Stale, st.Blocked)
	}

	// Stale after 10 minutes: the runs not updated since 20 minutes past.
	st, err = c.Stats(ctx, &heph.StatsOptions{StaleAfter: 10 * time.Minute, Flow: "job"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Stale.Count != 2 || len(st.Stale.Runs) != 2 || st.Stale.Runs[0].ID != ids[1] || st.Stale.Runs[1].ID != ids[2] ||
		st.Stale.Runs[0].Flow != "job" || st.Stale.Runs[0].Status != heph.StatusRunning {
		t.Fatalf("stale = %+v", st.Stale)
	}
	st, err = c.Stats(ctx, &heph.StatsOptions{Flow: "other"})
	if err != nil || st.Active[heph.StatusRunning] != 0 {
		t.Fatalf("stats of another flow: %+v, %v", st, err)
	}
	if _, err := c.Stats(ctx, &heph.StatsOptions{Bucket: time.Second}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Fatalf("3600 buckets: error %v, want ErrInvalidInput", err)
	}

	l, err := c.ListRuns(ctx, &heph.ListOptions{IDs: []string{ids[2], ids[0], "nope"}})
	if err != nil || len(l.Runs) != 2 || l.Runs[0].ID != ids[2] || l.Runs[1].ID != ids[0] || l.Runs[0].ParentID != "" {
		t.Fatalf("list by ids = %+v, %v", l, err)
	}
	if l, err := c.ListRuns(ctx, &heph.ListOptions{Version: 2}); err != nil || len(l.Runs) != 0 {
		t.Fatalf("list of version 2 = %+v, %v; want none", l, err)
	}
	if l, err := c.ListRuns(ctx, &heph.ListOptions{Version: 1, Parent: ""}); err != nil || len(l.Runs) != 3 {
		t.Fatalf("list of version 1 = %+v, %v; want 3", l, err)
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	if _, err := c.ListRuns(ctx, &heph.ListOptions{IDs: many}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Fatalf("1001 ids: error %v, want ErrInvalidInput", err)
	}
}
