// Package schedule is the runtime service of schedules (cron): a loop,
// driven by the injected clock, that fires the ticks of the schedules
// stored in the store. Every process runs it; none leads. Exactly one run
// per tick comes from the store:
//
//   - a tick's run id is derived from (schedule id, tick), and the store
//     refuses a second run with the same id (store.ErrRunExists), so a
//     tick starts at most one run, whoever starts it;
//   - what a tick does (start, skip, buffer, cancel the previous run and
//     start) is decided once: the decision is written with a
//     compare-and-set on the schedule's version (store.UpdateSchedule),
//     as a pending tick, before anything is started; a process that lost
//     the race changes nothing and reads the schedule again;
//   - a pending tick is carried out by whichever process sees it first
//     (cancel the previous run, create the run: both idempotent), then
//     cleared with another compare-and-set that records the tick in the
//     log. A process that dies between the create and the clear leaves the
//     tick pending; the next one finds the create refused, records the tick
//     and advances;
//   - a decision is made at a time read after the schedule it decides on,
//     so it never judges a newer state (a resume) at an older time; a
//     change after the read (a pause) fails the compare-and-set.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/internal/cronspec"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// Config configures a Service.
type Config struct {
	Store  store.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Telemetry receives schedule.fired and schedule.skipped, once per
	// tick, from the process whose compare-and-set recorded it.
	Telemetry *telemetry.Hub
	// PollInterval bounds the loop's sleep, so it sees schedules that
	// other processes create or change. Defaults to one minute.
	PollInterval time.Duration
	// Start starts the run of a tick with the given id; an error that
	// wraps store.ErrRunExists means it was started before.
	Start func(ctx context.Context, s *store.Schedule, tick time.Time, runID string) error
	// Permanent reports whether an error of Start will not go away by
	// trying again (the target is not registered, the input is refused):
	// the tick is then recorded as failed instead of retried.
	Permanent func(err error) bool
	// Active reports whether a run is pending, running or waiting (false
	// for a finished or unknown run).
	Active func(ctx context.Context, runID string) (bool, error)
	// Cancel cancels a run; cancelling a finished run is not an error.
	Cancel func(ctx context.Context, runID string) error
}

// RunID is the id of the run a schedule's tick starts.
func RunID(scheduleID string, tick time.Time) string {
	return scheduleID + "@" + tick.UTC().Format("2006-01-02T15:04:05Z")
}

// Service is the schedule loop.
type Service struct {
	cfg  Config
	wake chan struct{}
	// buffered: the last Tick saw a buffered tick, which waits for a run
	// to finish (RunFinished wakes the loop only then).
	buffered atomic.Bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Service; it runs nothing until Start.
func New(cfg *Config) *Service {
	c := *cfg
	if c.PollInterval <= 0 {
		c.PollInterval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Permanent == nil {
		c.Permanent = func(error) bool { return false }
	}
	if c.Telemetry == nil {
		c.Telemetry = telemetry.New(c.Clock)
	}
	return &Service{cfg: c, wake: make(chan struct{}, 1)}
}

// Start starts the loop. Calling it twice is a no-op.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop ends the loop and waits for it. Safe to call twice and before
// Start.
func (s *Service) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Wake makes the loop look at the schedules now (one changed, a run
// finished).
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RunFinished wakes the loop when a run finished in this process and a
// buffered tick may wait for it: the last Tick saw one, or the run is a
// schedule's (its id is a RunID: another process may have buffered a
// tick behind it since this one last looked). Any other finished run
// changes nothing the loop has to do, and waking it would cost two reads
// per finished run.
func (s *Service) RunFinished(runID string) {
	if s.buffered.Load() || isTickRun(runID) {
		s.Wake()
	}
}

// isTickRun reports whether id has the form of RunID.
func isTickRun(id string) bool {
	i := strings.LastIndexByte(id, '@')
	if i <= 0 {
		return false
	}
	_, err := time.Parse("2006-01-02T15:04:05Z", id[i+1:])
	return err == nil
}

func (s *Service) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		next, err := s.Tick(ctx)
		if ctx.Err() != nil {
			return
		}
		now := s.cfg.Clock.Now()
		until := now.Add(s.cfg.PollInterval)
		if err != nil {
			s.cfg.Logger.Warn("schedules: tick failed", "err", err)
		} else if !next.IsZero() && next.Before(until) {
			until = next
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-clock.Until(s.cfg.Clock, until):
		}
	}
}

// Tick handles every schedule that has work now and returns the earliest
// time one has more (zero when none is known).
func (s *Service) Tick(ctx context.Context) (time.Time, error) {
	// now only selects the schedules to look at: Fire decides at a time
	// it reads after them.
	now := s.cfg.Clock.Now()
	var errs []error
	buffered := false
	for round := 0; ; round++ {
		due, err := s.cfg.Store.DueSchedules(ctx, &store.DueSchedulesParams{Now: now, Limit: 100})
		if err != nil {
			return time.Time{}, fmt.Errorf("due schedules: %w", err)
		}
		progressed := false
		for _, sc := range due {
			p, last, err := s.fire(ctx, sc)
			if err != nil {
				errs = append(errs, err)
			}
			progressed = progressed || p
			if last != nil && !last.BufferedTick.IsZero() {
				buffered = true
			}
		}
		if len(due) < 100 || !progressed || round > 100 {
			break
		}
	}
	next, ok, err := s.cfg.Store.NextScheduleFire(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("next schedule fire: %w", err))
	}
	if !ok {
		next = time.Time{}
	}
	s.buffered.Store(buffered)
	if buffered {
		// A buffered tick waits for a run to finish: look again soon
		// (Wake does it sooner when the run finishes in this process).
		if b := now.Add(s.cfg.PollInterval / 4); next.IsZero() || b.Before(next) {
			next = b
		}
	}
	return next, errors.Join(errs...)
}

// maxSteps bounds the steps of one Fire: each step handles a tick or a
// pending start, so a catch-up of many ticks takes several Ticks.
const maxSteps = 64

// Fire handles what schedule sc has to do now, step by step, each step
// a compare-and-set. It reports whether it changed anything. A lost race
// (store.ErrScheduleConflict) reads the schedule again.
//
// Each step decides at a time read from the clock after the schedule it
// decides on was read, never at a time read before: a decision at an
// older time on a newer state would take a schedule resumed since then
// for one that was never paused, and run a tick missed while paused as
// if it were on time, then the latest missed one after it.
func (s *Service) Fire(ctx context.Context, sc *store.Schedule) (bool, error) {
	progressed, _, err := s.fire(ctx, sc)
	return progressed, err
}

// fire is Fire that also returns the schedule as it left it (nil when it
// is gone), so that Tick knows whether a buffered tick waits.
func (s *Service) fire(ctx context.Context, sc *store.Schedule) (bool, *store.Schedule, error) {
	progressed := false
	for range maxSteps {
		now := s.cfg.Clock.Now()
		next, changed, err := s.step(ctx, sc, now)
		if errors.Is(err, store.ErrScheduleConflict) {
			next, err = s.cfg.Store.GetSchedule(ctx, sc.ID)
			if errors.Is(err, store.ErrScheduleNotFound) {
				return progressed, nil, nil
			}
			changed = true
		}
		if err != nil {
			return progressed, sc, fmt.Errorf("schedule %q: %w", sc.ID, err)
		}
		if !changed {
			return progressed, sc, nil
		}
		progressed = true
		sc = next
	}
	return progressed, sc, nil
}

// step takes one step of a schedule: carry out its pending tick, or
// release its buffered tick, or decide its next due tick. It returns the
// schedule as stored after the step, and false when there was nothing to
// do.
func (s *Service) step(ctx context.Context, sc *store.Schedule, now time.Time) (*store.Schedule, bool, error) {
	if sc.Paused {
		return sc, false, nil
	}
	if !sc.PendingTick.IsZero() {
		return s.carryOut(ctx, sc, now)
	}
	if !sc.BufferedTick.IsZero() {
		active, err := s.active(ctx, sc.LastRunID)
		if err != nil {
			return nil, false, err
		}
		if !active {
			n := *sc
			n.PendingTick, n.PendingRunID, n.BufferedTick = sc.BufferedTick, RunID(sc.ID, sc.BufferedTick), time.Time{}
			out, err := s.update(ctx, &n, nil, now)
			return out, err == nil, err
		}
	}
	spec, err := Spec(sc)
	if err != nil {
		// Stored schedules were validated; one that no longer parses (a
		// zone removed from the system's database) stops firing.
		n := *sc
		if n.NextFire.IsZero() {
			return sc, false, nil
		}
		n.NextFire = time.Time{}
		s.cfg.Logger.Error("schedules: a stored schedule does not parse; it stops firing", "schedule", sc.ID, "err", err)
		out, err := s.update(ctx, &n, nil, now)
		return out, err == nil, err
	}
	cursor := sc.Since
	if sc.LastTick.After(cursor) {
		cursor = sc.LastTick
	}
	plan := cronspec.Due(spec, sc.ID, sc.Jitter, cursor, now, cronspec.CatchUp{Ticks: sc.CatchUpTicks, Within: sc.CatchUpWithin})
	n := *sc
	if len(plan.Run) == 0 {
		if !plan.Last.IsZero() {
			n.LastTick = plan.Last
		}
		n.NextFire = plan.NextFire
		if n.LastTick.Equal(sc.LastTick) && n.NextFire.Equal(sc.NextFire) {
			return sc, false, nil
		}
		out, err := s.update(ctx, &n, nil, now)
		return out, err == nil, err
	}
	tick := plan.Run[0]
	n.LastTick = tick
	n.NextFire = time.Time{}
	if nt, ok := spec.Next(tick); ok {
		n.NextFire = cronspec.Fire(sc.ID, nt, sc.Jitter)
	}
	var log []store.ScheduleTick
	active := false
	if sc.Overlap != store.OverlapAllow && sc.LastRunID != "" {
		if active, err = s.active(ctx, sc.LastRunID); err != nil {
			return nil, false, err
		}
	}
	switch {
	case !active:
		n.PendingTick, n.PendingRunID = tick, RunID(sc.ID, tick)
	case sc.Overlap == store.OverlapCancel:
		n.PendingTick, n.PendingRunID, n.PendingCancel = tick, RunID(sc.ID, tick), sc.LastRunID
	case sc.Overlap == store.OverlapBuffer && sc.BufferedTick.IsZero():
		n.BufferedTick = tick
		log = append(log, store.ScheduleTick{Tick: tick, Outcome: store.TickBuffered, RunID: RunID(sc.ID, tick)})
	default:
		log = append(log, store.ScheduleTick{Tick: tick, Outcome: store.TickSkipped})
	}
	out, err := s.update(ctx, &n, log, now)
	return out, err == nil, err
}

// carryOut starts a schedule's pending tick (after cancelling the run it
// replaces), records it and clears it.
func (s *Service) carryOut(ctx context.Context, sc *store.Schedule, now time.Time) (*store.Schedule, bool, error) {
	if sc.PendingCancel != "" {
		if err := s.cfg.Cancel(ctx, sc.PendingCancel); err != nil {
			return nil, false, fmt.Errorf("cancel the previous run %s: %w", sc.PendingCancel, err)
		}
	}
	entry := store.ScheduleTick{Tick: sc.PendingTick, Outcome: store.TickStarted, RunID: sc.PendingRunID}
	err := s.cfg.Start(ctx, sc, sc.PendingTick, sc.PendingRunID)
	switch {
	case err == nil, errors.Is(err, store.ErrRunExists):
	case s.cfg.Permanent(err):
		entry.Outcome, entry.RunID, entry.Error = store.TickFailed, "", err.Error()
		s.cfg.Logger.Warn("schedules: a tick could not start its run", "schedule", sc.ID, "tick", sc.PendingTick, "err", err)
	default:
		return nil, false, fmt.Errorf("start the run of tick %s: %w", sc.PendingTick.Format(time.RFC3339), err)
	}
	n := *sc
	if entry.Outcome == store.TickStarted {
		n.LastRunID = sc.PendingRunID
	}
	n.PendingTick, n.PendingRunID, n.PendingCancel = time.Time{}, "", ""
	out, err := s.update(ctx, &n, []store.ScheduleTick{entry}, now)
	return out, err == nil, err
}

func (s *Service) active(ctx context.Context, runID string) (bool, error) {
	if runID == "" {
		return false, nil
	}
	return s.cfg.Active(ctx, runID)
}

func (s *Service) update(ctx context.Context, n *store.Schedule, ticks []store.ScheduleTick, now time.Time) (*store.Schedule, error) {
	out, err := s.cfg.Store.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: n, Ticks: ticks, Now: now})
	if err != nil {
		return out, err
	}
	// Recorded once: the compare-and-set let this process write the ticks.
	for _, t := range ticks {
		e := telemetry.Event{Schedule: n.ID, Workflow: n.TargetName, RunID: t.RunID}
		switch t.Outcome {
		case store.TickStarted:
			e.Kind = telemetry.ScheduleFired
		case store.TickFailed:
			e.Kind, e.Err = telemetry.ScheduleFired, errors.New(t.Error)
		case store.TickSkipped:
			e.Kind = telemetry.ScheduleSkipped
		default:
			continue // buffered: it fires later
		}
		s.cfg.Telemetry.Emit(e)
	}
	return out, nil
}

// Spec parses a stored schedule's timing.
func Spec(sc *store.Schedule) (*cronspec.Spec, error) {
	return cronspec.Parse(cronspec.Timing{Cron: sc.Cron, Every: sc.Every, Anchor: sc.Anchor, TimeZone: sc.TimeZone})
}

// NextFire is the fire time of the first tick after the later of since
// and last (zero when the timing has none).
func NextFire(spec *cronspec.Spec, sc *store.Schedule) time.Time {
	cursor := sc.Since
	if sc.LastTick.After(cursor) {
		cursor = sc.LastTick
	}
	t, ok := spec.Next(cursor)
	if !ok {
		return time.Time{}
	}
	return cronspec.Fire(sc.ID, t, sc.Jitter)
}
