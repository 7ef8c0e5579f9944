package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// RunSchedules runs the schedule suite on b: every test drives the
// schedule loops with a fake clock and waits for the effect in the store.
func RunSchedules(t *testing.T, b Backend) {
	runAll(t, b, []subtest{
		{"ExactlyOncePerTick", testScheduleExactlyOnce},
		{"LostAdvance", testScheduleLostAdvance},
		{"LostCommitAnswer", testScheduleLostCommitAnswer},
		{"OverlapSkip", func(t *testing.T, b Backend) { testOverlap(t, b, heph.OverlapSkip) }},
		{"OverlapBufferOne", func(t *testing.T, b Backend) { testOverlap(t, b, heph.OverlapBufferOne) }},
		{"OverlapAllowAll", func(t *testing.T, b Backend) { testOverlap(t, b, heph.OverlapAllowAll) }},
		{"OverlapCancelPrevious", func(t *testing.T, b Backend) { testOverlap(t, b, heph.OverlapCancelPrevious) }},
		{"CatchUp", testCatchUp},
		{"PauseResume", testPauseResume},
		{"Backfill", testBackfill},
		{"DST", testScheduleDST},
		{"CRUD", testScheduleCRUD},
		{"Targets", testScheduleTargets},
		{"Declared", testScheduleDeclared},
		{"DeclaredInDocument", testScheduleInDocument},
		{"DeclaredOnDefinitions", testScheduleOnDefinitions},
	})
}

// schedT0 is the fake clock's start: a whole minute.
var schedT0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// pureScheduled is a workflow that completes in its first activation.
var pureScheduled = workflow.New("pure-scheduled", func(ctx workflow.Context, in string) (string, error) { return "done " + in, nil })

// tickFlow is a one-step flow that completes at once.
func tickFlow(name string) *flow.Flow {
	b := flow.New(name)
	flow.Step(b, "do", func(ctx context.Context, in any) (string, error) { return "done", nil })
	return b.MustBuild()
}

// schedClient is a started client on st with the fake clock fc. Its
// leases last a day of fake time: the tests advance the clock by minutes
// while a step runs (the overlap tests' gate), and a lease that the jump
// carried past its end would be lost before its heartbeat, the step
// stopped and retried at a fake time that never comes.
func schedClient(t *testing.T, st store.Store, fc *clock.Fake, flows ...*flow.Flow) *heph.Client {
	t.Helper()
	return startClient(t, st, func(c *heph.Config) { c.Clock, c.LeaseDuration = fc, 24*time.Hour }, flows...)
}

// waitTick waits until the schedule has handled tick (its LastTick is at
// or after it and no tick is pending).
func waitTick(t *testing.T, c *heph.Client, st store.Store, id string, tick time.Time) {
	t.Helper()
	ctx := ctxT(t)
	for {
		s, err := st.GetSchedule(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !s.LastTick.Before(tick) && s.PendingTick.IsZero() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("schedule %s: tick %v not handled (last %v, pending %v)", id, tick, s.LastTick, s.PendingTick)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// scheduleRuns lists the runs a schedule started, by id.
func scheduleRuns(t *testing.T, st store.Store, id string) []*store.Run {
	t.Helper()
	runs, err := listAllRuns(ctxT(t), st)
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.Run
	for _, r := range runs {
		if strings.HasPrefix(r.ID, id+"@") {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *store.Run) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func tickLog(t *testing.T, c *heph.Client, id string) []*heph.ScheduleRun {
	t.Helper()
	log, err := c.ScheduleRuns(ctxT(t), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(log)
	return log
}

func describeLog(log []*heph.ScheduleRun) string {
	var b []string
	for _, e := range log {
		b = append(b, fmt.Sprintf("%s %s", e.Tick.UTC().Format("15:04"), e.Outcome))
	}
	return strings.Join(b, ", ")
}

func mustCreate(t *testing.T, c *heph.Client, s *heph.Schedule) *heph.Schedule {
	t.Helper()
	out, err := c.CreateSchedule(ctxT(t), s)
	if err != nil {
		t.Fatalf("CreateSchedule: %v", err)
	}
	return out
}

// Three clients on separate stores of one database race on every tick
// of a minutely schedule: each tick starts exactly one run, logged once.
func testScheduleExactlyOnce(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fc := clock.NewFake(schedT0)
	f := tickFlow("tick")
	clients := []*heph.Client{schedClient(t, st, fc, f), schedClient(t, reopen(t), fc, f), schedClient(t, reopen(t), fc, f)}
	mustCreate(t, clients[1], &heph.Schedule{ID: "race", Target: heph.TargetFlow, TargetName: "tick", Cron: "* * * * *", Overlap: heph.OverlapAllowAll})
	const ticks = 12
	for i := 1; i <= ticks; i++ {
		fc.Advance(time.Minute)
		waitTick(t, clients[0], st, "race", schedT0.Add(time.Duration(i)*time.Minute))
	}
	runs := scheduleRuns(t, st, "race")
	log := tickLog(t, clients[2], "race")
	if len(runs) != ticks || len(log) != ticks {
		t.Fatalf("%d runs and %d log entries for %d ticks: %s", len(runs), len(log), ticks, describeLog(log))
	}
	for i, e := range log {
		want := schedT0.Add(time.Duration(i+1) * time.Minute)
		if !e.Tick.Equal(want) || e.Outcome != "started" || e.RunID != runs[i].ID {
			t.Errorf("log entry %d: %+v, want tick %v started by %s", i, e, want, runs[i].ID)
		}
	}
}

// schedFaultStore fails the first UpdateSchedule that records a started tick:
// before it commits (the advance is lost), or after (the answer is lost).
// Before: the process dies there, so every later UpdateSchedule fails
// too; else its loop, woken by the run's end, would record the tick
// before the test stops it.
type schedFaultStore struct {
	store.Store
	after  bool
	failed chan struct{}
	once   sync.Once
	fired  atomic.Bool
}

var errSchedInjected = errors.New("injected: connection lost")

func (f *schedFaultStore) UpdateSchedule(ctx context.Context, p *store.UpdateScheduleParams) (*store.Schedule, error) {
	started := false
	for _, tk := range p.Ticks {
		started = started || tk.Outcome == store.TickStarted
	}
	if f.fired.Load() && !f.after {
		return nil, errSchedInjected
	}
	if !started || f.fired.Load() {
		return f.Store.UpdateSchedule(ctx, p)
	}
	f.fired.Store(true)
	defer f.once.Do(func() { close(f.failed) })
	if f.after {
		if _, err := f.Store.UpdateSchedule(ctx, p); err != nil {
			return nil, err
		}
	}
	return nil, errSchedInjected
}

// The process that created a tick's run dies before it records the tick
// and advances the schedule: the next process finds the create refused
// (the run id is the tick's), records the tick and advances. One run.
func testScheduleLostAdvance(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fc := clock.NewFake(schedT0)
	f := tickFlow("tick")
	fs := &schedFaultStore{Store: reopen(t), failed: make(chan struct{})}
	a := schedClient(t, fs, fc, f)
	// Allow all: the second tick must start whether or not the first
	// tick's run (left by the process that died) has ended by then.
	mustCreate(t, a, &heph.Schedule{ID: "lost", Target: heph.TargetFlow, TargetName: "tick", Cron: "* * * * *", Overlap: heph.OverlapAllowAll})
	fc.Advance(time.Minute)
	select {
	case <-fs.failed:
	case <-ctxT(t).Done():
		t.Fatal("the advance was never tried")
	}
	stopClient(a) // the process dies
	s, err := st.GetSchedule(ctxT(t), "lost")
	if err != nil {
		t.Fatal(err)
	}
	if s.PendingTick.IsZero() || len(scheduleRuns(t, st, "lost")) != 1 {
		t.Fatalf("after the failed advance: pending %v, runs %d; want the tick pending and its run created", s.PendingTick, len(scheduleRuns(t, st, "lost")))
	}
	c := schedClient(t, st, fc, f) // the next process
	waitTick(t, c, st, "lost", schedT0.Add(time.Minute))
	fc.Advance(time.Minute)
	waitTick(t, c, st, "lost", schedT0.Add(2*time.Minute))
	runs := scheduleRuns(t, st, "lost")
	log := tickLog(t, c, "lost")
	if len(runs) != 2 || len(log) != 2 || log[0].RunID != runs[0].ID || log[1].RunID != runs[1].ID {
		t.Fatalf("runs %d, log %s; want two ticks, one run each", len(runs), describeLog(log))
	}
}

// The advance commits but its answer is lost: the same process reads the
// schedule again (its next compare-and-set is refused) and goes on.
func testScheduleLostCommitAnswer(t *testing.T, b Backend) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	f := tickFlow("tick")
	fs := &schedFaultStore{Store: st, after: true, failed: make(chan struct{})}
	c := schedClient(t, fs, fc, f)
	mustCreate(t, c, &heph.Schedule{ID: "answer", Target: heph.TargetFlow, TargetName: "tick", Cron: "* * * * *", Overlap: heph.OverlapAllowAll})
	for i := 1; i <= 3; i++ {
		fc.Advance(time.Minute)
		waitTick(t, c, st, "answer", schedT0.Add(time.Duration(i)*time.Minute))
	}
	runs := scheduleRuns(t, st, "answer")
	log := tickLog(t, c, "answer")
	if len(runs) != 3 || len(log) != 3 {
		t.Fatalf("runs %d, log %s; want three ticks, one run each", len(runs), describeLog(log))
	}
}

// gateFlow's step waits until released (or cancelled).
func gateFlow(name string, release <-chan struct{}) *flow.Flow {
	b := flow.New(name)
	flow.Step(b, "wait", func(ctx context.Context, in any) (string, error) {
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	return b.MustBuild()
}

// Each overlap policy with the previous run still running at the next
// ticks.
func testOverlap(t *testing.T, b Backend, policy heph.OverlapPolicy) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	release := make(chan struct{})
	c := schedClient(t, st, fc, gateFlow("gate", release))
	mustCreate(t, c, &heph.Schedule{ID: "o", Target: heph.TargetFlow, TargetName: "gate", Cron: "* * * * *", Overlap: policy})
	e := &env{t: t, c: c, st: st}
	step := func(i int) {
		fc.Advance(time.Minute)
		waitTick(t, c, st, "o", schedT0.Add(time.Duration(i)*time.Minute))
	}
	step(1)
	first := scheduleRuns(t, st, "o")[0].ID
	e.waitStatus(first, hephtype.StatusRunning)
	step(2)
	step(3)
	log := describeLog(tickLog(t, c, "o"))
	want := map[heph.OverlapPolicy]string{
		heph.OverlapSkip:           "09:01 started, 09:02 skipped, 09:03 skipped",
		heph.OverlapBufferOne:      "09:01 started, 09:02 buffered, 09:03 skipped",
		heph.OverlapAllowAll:       "09:01 started, 09:02 started, 09:03 started",
		heph.OverlapCancelPrevious: "09:01 started, 09:02 started, 09:03 started",
	}[policy]
	if log != want {
		t.Fatalf("log %s, want %s", log, want)
	}
	runs := scheduleRuns(t, st, "o")
	switch policy {
	case heph.OverlapCancelPrevious:
		e.waitStatus(runs[0].ID, hephtype.StatusCancelled)
		e.waitStatus(runs[1].ID, hephtype.StatusCancelled)
		e.waitStatus(runs[2].ID, hephtype.StatusRunning)
	case heph.OverlapBufferOne:
		close(release)
		e.waitStatus(first, hephtype.StatusCompleted)
		// The run's end wakes the loop: the buffered tick starts.
		waitBuffered(t, st, "o")
		log = describeLog(tickLog(t, c, "o"))
		if want := "09:01 started, 09:02 started, 09:03 skipped"; log != want {
			t.Fatalf("after the first run ended: log %s, want %s", log, want)
		}
		e.waitStatus(scheduleRuns(t, st, "o")[1].ID, hephtype.StatusCompleted)
		return
	case heph.OverlapAllowAll:
		if len(runs) != 3 {
			t.Fatalf("%d runs, want 3", len(runs))
		}
	default:
		if len(runs) != 1 {
			t.Fatalf("%d runs, want 1", len(runs))
		}
	}
	close(release)
}

func waitBuffered(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := ctxT(t)
	for {
		s, err := st.GetSchedule(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if s.BufferedTick.IsZero() && s.PendingTick.IsZero() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("schedule %s: the buffered tick never started", id)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Downtime: no loop runs for five and a half hours of an hourly
// schedule; then a process starts. Default: the latest missed tick runs
// once; none; three ticks; a window of two hours.
func testCatchUp(t *testing.T, b Backend) {
	for _, tc := range []struct {
		name    string
		catchUp *heph.CatchUp
		want    string
	}{
		{"default", nil, "14:00 started"},
		{"none", &heph.CatchUp{}, ""},
		{"three", &heph.CatchUp{Ticks: 3}, "12:00 started, 13:00 started, 14:00 started"},
		{"within 2h", &heph.CatchUp{Within: 2 * time.Hour}, "13:00 started, 14:00 started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := b.New(t)
			fc := clock.NewFake(schedT0)
			f := tickFlow("tick")
			down, err := heph.New(&heph.Config{Store: st, Clock: fc, Logger: QuietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			mustCreate(t, down, &heph.Schedule{ID: "c", Target: heph.TargetFlow, TargetName: "tick", Cron: "@hourly", CatchUp: tc.catchUp,
				Overlap: heph.OverlapAllowAll})
			fc.Advance(5*time.Hour + 30*time.Minute)
			c := schedClient(t, st, fc, f)
			waitTick(t, c, st, "c", schedT0.Add(5*time.Hour))
			if log := describeLog(tickLog(t, c, "c")); log != tc.want {
				t.Errorf("log %q, want %q", log, tc.want)
			}
			next, err := c.NextFireTimes(ctxT(t), "c", 2)
			if err != nil || len(next) != 2 || !next[0].Equal(schedT0.Add(6*time.Hour)) || !next[1].Equal(schedT0.Add(7*time.Hour)) {
				t.Errorf("next fire times %v, %v", next, err)
			}
		})
	}
}

// While paused, no tick fires; on resume the catch-up rule applies (the
// latest missed tick runs once), then ticks go on.
func testPauseResume(t *testing.T, b Backend) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	c := schedClient(t, st, fc, tickFlow("tick"))
	mustCreate(t, c, &heph.Schedule{ID: "p", Target: heph.TargetFlow, TargetName: "tick", Cron: "@every 1m", Overlap: heph.OverlapAllowAll})
	ctx := ctxT(t)
	fc.Advance(time.Minute)
	waitTick(t, c, st, "p", schedT0.Add(time.Minute))
	if err := c.PauseSchedule(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		fc.Advance(time.Minute)
		if _, err := c.TickSchedules(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if log := describeLog(tickLog(t, c, "p")); log != "09:01 started" {
		t.Fatalf("while paused: log %s", log)
	}
	if s, _ := c.GetSchedule(ctx, "p"); !s.Paused {
		t.Fatal("GetSchedule: not paused")
	}
	fc.Advance(30 * time.Second)
	if err := c.ResumeSchedule(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	waitTick(t, c, st, "p", schedT0.Add(4*time.Minute))
	fc.Advance(30 * time.Second)
	waitTick(t, c, st, "p", schedT0.Add(5*time.Minute))
	if log := describeLog(tickLog(t, c, "p")); log != "09:01 started, 09:04 started, 09:05 started" {
		t.Fatalf("after resume: log %s", log)
	}
}

// Backfill starts every tick of a range, once however often it is
// called.
func testBackfill(t *testing.T, b Backend) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	c := schedClient(t, st, fc, tickFlow("tick"))
	mustCreate(t, c, &heph.Schedule{ID: "bf", Target: heph.TargetFlow, TargetName: "tick", Cron: "0 */6 * * *", Paused: true})
	ctx := ctxT(t)
	from, to := schedT0.Add(-24*time.Hour), schedT0.Add(-time.Hour)
	ids, err := c.BackfillSchedule(ctx, "bf", from, to)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.BackfillSchedule(ctx, "bf", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 4 || !slices.Equal(ids, again) {
		t.Fatalf("backfill ids %v, again %v; want the 4 ticks 12:00, 18:00, 00:00, 06:00", ids, again)
	}
	if runs := scheduleRuns(t, st, "bf"); len(runs) != 4 {
		t.Fatalf("%d runs, want 4", len(runs))
	}
	if log := describeLog(tickLog(t, c, "bf")); log != "12:00 started, 18:00 started, 00:00 started, 06:00 started" {
		t.Fatalf("log %s", log)
	}
	if _, err := c.BackfillSchedule(ctx, "bf", to, from); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("backfill of a reversed range: %v", err)
	}
}

// DST end to end: a daily 02:30 in New York on the night clocks spring
// forward runs once at 03:00; a daily 01:30 in Berlin... (both zones'
// rules are in the pure core's tests; here the loop fires them).
func testScheduleDST(t *testing.T, b Backend) {
	for _, tc := range []struct {
		zone, cron string
		from       time.Time // UTC
		want       []string  // ticks in UTC over two days
	}{
		{"America/New_York", "30 2 * * *", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC),
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"America/New_York", "30 1 * * *", time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC),
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"Europe/Berlin", "30 2 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC),
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Europe/Berlin", "30 2 * * *", time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC),
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	} {
		t.Run(tc.zone+" "+tc.from.Format("Jan"), func(t *testing.T) {
			st, _ := b.New(t)
			fc := clock.NewFake(tc.from)
			c := schedClient(t, st, fc, tickFlow("tick"))
			mustCreate(t, c, &heph.Schedule{ID: "dst", Target: heph.TargetFlow, TargetName: "tick", Cron: tc.cron, TimeZone: tc.zone,
				Overlap: heph.OverlapAllowAll, CatchUp: &heph.CatchUp{}})
			// Step through two days a quarter hour at a time: every tick is
			// handled on time.
			for range 2 * 24 * 4 {
				fc.Advance(15 * time.Minute)
				if _, err := c.TickSchedules(ctxT(t)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, e := range tickLog(t, c, "dst") {
				got = append(got, e.Tick.UTC().Format(time.RFC3339)+" "+e.Outcome)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, w+" started")
			}
			if !slices.Equal(got, want) {
				t.Errorf("ticks %v, want %v", got, want)
			}
		})
	}
}

// Create, read, list, update, validation, next fire times, delete.
func testScheduleCRUD(t *testing.T, b Backend) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	c := schedClient(t, st, fc, tickFlow("tick"))
	ctx := ctxT(t)
	s := mustCreate(t, c, &heph.Schedule{ID: "crud", Target: heph.TargetFlow, TargetName: "tick", Cron: "0 9 * * MON-FRI",
		TimeZone: "Europe/Berlin", Jitter: time.Minute, Input: map[string]int{"n": 1}})
	if s.Version != 1 || s.Overlap != heph.OverlapSkip || s.CatchUp.Ticks != 1 || normJSON(s.Input.(json.RawMessage)) != `{"n":1}` {
		t.Errorf("created %+v", s)
	}
	if _, err := c.CreateSchedule(ctx, &heph.Schedule{ID: "crud", Target: heph.TargetFlow, TargetName: "tick", Every: time.Hour}); !errors.Is(err, heph.ErrScheduleExists) {
		t.Errorf("second create: %v", err)
	}
	next, err := c.NextFireTimes(ctx, "crud", 3)
	if err != nil || len(next) != 3 {
		t.Fatalf("NextFireTimes: %v, %v", next, err)
	}
	for i, day := range []int{8, 9, 10} {
		tick := time.Date(2030, 1, day, 8, 0, 0, 0, time.UTC) // 09:00 CET
		if next[i].Before(tick) || !next[i].Before(tick.Add(time.Minute)) {
			t.Errorf("fire time %d: %v, want within a minute after %v", i, next[i], tick)
		}
	}
	for field, bad := range map[string]*heph.Schedule{
		"cron minute field": {ID: "b", Target: heph.TargetFlow, TargetName: "tick", Cron: "77 * * * *"},
		"time_zone":         {ID: "b", Target: heph.TargetFlow, TargetName: "tick", Cron: "@daily", TimeZone: "Nowhere/Town"},
		"overlap":           {ID: "b", Target: heph.TargetFlow, TargetName: "tick", Cron: "@daily", Overlap: "sometimes"},
		"target kind":       {ID: "b", Target: "cronjob", TargetName: "tick", Cron: "@daily"},
		"every":             {ID: "b", Target: heph.TargetFlow, TargetName: "tick", Every: time.Millisecond},
		"jitter":            {ID: "b", Target: heph.TargetFlow, TargetName: "tick", Every: time.Hour, Jitter: -time.Second},
		"catch_up":          {ID: "b", Target: heph.TargetFlow, TargetName: "tick", Every: time.Hour, CatchUp: &heph.CatchUp{Ticks: -1}},
		"id":                {Target: heph.TargetFlow, TargetName: "tick", Every: time.Hour},
	} {
		_, err := c.CreateSchedule(ctx, bad)
		if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), field) {
			t.Errorf("bad %s: %v", field, err)
		}
	}
	s.Cron, s.TimeZone, s.Overlap = "*/10 * * * *", "", heph.OverlapAllowAll
	up, err := c.UpdateSchedule(ctx, s)
	if err != nil || up.Version != 2 || !up.NextFire.Before(schedT0.Add(11*time.Minute)) {
		t.Fatalf("UpdateSchedule: %+v, %v", up, err)
	}
	if _, err := c.UpdateSchedule(ctx, &heph.Schedule{ID: "nope", Target: heph.TargetFlow, TargetName: "tick", Every: time.Hour}); !errors.Is(err, heph.ErrScheduleNotFound) {
		t.Errorf("update of a missing schedule: %v", err)
	}
	list, err := c.ListSchedules(ctx, "", 0)
	if err != nil || len(list) != 1 || list[0].ID != "crud" {
		t.Errorf("ListSchedules: %v, %v", list, err)
	}
	if err := c.DeleteSchedule(ctx, "crud"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSchedule(ctx, "crud"); !errors.Is(err, heph.ErrScheduleNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if _, err := c.ScheduleRuns(ctx, "crud", 5); !errors.Is(err, heph.ErrScheduleNotFound) {
		t.Errorf("runs after delete: %v", err)
	}
}

// Workflow and job targets, a target that is not registered (the tick is
// logged as failed), a trigger and the last runs with their status.
func testScheduleTargets(t *testing.T, b Backend) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	// A job kind K is a one-step flow named K.
	c := schedClient(t, st, fc, tickFlow("send-report"))
	if err := c.RegisterWorkflows(pureScheduled); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	mustCreate(t, c, &heph.Schedule{ID: "job", Target: heph.TargetJob, TargetName: "send-report", Every: time.Minute, Input: map[string]string{"to": "ops"}})
	mustCreate(t, c, &heph.Schedule{ID: "wf", Target: heph.TargetWorkflow, TargetName: "pure-scheduled", Every: time.Minute, Input: "x"})
	mustCreate(t, c, &heph.Schedule{ID: "missing", Target: heph.TargetFlow, TargetName: "nothing", Every: time.Minute})
	fc.Advance(time.Minute)
	for _, id := range []string{"job", "wf", "missing"} {
		waitTick(t, c, st, id, schedT0.Add(time.Minute))
	}
	e := &env{t: t, c: c, st: st}
	for _, id := range []string{"job", "wf"} {
		runs := scheduleRuns(t, st, id)
		if len(runs) != 1 {
			t.Fatalf("%s: %d runs", id, len(runs))
		}
		e.waitStatus(runs[0].ID, hephtype.StatusCompleted)
		log, err := c.ScheduleRuns(ctx, id, 5)
		if err != nil || len(log) != 1 || log[0].Status != hephtype.StatusCompleted || log[0].RunID != runs[0].ID {
			t.Errorf("%s: ScheduleRuns %+v, %v", id, log, err)
		}
	}
	if r := scheduleRuns(t, st, "job")[0]; normJSON(r.Input) != `{"to":"ops"}` {
		t.Errorf("job input %s", r.Input)
	}
	log, err := c.ScheduleRuns(ctx, "missing", 5)
	if err != nil || len(log) != 1 || log[0].Outcome != "failed" || !strings.Contains(log[0].Error, "nothing") {
		t.Errorf("missing target: %+v, %v", log, err)
	}
	r, err := c.TriggerSchedule(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, hephtype.StatusCompleted)
	if !strings.HasPrefix(r.ID, "job@trigger-") {
		t.Errorf("triggered run id %s", r.ID)
	}
}

// Schedules declared in code are created at Start; a pause made at run
// time survives a redeploy that changes the definition.
func testScheduleDeclared(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fc := clock.NewFake(schedT0)
	ctx := ctxT(t)
	declare := func(cron string) *heph.Client {
		c, err := heph.New(&heph.Config{Store: reopen(t), Clock: fc, Logger: QuietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.DeclareSchedules(&heph.Schedule{ID: "decl", Target: heph.TargetFlow, TargetName: "tick", Cron: cron}); err != nil {
			t.Fatal(err)
		}
		if err := c.Register(tickFlow("tick")); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1 := declare("@hourly")
	s, err := st.GetSchedule(ctx, "decl")
	if err != nil || !s.Declared || s.Cron != "@hourly" {
		t.Fatalf("declared schedule %+v, %v", s, err)
	}
	if err := c1.PauseSchedule(ctx, "decl"); err != nil {
		t.Fatal(err)
	}
	stopClient(c1)
	c2 := declare("@daily")
	defer stopClient(c2)
	s, err = st.GetSchedule(ctx, "decl")
	if err != nil || !s.Paused || s.Cron != "@daily" {
		t.Fatalf("after a redeploy: %+v, %v", s, err)
	}
	if err := c2.DeclareSchedules(&heph.Schedule{ID: "decl", Target: heph.TargetFlow, TargetName: "tick", Cron: "bad"}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("declaring a bad schedule: %v", err)
	}
}

// A document's "schedules" list is declared when RegisterDocuments runs,
// with the document (its latest version) as target.
func testScheduleInDocument(t *testing.T, b Backend) {
	const doc = `
name: doc-sched
schedules:
  - {id: doc-hourly, cron: "0 * * * *", input: {user: ann}}
steps:
  greet: {action: get_greeting, args: {user: "{{input.user}}"}, done: true}
`
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	ctx := ctxT(t)
	tools := newDocTools(t)
	c, err := heph.New(&heph.Config{Store: st, Clock: fc, Queues: map[string]int{"default": 4}, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDocument(ctx, "doc-sched", heph.DocumentYAML, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctx, tools.reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c) })
	s, err := c.GetSchedule(ctx, "doc-hourly")
	if err != nil || s.Target != heph.TargetDocument || s.TargetName != "doc-sched" || !s.Declared {
		t.Fatalf("the document's schedule: %+v, %v", s, err)
	}
	fc.Advance(time.Hour)
	waitTick(t, c, st, "doc-hourly", schedT0.Add(time.Hour))
	runs := scheduleRuns(t, st, "doc-hourly")
	if len(runs) != 1 {
		t.Fatalf("%d runs after one tick, want 1", len(runs))
	}
	r, err := c.WaitRun(ctx, runs[0].ID)
	if err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("the scheduled document run: %+v, %v", r, err)
	}
	if ref, ok := r.Document(); !ok || ref.Name != "doc-sched" {
		t.Errorf("the run is not pinned to the document: %+v", ref)
	}
}

// Schedules declared on a flow and on a workflow are created when they
// are registered and fire on the fake clock; bad ones are refused where
// they are declared.
func testScheduleOnDefinitions(t *testing.T, b Backend) {
	st, _ := b.New(t)
	fc := clock.NewFake(schedT0)
	ctx := ctxT(t)
	fb := flow.New("sched-flow")
	flow.Step(fb, "do", func(ctx context.Context, in map[string]string) (string, error) { return "hello " + in["who"], nil })
	f := fb.Schedule(flow.Schedule{ID: "flow-hourly", Cron: "@hourly", Input: map[string]string{"who": "flow"}}).MustBuild()
	wf := workflow.New("sched-wf", func(ctx workflow.Context, in string) (string, error) { return "hello " + in, nil }).
		Schedule(workflow.Schedule{ID: "wf-every-30m", Every: 30 * time.Minute, Input: "wf", Overlap: "allow_all"})
	c, err := heph.New(&heph.Config{Store: st, Clock: fc, Queues: map[string]int{"default": 4}, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(f); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c) })
	for id, want := range map[string]heph.TargetKind{"flow-hourly": heph.TargetFlow, "wf-every-30m": heph.TargetWorkflow} {
		s, err := c.GetSchedule(ctx, id)
		if err != nil || s.Target != want || !s.Declared {
			t.Fatalf("schedule %s: %+v, %v; want a declared %s schedule", id, s, err, want)
		}
	}
	fc.Advance(time.Hour)
	waitTick(t, c, st, "flow-hourly", schedT0.Add(time.Hour))
	waitTick(t, c, st, "wf-every-30m", schedT0.Add(time.Hour))
	for id, out := range map[string]string{"flow-hourly": "hello flow", "wf-every-30m": "hello wf"} {
		runs := scheduleRuns(t, st, id)
		if len(runs) != 1 {
			t.Fatalf("schedule %s started %d runs, want 1 (the latest missed tick)", id, len(runs))
		}
		r, err := c.WaitRun(ctx, runs[0].ID)
		if err != nil || r.Status != heph.StatusCompleted || !strings.Contains(string(r.Output), out) {
			t.Fatalf("run of %s: %+v, %v; want completed with %q", id, r, err, out)
		}
	}

	// Bad declarations are refused where they are made.
	bb := flow.New("bad-sched").Schedule(flow.Schedule{ID: "x", Cron: "61 * * * *"})
	flow.Step(bb, "do", func(ctx context.Context, in any) (string, error) { return "", nil })
	_, err = bb.Build()
	if err == nil || !strings.Contains(err.Error(), "minute") {
		t.Errorf("Build with a bad cron: %v; want an error naming the minute field", err)
	}
	bad := workflow.New("bad-sched-wf", func(ctx workflow.Context, in string) (string, error) { return in, nil }).
		Schedule(workflow.Schedule{ID: "y", Every: 30 * time.Minute, Overlap: "sometimes"})
	if err := c.RegisterWorkflows(bad); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("RegisterWorkflows with a bad overlap: %v; want ErrInvalidInput", err)
	}
}
