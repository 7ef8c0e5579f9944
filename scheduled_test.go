package hephaestus_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/job"
)

// A job inserted to run later has ScheduledFor, its due time, in GetRun
// and ListRuns, and ListOptions.Scheduled lists it, until the time comes;
// a run whose task is ready has none.
func TestRunScheduledFor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	start := time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	c := docClient(t, filepath.Join(t.TempDir(), "scheduled.db"), clk)
	type note struct{ Text string }
	kind := job.MustNew("note", func(ctx context.Context, j *job.Job[note]) error { return nil }, nil)
	b := flow.New("now")
	flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in, nil })
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterJobs(kind); err != nil {
		t.Fatal(err)
	}
	later, err := heph.InsertJob(ctx, c, kind, note{"later"}, &heph.JobOptions{RunAfter: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now, err := c.StartRun(ctx, "now", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	due := start.Add(2 * time.Hour)

	check := func(when string, want time.Time) {
		t.Helper()
		r, err := c.GetRun(ctx, later.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !r.ScheduledFor.Equal(want) {
			t.Errorf("%s: GetRun: ScheduledFor %v, want %v", when, r.ScheduledFor, want)
		}
		all, err := c.ListRuns(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all.Runs {
			w := time.Time{}
			if r.ID == later.ID {
				w = want
			}
			if !r.ScheduledFor.Equal(w) {
				t.Errorf("%s: ListRuns: run %s (%s) ScheduledFor %v, want %v", when, r.ID, r.Flow, r.ScheduledFor, w)
			}
		}
		if len(all.Runs) != 2 {
			t.Errorf("%s: ListRuns listed %d runs, want 2", when, len(all.Runs))
		}
		sched, err := c.ListRuns(ctx, &heph.ListOptions{Scheduled: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range sched.Runs {
			ids = append(ids, r.ID)
		}
		if wantIDs := map[bool]int{true: 0, false: 1}[want.IsZero()]; len(ids) != wantIDs || (wantIDs == 1 && ids[0] != later.ID) {
			t.Errorf("%s: ListOptions.Scheduled listed %v", when, ids)
		}
	}
	check("before the due time", due)
	if r, err := c.GetRun(ctx, now.ID); err != nil || !r.ScheduledFor.IsZero() {
		t.Errorf("the run ready now: %+v, %v", r, err)
	}
	clk.Advance(time.Hour)
	check("an hour before", due)
	clk.Advance(time.Hour)
	check("at the due time", time.Time{})
}
