package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func newSchedule(id string) *store.Schedule {
	return &store.Schedule{
		ID: id, TargetKind: store.TargetFlow, TargetName: "report", Cron: "*/5 * * * *", TimeZone: "Europe/Berlin",
		Jitter: 3 * time.Second, Overlap: store.OverlapSkip, CatchUpTicks: 1, Input: json.RawMessage(`{"k":1}`),
		Since: at(0), NextFire: at(5 * time.Minute), Anchor: at(-time.Hour),
	}
}

func (h *harness) createSchedule(s *store.Schedule, now time.Time) *store.Schedule {
	h.t.Helper()
	out, err := h.s.CreateSchedule(h.t.Context(), &store.CreateScheduleParams{Schedule: s, Now: now})
	if err != nil {
		h.t.Fatalf("CreateSchedule %s: %v", s.ID, err)
	}
	return out
}

func (h *harness) getSchedule(id string) *store.Schedule {
	h.t.Helper()
	s, err := h.s.GetSchedule(h.t.Context(), id)
	if err != nil {
		h.t.Fatalf("GetSchedule %s: %v", id, err)
	}
	return s
}

// Schedules: create, read back every field, refuse a second create and
// bad fields, list, delete.
func testSchedules(t *testing.T, h *harness) {
	ctx := t.Context()
	in := newSchedule("s1")
	created := h.createSchedule(in, at(time.Second))
	want := *in
	want.Version, want.CreatedAt, want.UpdatedAt = 1, at(time.Second), at(time.Second)
	if d := cmp.Diff(&want, created, opts); d != "" {
		t.Errorf("CreateSchedule returned (-want +got):\n%s", d)
	}
	if d := cmp.Diff(&want, h.getSchedule("s1"), opts); d != "" {
		t.Errorf("GetSchedule (-want +got):\n%s", d)
	}
	if _, err := h.s.CreateSchedule(ctx, &store.CreateScheduleParams{Schedule: newSchedule("s1"), Now: at(0)}); !errors.Is(err, store.ErrScheduleExists) {
		t.Errorf("second CreateSchedule: %v, want ErrScheduleExists", err)
	}
	if _, err := h.s.GetSchedule(ctx, "nope"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("GetSchedule of a missing id: %v", err)
	}
	for name, mut := range map[string]func(*store.Schedule){
		"empty id": func(s *store.Schedule) { s.ID = "" },
		"long id":  func(s *store.Schedule) { s.ID = string(make([]byte, store.MaxScheduleIDLength+1)) },
		"kind":     func(s *store.Schedule) { s.TargetKind = "cronjob" },
		"target":   func(s *store.Schedule) { s.TargetName = "" },
		"overlap":  func(s *store.Schedule) { s.Overlap = "sometimes" },
		"input":    func(s *store.Schedule) { s.Input = json.RawMessage("{") },
	} {
		s := newSchedule("bad")
		mut(s)
		if _, err := h.s.CreateSchedule(ctx, &store.CreateScheduleParams{Schedule: s, Now: at(0)}); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("CreateSchedule with a bad %s: %v, want ErrInvalidInput", name, err)
		}
	}
	// Zero times and empty input come back zero and empty.
	bare := &store.Schedule{ID: "s0", TargetKind: store.TargetJob, TargetName: "mail", Every: time.Hour, Overlap: store.OverlapAllow, Since: at(0)}
	h.createSchedule(bare, at(0))
	got := h.getSchedule("s0")
	if !got.NextFire.IsZero() || !got.Anchor.IsZero() || !got.LastTick.IsZero() || len(got.Input) != 0 || got.Every != time.Hour {
		t.Errorf("bare schedule read back as %+v", got)
	}
	for i := range 3 {
		h.createSchedule(newSchedule(fmt.Sprint("s", i+2)), at(0))
	}
	list, err := h.s.ListSchedules(ctx, &store.ListSchedulesParams{Limit: 2})
	if err != nil || len(list) != 2 || list[0].ID != "s0" || list[1].ID != "s1" {
		t.Fatalf("ListSchedules limit 2: %v, %v", scheduleIDs(list), err)
	}
	list, err = h.s.ListSchedules(ctx, &store.ListSchedulesParams{After: "s1"})
	if err != nil || fmt.Sprint(scheduleIDs(list)) != "[s2 s3 s4]" {
		t.Fatalf("ListSchedules after s1: %v, %v", scheduleIDs(list), err)
	}
	if err := h.s.DeleteSchedule(ctx, "s2"); err != nil {
		t.Fatalf("DeleteSchedule: %v", err)
	}
	if err := h.s.DeleteSchedule(ctx, "s2"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("second DeleteSchedule: %v", err)
	}
	if _, err := h.s.GetSchedule(ctx, "s2"); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("GetSchedule after delete: %v", err)
	}
}

func scheduleIDs(ss []*store.Schedule) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

// UpdateSchedule is a compare-and-set on the version, and records ticks
// with it, once per (schedule, tick).
func testScheduleUpdate(t *testing.T, h *harness) {
	ctx := t.Context()
	s := h.createSchedule(newSchedule("u"), at(0))
	next := *s
	next.LastTick, next.LastRunID, next.NextFire = at(5*time.Minute), "run-1", at(10*time.Minute)
	next.PendingTick, next.PendingRunID, next.PendingCancel = at(5*time.Minute), "run-1", "run-0"
	next.BufferedTick, next.Paused, next.Declared = at(4*time.Minute), true, true
	tick := store.ScheduleTick{Tick: at(5 * time.Minute), Outcome: store.TickStarted, RunID: "run-1"}
	got, err := h.s.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: &next, Ticks: []store.ScheduleTick{tick}, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("UpdateSchedule: %v", err)
	}
	want := next
	want.Version, want.UpdatedAt = 2, at(time.Hour)
	if d := cmp.Diff(&want, got, opts); d != "" {
		t.Errorf("UpdateSchedule returned (-want +got):\n%s", d)
	}
	if d := cmp.Diff(&want, h.getSchedule("u"), opts); d != "" {
		t.Errorf("GetSchedule after update (-want +got):\n%s", d)
	}
	// The same version again: a conflict, and nothing changes (not even
	// the ticks of the refused update).
	stale := next
	stale.LastRunID = "lost"
	lost := store.ScheduleTick{Tick: at(7 * time.Minute), Outcome: store.TickStarted, RunID: "lost"}
	if _, err := h.s.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: &stale, Ticks: []store.ScheduleTick{lost}, Now: at(2 * time.Hour)}); !errors.Is(err, store.ErrScheduleConflict) {
		t.Fatalf("stale UpdateSchedule: %v, want ErrScheduleConflict", err)
	}
	if d := cmp.Diff(&want, h.getSchedule("u"), opts); d != "" {
		t.Errorf("a refused update changed the schedule (-want +got):\n%s", d)
	}
	missing := next
	missing.ID = "gone"
	if _, err := h.s.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: &missing, Now: at(0)}); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("UpdateSchedule of a missing id: %v", err)
	}
	// A tick recorded again is overwritten (a buffered tick that starts).
	got.PendingTick, got.PendingRunID = time.Time{}, ""
	ticks := []store.ScheduleTick{
		{Tick: at(10 * time.Minute), Outcome: store.TickBuffered},
		{Tick: at(15 * time.Minute), Outcome: store.TickFailed, Error: "flow not found"},
	}
	got, err = h.s.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: got, Ticks: ticks, Now: at(3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	again := []store.ScheduleTick{{Tick: at(10 * time.Minute), Outcome: store.TickStarted, RunID: "run-2"}}
	if _, err := h.s.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: got, Ticks: again, Now: at(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	log, err := h.s.ScheduleTicks(ctx, &store.ScheduleTicksParams{ID: "u"})
	if err != nil {
		t.Fatal(err)
	}
	wantLog := []*store.ScheduleTick{
		{ScheduleID: "u", Tick: at(15 * time.Minute), Outcome: store.TickFailed, Error: "flow not found", RecordedAt: at(3 * time.Hour)},
		{ScheduleID: "u", Tick: at(10 * time.Minute), Outcome: store.TickStarted, RunID: "run-2", RecordedAt: at(4 * time.Hour)},
		{ScheduleID: "u", Tick: at(5 * time.Minute), Outcome: store.TickStarted, RunID: "run-1", RecordedAt: at(time.Hour)},
	}
	if d := cmp.Diff(wantLog, log, opts); d != "" {
		t.Errorf("ScheduleTicks (-want +got):\n%s", d)
	}
	if log, _ := h.s.ScheduleTicks(ctx, &store.ScheduleTicksParams{ID: "u", Limit: 1}); len(log) != 1 || !log[0].Tick.Equal(at(15*time.Minute)) {
		t.Errorf("ScheduleTicks limit 1: %+v", log)
	}
	if err := h.s.DeleteSchedule(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	if log, err := h.s.ScheduleTicks(ctx, &store.ScheduleTicksParams{ID: "u"}); err != nil || len(log) != 0 {
		t.Errorf("ticks after delete: %v, %v", log, err)
	}
}

// DueSchedules and NextScheduleFire see schedules that are not paused.
func testDueSchedules(t *testing.T, h *harness) {
	ctx := t.Context()
	mk := func(id string, next time.Duration, mut func(*store.Schedule)) {
		s := newSchedule(id)
		s.NextFire = at(next)
		if mut != nil {
			mut(s)
		}
		h.createSchedule(s, at(0))
	}
	if _, ok, err := h.s.NextScheduleFire(ctx); ok || err != nil {
		t.Fatalf("NextScheduleFire of none: %v, %v", ok, err)
	}
	mk("late", time.Minute, nil)
	mk("later", 2*time.Minute, nil)
	mk("future", time.Hour, nil)
	mk("paused", 0, func(s *store.Schedule) { s.Paused = true })
	mk("pending", time.Hour, func(s *store.Schedule) { s.PendingTick, s.PendingRunID = at(0), "r" })
	mk("buffered", 2*time.Hour, func(s *store.Schedule) { s.BufferedTick = at(0) })
	mk("none", 0, func(s *store.Schedule) { s.NextFire = time.Time{} })
	due, err := h.s.DueSchedules(ctx, &store.DueSchedulesParams{Now: at(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(scheduleIDs(due)); got != "[late later pending buffered]" {
		t.Errorf("DueSchedules: %s", got)
	}
	if due, _ := h.s.DueSchedules(ctx, &store.DueSchedulesParams{Now: at(2 * time.Minute), Limit: 1}); len(due) != 1 || due[0].ID != "late" {
		t.Errorf("DueSchedules limit 1: %v", scheduleIDs(due))
	}
	next, ok, err := h.s.NextScheduleFire(ctx)
	if err != nil || !ok || !next.Equal(at(time.Minute)) {
		t.Errorf("NextScheduleFire: %v, %v, %v", next, ok, err)
	}
}

// Racing compare-and-sets on one version: exactly one wins, the others
// change nothing and record no tick.
func testScheduleCAS(t *testing.T, h *harness) {
	s := h.createSchedule(newSchedule("race"), at(0))
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			next := *s
			next.LastRunID = fmt.Sprint("racer-", i)
			tick := store.ScheduleTick{Tick: at(time.Duration(i+1) * time.Minute), Outcome: store.TickStarted, RunID: next.LastRunID}
			_, errs[i] = h.s.UpdateSchedule(t.Context(), &store.UpdateScheduleParams{Schedule: &next, Ticks: []store.ScheduleTick{tick}, Now: at(time.Hour)})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("racers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrScheduleConflict):
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	got := h.getSchedule("race")
	if got.Version != 2 || got.LastRunID != fmt.Sprint("racer-", winner) {
		t.Errorf("after the race: version %d, last run %q; winner %d", got.Version, got.LastRunID, winner)
	}
	log, err := h.s.ScheduleTicks(t.Context(), &store.ScheduleTicksParams{ID: "race"})
	if err != nil || len(log) != 1 || log[0].RunID != got.LastRunID {
		t.Errorf("tick log after the race: %+v, %v", log, err)
	}
}
