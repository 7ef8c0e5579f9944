package maintenance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/maintenance"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// Prune deletes the runs that finished more than Retention before the
// clock's time, however they finished, and keeps active runs and the runs
// that finished since.
func TestPruneDeletesRunsFinishedBeforeRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// At t0: finished runs of each terminal status, one finished by an
	// update, and active runs (pending, running, waiting) with work left.
	e.create(
		newRun("old-completed", hephtype.StatusCompleted),
		newRun("old-failed", hephtype.StatusFailed),
		newRun("old-cancelled", hephtype.StatusCancelled),
		newRun("old-continued", hephtype.StatusContinued),
		newRun("ended", hephtype.StatusRunning),
		newRun("pending", hephtype.StatusPending, stepTask("q", "a", "")),
		newRun("running", hephtype.StatusRunning, stepTask("q", "a", "")),
		newRun("waiting", hephtype.StatusWaiting),
	)
	e.update("ended", &store.Update{Status: hephtype.StatusCompleted})
	// At t0+30m: a run that finishes then.
	e.clk.Advance(30 * time.Minute)
	e.create(newRun("recent", hephtype.StatusCompleted))

	s := e.service(func(c *maintenance.Config) { c.Retention = time.Hour })
	// At t0+80m the cutoff is t0+20m: the runs of t0 go, "recent" stays.
	e.clk.Advance(50 * time.Minute)
	n, err := s.Prune(ctx)
	if err != nil || n != 5 {
		t.Fatalf("Prune at t0+80m = %d, %v; want 5 runs deleted", n, err)
	}
	for _, id := range []string{"old-completed", "old-failed", "old-cancelled", "old-continued", "ended"} {
		if e.exists(id) {
			t.Errorf("run %s, finished at t0, was kept by the prune at t0+80m", id)
		}
	}
	for _, id := range []string{"recent", "pending", "running", "waiting"} {
		if !e.exists(id) {
			t.Errorf("run %s was deleted by the prune at t0+80m", id)
		}
	}
	if n, err := s.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("second Prune at t0+80m = %d, %v; want 0", n, err)
	}
	// At t0+100m the cutoff is t0+40m: "recent" (finished at t0+30m) goes.
	e.clk.Advance(20 * time.Minute)
	if n, err := s.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("Prune at t0+100m = %d, %v; want 1", n, err)
	}
	if e.exists("recent") {
		t.Errorf("run recent, finished at t0+30m, was kept by the prune at t0+100m")
	}
	// Active runs stay however old they are.
	e.clk.Advance(1000 * time.Hour)
	if n, err := s.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("Prune far in the future = %d, %v; want 0", n, err)
	}
	for _, id := range []string{"pending", "running", "waiting"} {
		if !e.exists(id) {
			t.Errorf("active run %s was deleted", id)
		}
	}
}

// Prune deletes every eligible run, even more than one store call's limit
// (1000), and counts them all.
func TestPruneDeletesMoreThanOneBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const total = 1234
	runs := make([]*store.NewRun, total)
	for i := range runs {
		runs[i] = newRun(fmt.Sprintf("r%04d", i), hephtype.StatusCompleted)
	}
	e.create(runs...)
	e.create(newRun("active", hephtype.StatusRunning))
	e.clk.Advance(2 * time.Hour)
	s := e.service(func(c *maintenance.Config) { c.Retention = time.Hour })
	n, err := s.Prune(context.Background())
	if err != nil || n != total {
		t.Fatalf("Prune = %d, %v; want %d", n, err, total)
	}
	page, err := e.st.ListRuns(context.Background(), &store.ListRunsParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 || page.Runs[0].ID != "active" {
		t.Fatalf("runs left after Prune: %d (first %v), want only the active one", len(page.Runs), page.Runs[0].ID)
	}
}

// Without a positive Retention, Prune deletes nothing.
func TestPruneWithoutRetentionDeletesNothing(t *testing.T) {
	t.Parallel()
	for _, retention := range []time.Duration{0, -time.Hour} {
		t.Run(retention.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.create(newRun("done", hephtype.StatusCompleted))
			e.clk.Advance(1000 * time.Hour)
			s := e.service(func(c *maintenance.Config) { c.Retention = retention })
			n, err := s.Prune(context.Background())
			if err != nil || n != 0 {
				t.Fatalf("Prune with Retention %v = %d, %v; want 0, nil", retention, n, err)
			}
			if !e.exists("done") {
				t.Fatal("Prune with no retention deleted a run")
			}
		})
	}
}

// After Start, the retention loop prunes at once, then every
// RetentionInterval, and reports each sweep that deleted runs with a
// RetentionSwept event carrying the count.
func TestRetentionLoopSweepsAndReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(newRun("a", hephtype.StatusCompleted), newRun("b", hephtype.StatusFailed), newRun("active", hephtype.StatusRunning))
	e.clk.Advance(2 * time.Hour)
	s := e.service(func(c *maintenance.Config) {
		c.Retention = time.Hour
		c.RetentionInterval = 10 * time.Minute
	})
	s.Start(context.Background())
	// Two loops (registry and retention) asleep: the first sweep is done.
	e.waitAsleep(2)
	evs := e.eventsOf(telemetry.RetentionSwept, "")
	if len(evs) != 1 || evs[0].Count != 2 {
		t.Fatalf("RetentionSwept events after the first sweep: %+v, want one with Count 2", evs)
	}
	if !evs[0].Time.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("the first sweep's event is stamped %v, want the clock's %v", evs[0].Time, t0.Add(2*time.Hour))
	}
	if e.exists("a") || e.exists("b") || !e.exists("active") {
		t.Fatalf("after the first sweep: a %v, b %v, active %v; want only active", e.exists("a"), e.exists("b"), e.exists("active"))
	}

	// A run that finishes now is swept by the first sweep more than an
	// hour later: the seventh, 70 minutes on. The sweeps between delete
	// nothing and report nothing.
	finished := e.clk.Now()
	e.create(newRun("c", hephtype.StatusCompleted))
	for i := 1; i <= 6; i++ {
		e.step(10*time.Minute, 2)
		if !e.exists("c") {
			t.Fatalf("run c, finished at %v, was deleted at %v, within the retention", finished, e.clk.Now())
		}
		if n := len(e.eventsOf(telemetry.RetentionSwept, "")); n != 1 {
			t.Fatalf("%d RetentionSwept events after sweeps that deleted nothing, want 1", n)
		}
	}
	e.step(10*time.Minute, 2)
	if e.exists("c") {
		t.Fatalf("run c, finished at %v, was kept by the sweep at %v", finished, e.clk.Now())
	}
	evs = e.eventsOf(telemetry.RetentionSwept, "")
	if len(evs) != 2 || evs[1].Count != 1 || !evs[1].Time.Equal(e.clk.Now()) {
		t.Fatalf("RetentionSwept events: %+v, want a second one with Count 1 at %v", evs, e.clk.Now())
	}
	if !e.exists("active") {
		t.Fatal("the retention loop deleted an active run")
	}
	s.Stop()
	if msgs := e.log.unexpected(); len(msgs) > 0 {
		t.Errorf("unexpected warnings or errors logged: %q", msgs)
	}
}

// RetentionInterval defaults to an hour.
func TestRetentionIntervalDefaultsToAnHour(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(newRun("a", hephtype.StatusCompleted))
	e.clk.Advance(30 * time.Minute)
	s := e.service(func(c *maintenance.Config) {
		c.Retention = time.Hour
		c.LeaseDuration = 10 * time.Hour // the registry loop sleeps throughout
	})
	s.Start(context.Background())
	e.waitAsleep(2) // first sweep at t0+30m: nothing to delete
	e.clk.Advance(59 * time.Minute)
	// Nothing is due before t0+90m: no loop woke, so nothing ran.
	if n := e.clk.Waiters(); n != 2 {
		t.Fatalf("%d goroutines wait on the clock 59 minutes after the first sweep, want 2 (a loop woke early)", n)
	}
	if !e.exists("a") || len(e.eventsOf(telemetry.RetentionSwept, "")) != 0 {
		t.Fatal("a sweep ran before RetentionInterval (defaulting to an hour) passed")
	}
	e.step(time.Minute, 2) // t0+90m: the second sweep, cutoff t0+30m
	if e.exists("a") {
		t.Fatal("the sweep an hour after the first did not run (or did not delete the run finished 90 minutes ago)")
	}
	if evs := e.eventsOf(telemetry.RetentionSwept, ""); len(evs) != 1 || evs[0].Count != 1 {
		t.Fatalf("RetentionSwept events: %+v, want one with Count 1", evs)
	}
}
