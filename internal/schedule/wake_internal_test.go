package schedule

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// A finished run wakes the loop only while a buffered tick waits for one:
// otherwise the loop has nothing to do, and each finished run would cost
// it two reads of the schedules.
func TestRunFinishedWakesOnlyForABufferedTick(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	db, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	fc := clock.NewFake(t0)
	var active atomic.Bool
	svc := New(&Config{
		Store: db, Clock: fc,
		Start:  func(context.Context, *store.Schedule, time.Time, string) error { return nil },
		Active: func(context.Context, string) (bool, error) { return active.Load(), nil },
		Cancel: func(context.Context, string) error { return nil },
	})
	sc := &store.Schedule{ID: "b", TargetKind: store.TargetFlow, TargetName: "tick", Cron: "* * * * *",
		Overlap: store.OverlapBuffer, CatchUpTicks: 1, Since: t0}
	spec, err := Spec(sc)
	if err != nil {
		t.Fatal(err)
	}
	sc.NextFire = NextFire(spec, sc)
	if _, err := db.CreateSchedule(ctx, &store.CreateScheduleParams{Schedule: sc, Now: t0}); err != nil {
		t.Fatal(err)
	}
	woken := func() bool {
		select {
		case <-svc.wake:
			return true
		default:
			return false
		}
	}
	tick := func(at time.Time) {
		t.Helper()
		fc.Advance(at.Sub(fc.Now()))
		if _, err := svc.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}

	tick(t0.Add(time.Minute + time.Second)) // 09:01 starts a run
	svc.RunFinished("r-not-of-a-schedule")
	if woken() {
		t.Fatal("a finished run woke the loop with no buffered tick")
	}

	active.Store(true)
	tick(t0.Add(2*time.Minute + time.Second)) // 09:02 is buffered behind it
	if got := mustGet(t, db, "b"); got.BufferedTick.IsZero() {
		t.Fatal("the 09:02 tick was not buffered")
	}
	svc.RunFinished("r-not-of-a-schedule")
	if !woken() {
		t.Fatal("a finished run did not wake the loop while a buffered tick waits")
	}

	active.Store(false)
	tick(t0.Add(2*time.Minute + 2*time.Second)) // releases and starts it
	if got := mustGet(t, db, "b"); !got.BufferedTick.IsZero() {
		t.Fatal("the buffered tick was not released")
	}
	svc.RunFinished("r-not-of-a-schedule")
	if woken() {
		t.Fatal("a finished run woke the loop after the buffered tick was released")
	}

	// A schedule's run wakes it all the same: another process may have
	// buffered a tick behind it.
	svc.RunFinished(RunID("b", t0.Add(2*time.Minute)))
	if !woken() {
		t.Fatal("a schedule's finished run did not wake the loop")
	}
	for _, id := range []string{"order@2030", "@2030-01-07T09:02:00Z", "x@2030-01-07 09:02:00"} {
		if isTickRun(id) {
			t.Errorf("isTickRun(%q) = true", id)
		}
	}
}

func mustGet(t *testing.T, db store.Store, id string) *store.Schedule {
	t.Helper()
	s, err := db.GetSchedule(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
