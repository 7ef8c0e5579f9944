package schedule_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/internal/schedule"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

var t0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// hookStore runs beforeDue once, before the next DueSchedules reads: it
// stands for what other processes commit while the loop is between
// reading its clock and reading the schedules.
type hookStore struct {
	store.Store
	mu        sync.Mutex
	beforeDue func()
}

func (h *hookStore) DueSchedules(ctx context.Context, p *store.DueSchedulesParams) ([]*store.Schedule, error) {
	h.mu.Lock()
	f := h.beforeDue
	h.beforeDue = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return h.Store.DueSchedules(ctx, p)
}

type fixture struct {
	t     *testing.T
	fc    *clock.Fake
	st    *hookStore
	svc   *schedule.Service
	mu    sync.Mutex
	start []string // the run ids the service started
}

// newFixture is a service on a SQLite file with a minutely schedule "p"
// (allow all, the default catch-up: the latest missed tick) created at
// 09:00.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	db, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	f := &fixture{t: t, fc: clock.NewFake(t0), st: &hookStore{Store: db}}
	f.svc = schedule.New(&schedule.Config{
		Store: f.st, Clock: f.fc,
		Start: func(_ context.Context, _ *store.Schedule, _ time.Time, runID string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.start = append(f.start, runID)
			return nil
		},
		Active: func(context.Context, string) (bool, error) { return false, nil },
		Cancel: func(context.Context, string) error { return nil },
	})
	sc := &store.Schedule{ID: "p", TargetKind: store.TargetFlow, TargetName: "tick", Cron: "* * * * *",
		Overlap: store.OverlapAllow, CatchUpTicks: 1, Since: t0}
	spec, err := schedule.Spec(sc)
	if err != nil {
		t.Fatal(err)
	}
	sc.NextFire = schedule.NextFire(spec, sc)
	if _, err := db.CreateSchedule(ctx, &store.CreateScheduleParams{Schedule: sc, Now: t0}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) get() *store.Schedule {
	f.t.Helper()
	s, err := f.st.GetSchedule(f.t.Context(), "p")
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// setPaused pauses or resumes "p" as the client does: a compare-and-set
// on the version it read.
func (f *fixture) setPaused(paused bool) {
	f.t.Helper()
	n := f.get()
	n.Paused = paused
	if _, err := f.st.UpdateSchedule(f.t.Context(), &store.UpdateScheduleParams{Schedule: n, Now: f.fc.Now()}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) tick() {
	f.t.Helper()
	if _, err := f.svc.Tick(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
}

// log is the tick log, oldest first, as "15:04 outcome".
func (f *fixture) log() string {
	f.t.Helper()
	ticks, err := f.st.ScheduleTicks(f.t.Context(), &store.ScheduleTicksParams{ID: "p", Limit: 100})
	if err != nil {
		f.t.Fatal(err)
	}
	slices.Reverse(ticks)
	var out []string
	for _, tk := range ticks {
		out = append(out, fmt.Sprintf("%s %s", tk.Tick.Format("15:04"), tk.Outcome))
	}
	return strings.Join(out, ", ")
}

func (f *fixture) started() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.start)
}

// check compares the log and the runs started with the ticks that ran.
func (f *fixture) check(when string, ticks ...time.Time) {
	f.t.Helper()
	var log, runs []string
	for _, tk := range ticks {
		log = append(log, tk.Format("15:04")+" started")
		runs = append(runs, schedule.RunID("p", tk))
	}
	if got, want := f.log(), strings.Join(log, ", "); got != want {
		f.t.Errorf("%s: log %q, want %q", when, got, want)
	}
	if got := f.started(); !slices.Equal(got, runs) {
		f.t.Errorf("%s: started %v, want %v", when, got, runs)
	}
}

// The loop reads its clock (09:03, the schedule paused), then the
// schedule is resumed at 09:04:30, then the loop reads the schedules. It
// must decide at a time read after the schedules: the resume runs the
// latest missed tick (09:04) once, not 09:03 as if it were on time and
// 09:04 after it.
func TestTickDecidesAfterItsRead(t *testing.T) {
	f := newFixture(t)
	f.fc.Advance(time.Minute)
	f.tick()
	f.check("09:01", t0.Add(time.Minute))
	f.setPaused(true)
	f.fc.Advance(2 * time.Minute)
	f.tick()
	f.check("paused at 09:03", t0.Add(time.Minute))
	f.st.mu.Lock()
	f.st.beforeDue = func() {
		f.fc.Advance(90 * time.Second)
		f.setPaused(false)
	}
	f.st.mu.Unlock()
	f.tick() // reads the clock at 09:03, the schedules after the resume
	f.tick() // 09:04:30
	f.check("resumed at 09:04:30", t0.Add(time.Minute), t0.Add(4*time.Minute))
	f.fc.Advance(30 * time.Second)
	f.tick()
	f.check("09:05", t0.Add(time.Minute), t0.Add(4*time.Minute), t0.Add(5*time.Minute))
}

// The loop holds a read of the schedule from before a pause: the pause
// wins, whenever the loop acts on its read.
func TestFireStaleReadLosesToPause(t *testing.T) {
	f := newFixture(t)
	f.fc.Advance(time.Minute)
	f.tick()
	stale := f.get()
	f.setPaused(true)
	f.fc.Advance(2 * time.Minute)
	if _, err := f.svc.Fire(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	f.check("paused", t0.Add(time.Minute))
	if s := f.get(); !s.Paused || !s.PendingTick.IsZero() || !s.LastTick.Equal(t0.Add(time.Minute)) {
		t.Errorf("after a stale Fire: paused %v, pending %v, last tick %v", s.Paused, s.PendingTick, s.LastTick)
	}
	// Resumed since the read: the latest missed tick runs, once.
	f.fc.Advance(90 * time.Second)
	f.setPaused(false)
	if _, err := f.svc.Fire(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	f.tick()
	f.check("resumed", t0.Add(time.Minute), t0.Add(4*time.Minute))
}
