package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/cronspec"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/schedule"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/store"
)

// Errors of schedules.
var (
	// ErrScheduleNotFound: no schedule has that id.
	ErrScheduleNotFound = store.ErrScheduleNotFound
	// ErrScheduleExists: CreateSchedule names an id that is taken.
	ErrScheduleExists = store.ErrScheduleExists
)

// TargetKind says what a schedule starts.
type TargetKind string

// Target kinds.
const (
	// TargetFlow starts a registered flow (StartRun).
	TargetFlow TargetKind = store.TargetFlow
	// TargetWorkflow starts a registered code-first workflow
	// (StartWorkflow).
	TargetWorkflow TargetKind = store.TargetWorkflow
	// TargetDocument starts the latest version of a stored flow document
	// (StartDocument).
	TargetDocument TargetKind = store.TargetDocument
	// TargetJob inserts a job of a kind: a job kind K is a one-step flow
	// named K, started with the schedule's input as its arguments.
	TargetJob TargetKind = store.TargetJob
)

// OverlapPolicy says what a tick does when the run the schedule started
// last is still pending, running or waiting.
type OverlapPolicy string

// Overlap policies.
const (
	// OverlapSkip skips the tick (the default).
	OverlapSkip OverlapPolicy = store.OverlapSkip
	// OverlapBufferOne keeps the tick and starts it when the previous run
	// finishes; a tick that comes while one is kept is skipped.
	OverlapBufferOne OverlapPolicy = store.OverlapBuffer
	// OverlapAllowAll starts every tick, whatever runs.
	OverlapAllowAll OverlapPolicy = store.OverlapAllow
	// OverlapCancelPrevious cancels the previous run, then starts the
	// tick's.
	OverlapCancelPrevious OverlapPolicy = store.OverlapCancel
)

// CatchUp is what a schedule runs of the ticks it missed while no
// process ran it (or while it was paused). The zero CatchUp runs none;
// a nil *CatchUp in a Schedule means the default, one tick: the latest
// missed tick runs once. A tick handled less than a minute late is on
// time, not missed, and always runs.
type CatchUp struct {
	// Ticks runs the latest Ticks missed ticks.
	Ticks int
	// Within runs the missed ticks due within this span before now.
	Within time.Duration
}

// Schedule starts runs of a target on a timing: a cron expression or a
// fixed interval, in a time zone. See docs/schedules.md.
type Schedule struct {
	// ID names the schedule (at most 200 bytes). Required.
	ID string
	// Target is what a tick starts: TargetKind and the name of the flow,
	// workflow, document or job kind.
	Target     TargetKind
	TargetName string
	// Cron is a cron expression: 5 fields (minute hour day-of-month month
	// day-of-week), 6 (a leading seconds field), or @yearly, @monthly,
	// @weekly, @daily, @hourly, @every <duration>. Set Cron or Every.
	Cron string
	// Every is a fixed interval (whole seconds), whose ticks are Anchor +
	// k·Every (Anchor defaults to the Unix epoch).
	Every  time.Duration
	Anchor time.Time
	// TimeZone is the IANA zone Cron is read in. Defaults to UTC.
	TimeZone string
	// Jitter delays each tick's run by a duration in [0, Jitter) derived
	// from the schedule id and the tick, the same in every process.
	Jitter time.Duration
	// Overlap defaults to OverlapSkip.
	Overlap OverlapPolicy
	// CatchUp defaults to one tick (nil).
	CatchUp *CatchUp
	// Input is the input of every run (encoded as JSON).
	Input any
	// Paused schedules fire no tick.
	Paused bool

	// The rest is read-only: what the store holds.

	// Declared is true for a schedule declared in code (DeclareSchedules).
	Declared bool
	// NextFire is when the next tick fires (zero when none will).
	NextFire time.Time
	// LastTick is the latest tick handled; LastRunID the run it started
	// last.
	LastTick  time.Time
	LastRunID string
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleRun is an entry of a schedule's tick log.
type ScheduleRun struct {
	Tick time.Time
	// Outcome is "started", "skipped", "buffered" or "failed".
	Outcome string
	// RunID is the run the tick started (or will start, when buffered).
	RunID string
	// Status is the run's status now ("" when it was pruned or never
	// started).
	Status hephtype.RunStatus
	// Error says why a failed tick could not start its run.
	Error string
}

// toStore validates s and converts it; errors wrap ErrInvalidInput and
// name the field.
func (s *Schedule) toStore(maxPayload int) (*store.Schedule, *cronspec.Spec, error) {
	if s == nil {
		return nil, nil, fmt.Errorf("%w: nil schedule", ErrInvalidInput)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("schedule %q: %w: %s: %s", s.ID, ErrInvalidInput, field, fmt.Sprintf(format, args...))
	}
	spec, err := cronspec.Parse(cronspec.Timing{Cron: s.Cron, Every: s.Every, Anchor: s.Anchor, TimeZone: s.TimeZone})
	if err != nil {
		var ce *cronspec.Error
		if errors.As(err, &ce) {
			return nil, nil, bad(ce.Field, "%s", ce.Reason)
		}
		return nil, nil, bad("cron", "%v", err)
	}
	if s.Jitter < 0 {
		return nil, nil, bad("jitter", "%v is negative", s.Jitter)
	}
	out := &store.Schedule{
		ID: s.ID, TargetKind: string(s.Target), TargetName: s.TargetName, Cron: strings.TrimSpace(s.Cron), Every: s.Every,
		Anchor: s.Anchor, TimeZone: s.TimeZone, Jitter: s.Jitter, Overlap: string(s.Overlap), CatchUpTicks: 1, Paused: s.Paused,
	}
	if out.Overlap == "" {
		out.Overlap = store.OverlapSkip
	}
	if s.CatchUp != nil {
		if s.CatchUp.Ticks < 0 || s.CatchUp.Within < 0 {
			return nil, nil, bad("catch_up", "ticks %d and within %v must not be negative", s.CatchUp.Ticks, s.CatchUp.Within)
		}
		out.CatchUpTicks, out.CatchUpWithin = s.CatchUp.Ticks, s.CatchUp.Within
	}
	if s.Input != nil {
		raw, err := limits.JSON(s.Input)
		if err != nil {
			return nil, nil, bad("input", "%v", err)
		}
		if err := limits.Input(raw, maxPayload, "the input"); err != nil {
			return nil, nil, fmt.Errorf("schedule %q: input: %w", s.ID, err)
		}
		out.Input = raw
	}
	if err := out.Check(); err != nil {
		return nil, nil, fmt.Errorf("schedule %q: %w", s.ID, err)
	}
	return out, spec, nil
}

func fromStoreSchedule(s *store.Schedule) *Schedule {
	out := &Schedule{
		ID: s.ID, Target: TargetKind(s.TargetKind), TargetName: s.TargetName, Cron: s.Cron, Every: s.Every, Anchor: s.Anchor,
		TimeZone: s.TimeZone, Jitter: s.Jitter, Overlap: OverlapPolicy(s.Overlap),
		CatchUp: &CatchUp{Ticks: s.CatchUpTicks, Within: s.CatchUpWithin}, Paused: s.Paused, Declared: s.Declared,
		NextFire: s.NextFire, LastTick: s.LastTick, LastRunID: s.LastRunID, Version: s.Version, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if len(s.Input) > 0 {
		out.Input = json.RawMessage(s.Input)
	}
	return out
}

// CreateSchedule stores a new schedule. Its ticks start after now.
func (c *Client) CreateSchedule(ctx context.Context, s *Schedule) (*Schedule, error) {
	st, spec, err := s.toStore(c.cfg.MaxPayloadSize)
	if err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	now := c.cfg.Clock.Now()
	st.Since = now
	st.NextFire = schedule.NextFire(spec, st)
	out, err := c.cfg.Store.CreateSchedule(ctx, &store.CreateScheduleParams{Schedule: st, Now: now})
	if err != nil {
		return nil, err
	}
	c.sched.Wake()
	return fromStoreSchedule(out), nil
}

// modifySchedule reads a schedule, changes it and writes it back with a
// compare-and-set, again after a concurrent change.
func (c *Client) modifySchedule(ctx context.Context, id string, change func(*store.Schedule) error) (*store.Schedule, error) {
	for {
		cur, err := c.cfg.Store.GetSchedule(ctx, id)
		if err != nil {
			return nil, err
		}
		n := *cur
		if err := change(&n); err != nil {
			return nil, err
		}
		out, err := c.cfg.Store.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: &n, Now: c.cfg.Clock.Now()})
		if errors.Is(err, store.ErrScheduleConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c.sched.Wake()
		return out, nil
	}
}

// applySpec sets a schedule's definition from st, keeping its state; a
// new timing starts a new tick sequence after now.
func (c *Client) applySpec(n, st *store.Schedule, spec *cronspec.Spec, keepPaused bool) {
	timing := n.Cron != st.Cron || n.Every != st.Every || !n.Anchor.Equal(st.Anchor) || n.TimeZone != st.TimeZone || n.Jitter != st.Jitter
	paused := n.Paused
	n.TargetKind, n.TargetName, n.Cron, n.Every, n.Anchor, n.TimeZone, n.Jitter = st.TargetKind, st.TargetName, st.Cron, st.Every, st.Anchor, st.TimeZone, st.Jitter
	n.Overlap, n.CatchUpTicks, n.CatchUpWithin, n.Input, n.Paused = st.Overlap, st.CatchUpTicks, st.CatchUpWithin, st.Input, st.Paused
	if keepPaused {
		n.Paused = paused
	}
	if timing {
		n.Since, n.LastTick = c.cfg.Clock.Now(), time.Time{}
		n.BufferedTick = time.Time{}
	}
	n.NextFire = schedule.NextFire(spec, n)
}

// UpdateSchedule replaces a schedule's definition (target, timing,
// options, input, paused) and keeps its state (last tick, last run). A
// changed timing starts a new tick sequence: ticks after now.
func (c *Client) UpdateSchedule(ctx context.Context, s *Schedule) (*Schedule, error) {
	st, spec, err := s.toStore(c.cfg.MaxPayloadSize)
	if err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	out, err := c.modifySchedule(ctx, s.ID, func(n *store.Schedule) error {
		c.applySpec(n, st, spec, false)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	return fromStoreSchedule(out), nil
}

// GetSchedule returns a schedule.
func (c *Client) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	s, err := c.cfg.Store.GetSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromStoreSchedule(s), nil
}

// ListSchedules returns schedules by id: at most limit (default 100,
// at most 1000) after the id after ("" from the first).
func (c *Client) ListSchedules(ctx context.Context, after string, limit int) ([]*Schedule, error) {
	ss, err := c.cfg.Store.ListSchedules(ctx, &store.ListSchedulesParams{After: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]*Schedule, len(ss))
	for i, s := range ss {
		out[i] = fromStoreSchedule(s)
	}
	return out, nil
}

// DeleteSchedule deletes a schedule and its tick log; the runs it
// started are left alone.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	if err := c.cfg.Store.DeleteSchedule(ctx, id); err != nil {
		return err
	}
	c.sched.Wake()
	return nil
}

// PauseSchedule stops a schedule's ticks until ResumeSchedule. A pause
// survives the redeploy of a schedule declared in code.
func (c *Client) PauseSchedule(ctx context.Context, id string) error {
	_, err := c.modifySchedule(ctx, id, func(n *store.Schedule) error {
		n.Paused = true
		return nil
	})
	return err
}

// ResumeSchedule resumes a paused schedule. The ticks it missed while
// paused are handled by its catch-up window (by default the latest one
// runs once).
func (c *Client) ResumeSchedule(ctx context.Context, id string) error {
	_, err := c.modifySchedule(ctx, id, func(n *store.Schedule) error {
		n.Paused = false
		return nil
	})
	return err
}

// TriggerSchedule starts one run of the schedule's target now, outside
// its tick sequence: it ignores the overlap policy, does not count as
// the schedule's last run and is not in the tick log. Its id is
// "<schedule id>@trigger-<random>".
func (c *Client) TriggerSchedule(ctx context.Context, id string) (*Run, error) {
	s, err := c.cfg.Store.GetSchedule(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("trigger schedule: %w", err)
	}
	r, err := c.startTarget(ctx, s, id+"@trigger-"+newID())
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %q: %w", id, err)
	}
	return c.toRun(r), nil
}

// MaxBackfill bounds the ticks of one BackfillSchedule.
const MaxBackfill = 10000

// BackfillSchedule starts a run for every tick of the schedule in [from,
// to], whatever the overlap policy, and records them in the tick log. It
// is idempotent: a tick's run id is derived from the schedule and the
// tick, so a tick that has a run (from its time, or an earlier backfill)
// is not started again. It returns the run ids, oldest tick first.
func (c *Client) BackfillSchedule(ctx context.Context, id string, from, to time.Time) ([]string, error) {
	s, err := c.cfg.Store.GetSchedule(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("backfill schedule: %w", err)
	}
	spec, err := schedule.Spec(s)
	if err != nil {
		return nil, fmt.Errorf("backfill schedule %q: %w: %w", id, ErrInvalidInput, err)
	}
	if to.Before(from) {
		return nil, fmt.Errorf("backfill schedule %q: %w: to %v is before from %v", id, ErrInvalidInput, to, from)
	}
	ticks := spec.Between(from.Add(-time.Nanosecond), to, MaxBackfill+1)
	if len(ticks) > MaxBackfill {
		return nil, fmt.Errorf("backfill schedule %q: %w: the range has more than %d ticks", id, ErrInvalidInput, MaxBackfill)
	}
	ids := make([]string, 0, len(ticks))
	var log []store.ScheduleTick
	for _, t := range ticks {
		runID := schedule.RunID(id, t)
		_, err := c.startTarget(ctx, s, runID)
		if err != nil && !errors.Is(err, store.ErrRunExists) {
			return ids, fmt.Errorf("backfill schedule %q: tick %s: %w", id, t.Format(time.RFC3339), err)
		}
		ids = append(ids, runID)
		log = append(log, store.ScheduleTick{Tick: t, Outcome: store.TickStarted, RunID: runID})
	}
	for len(log) > 0 {
		n := min(len(log), 500)
		batch := log[:n]
		_, err := c.modifyScheduleTicks(ctx, id, batch)
		if err != nil {
			return ids, fmt.Errorf("backfill schedule %q: record ticks: %w", id, err)
		}
		log = log[n:]
	}
	return ids, nil
}

// modifyScheduleTicks records ticks with a compare-and-set that changes
// nothing else.
func (c *Client) modifyScheduleTicks(ctx context.Context, id string, ticks []store.ScheduleTick) (*store.Schedule, error) {
	for {
		cur, err := c.cfg.Store.GetSchedule(ctx, id)
		if err != nil {
			return nil, err
		}
		out, err := c.cfg.Store.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: cur, Ticks: ticks, Now: c.cfg.Clock.Now()})
		if !errors.Is(err, store.ErrScheduleConflict) {
			return out, err
		}
	}
}

// NextFireTimes returns when the schedule's next n ticks fire (jitter
// included), from its current position.
func (c *Client) NextFireTimes(ctx context.Context, id string, n int) ([]time.Time, error) {
	s, err := c.cfg.Store.GetSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	spec, err := schedule.Spec(s)
	if err != nil {
		return nil, fmt.Errorf("next fire times of %q: %w: %w", id, ErrInvalidInput, err)
	}
	if n <= 0 || n > 1000 {
		return nil, fmt.Errorf("next fire times of %q: %w: n is %d, want 1 to 1000", id, ErrInvalidInput, n)
	}
	cursor := s.Since
	if s.LastTick.After(cursor) {
		cursor = s.LastTick
	}
	ticks := spec.NextN(cursor, n)
	for i, t := range ticks {
		ticks[i] = cronspec.Fire(id, t, s.Jitter)
	}
	return ticks, nil
}

// ScheduleRuns returns the schedule's latest ticks, newest first, with
// their outcome and the status of their run: at most limit (default 20).
func (c *Client) ScheduleRuns(ctx context.Context, id string, limit int) ([]*ScheduleRun, error) {
	if _, err := c.cfg.Store.GetSchedule(ctx, id); err != nil {
		return nil, err
	}
	ticks, err := c.cfg.Store.ScheduleTicks(ctx, &store.ScheduleTicksParams{ID: id, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]*ScheduleRun, len(ticks))
	for i, t := range ticks {
		out[i] = &ScheduleRun{Tick: t.Tick, Outcome: t.Outcome, RunID: t.RunID, Error: t.Error}
		if t.RunID != "" && t.Outcome == store.TickStarted {
			r, err := c.cfg.Store.GetRun(ctx, t.RunID)
			switch {
			case err == nil:
				out[i].Status = r.Status
			case !errors.Is(err, store.ErrRunNotFound):
				return nil, err
			}
		}
	}
	return out, nil
}

// DeclareSchedules declares schedules in code (for flows, workflows, job
// kinds or documents). They are upserted when the Client starts, or at
// once when it runs: the code owns the definition (target, timing,
// options, input), the store keeps the state, and a pause made at run
// time survives a redeploy. A declared schedule that is no longer
// declared stays stored, and keeps firing, until DeleteSchedule: a
// process that runs older code must not delete what a newer one
// declared.
func (c *Client) DeclareSchedules(ss ...*Schedule) error {
	for _, s := range ss {
		if _, _, err := s.toStore(c.cfg.MaxPayloadSize); err != nil {
			return fmt.Errorf("declare schedules: %w", err)
		}
	}
	c.declared.mu.Lock()
	for _, s := range ss {
		cp := *s
		c.declared.list = slices.DeleteFunc(c.declared.list, func(d *Schedule) bool { return d.ID == s.ID })
		c.declared.list = append(c.declared.list, &cp)
	}
	started := c.declared.started
	c.declared.mu.Unlock()
	if started {
		return c.upsertDeclared(context.Background(), ss)
	}
	return nil
}

// declaredSchedules are the schedules declared in code.
type declaredSchedules struct {
	mu      sync.Mutex
	list    []*Schedule
	started bool
}

// upsertDeclared writes declared schedules: creates the missing ones and
// updates the definition of the others (keeping a run-time pause).
func (c *Client) upsertDeclared(ctx context.Context, ss []*Schedule) error {
	var errs []error
	for _, s := range ss {
		st, spec, err := s.toStore(c.cfg.MaxPayloadSize)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st.Declared = true
		now := c.cfg.Clock.Now()
		st.Since = now
		st.NextFire = schedule.NextFire(spec, st)
		_, err = c.cfg.Store.CreateSchedule(ctx, &store.CreateScheduleParams{Schedule: st, Now: now})
		if errors.Is(err, store.ErrScheduleExists) {
			_, err = c.modifySchedule(ctx, s.ID, func(n *store.Schedule) error {
				before := *n
				c.applySpec(n, st, spec, true)
				n.Declared = true
				if sameDefinition(&before, n) {
					return errUnchanged
				}
				return nil
			})
			if errors.Is(err, errUnchanged) {
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("declare schedule %q: %w", s.ID, err))
		}
	}
	c.sched.Wake()
	return errors.Join(errs...)
}

var errUnchanged = errors.New("unchanged")

func sameDefinition(a, b *store.Schedule) bool {
	return a.TargetKind == b.TargetKind && a.TargetName == b.TargetName && a.Cron == b.Cron && a.Every == b.Every &&
		a.Anchor.Equal(b.Anchor) && a.TimeZone == b.TimeZone && a.Jitter == b.Jitter && a.Overlap == b.Overlap &&
		a.CatchUpTicks == b.CatchUpTicks && a.CatchUpWithin == b.CatchUpWithin && string(a.Input) == string(b.Input) &&
		a.Declared == b.Declared && a.NextFire.Equal(b.NextFire) && a.Paused == b.Paused
}

// startSchedules upserts the declared schedules and starts the loop.
func (c *Client) startSchedules(ctx context.Context) error {
	c.declared.mu.Lock()
	c.declared.started = true
	list := slices.Clone(c.declared.list)
	c.declared.mu.Unlock()
	if err := c.upsertDeclared(ctx, list); err != nil {
		return err
	}
	c.sched.Start(ctx)
	return nil
}

// newSchedules builds the schedule service of a client.
func (c *Client) newSchedules() *schedule.Service {
	svc := schedule.New(&schedule.Config{
		Store: c.cfg.Store, Clock: c.cfg.Clock, Logger: c.cfg.Logger, Telemetry: c.hub, PollInterval: 10 * c.cfg.PollInterval,
		Start: func(ctx context.Context, s *store.Schedule, _ time.Time, runID string) error {
			_, err := c.startTarget(ctx, s, runID)
			return err
		},
		Permanent: func(err error) bool {
			return errors.Is(err, ErrFlowNotFound) || errors.Is(err, hephtype.ErrWorkflowNotFound) || errors.Is(err, ErrInvalidInput) ||
				errors.Is(err, store.ErrDocumentNotFound) || errors.Is(err, ErrNoDocumentRegistry) || errors.Is(err, store.ErrDuplicateRun)
		},
		Active: func(ctx context.Context, runID string) (bool, error) {
			r, err := c.cfg.Store.GetRun(ctx, runID)
			if errors.Is(err, store.ErrRunNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			return !r.Status.Terminal(), nil
		},
		Cancel: func(ctx context.Context, runID string) error {
			err := c.CancelRun(ctx, runID, "cancelled by its schedule's next tick")
			if errors.Is(err, ErrRunFinished) || errors.Is(err, store.ErrRunNotFound) {
				return nil
			}
			return err
		},
	})
	c.hub.Subscribe(func(e telemetry.Event) {
		switch e.Kind {
		case telemetry.RunCompleted, telemetry.RunFailed, telemetry.RunCancelled:
			svc.RunFinished(e.RunID)
		}
	})
	return svc
}

// startTarget starts the run of a schedule's target with a given id.
func (c *Client) startTarget(ctx context.Context, s *store.Schedule, runID string) (*store.Run, error) {
	var input any
	if len(s.Input) > 0 {
		input = json.RawMessage(s.Input)
	}
	r, err := c.startKind(ctx, s.TargetKind, s.TargetName, input, &kindStart{RunID: runID, Meta: map[string]any{"schedule": s.ID}})
	if errors.Is(err, errTargetKind) {
		return nil, fmt.Errorf("%w: schedule %q: target kind %q", ErrInvalidInput, s.ID, s.TargetKind)
	}
	return r, err
}

var errTargetKind = errors.New("unknown target kind")

// kindStart are the options of startKind.
type kindStart struct {
	RunID string
	Meta  map[string]any
	// BusinessKey, when set, is the run's business key value (a flow's or
	// document's), workflow id, or job unique key; ConcurrencyKey its
	// concurrency key.
	BusinessKey, ConcurrencyKey string
}

// startKind starts a run of a flow, job kind, workflow or document by
// name, with a given id, metadata and keys.
func (c *Client) startKind(ctx context.Context, kind, name string, input any, o *kindStart) (*store.Run, error) {
	so := &flowrt.StartOptions{RunID: o.RunID, Metadata: o.Meta, ConcurrencyKey: o.ConcurrencyKey}
	if o.BusinessKey != "" && kind != store.TargetJob {
		so.BusinessValue = o.BusinessKey
	}
	switch kind {
	case store.TargetFlow, store.TargetJob:
		if o.BusinessKey != "" && kind == store.TargetJob {
			if err := businesskey.ValidateValue(o.BusinessKey); err != nil {
				return nil, fmt.Errorf("%w: business key: %w", ErrInvalidInput, err)
			}
			so.BusinessID, so.KeyScope = uniqueKeyName+businesskey.Separator+"k-"+o.BusinessKey, businesskey.ScopeActive
		}
		so.Job = kind == store.TargetJob
		vo, err := c.versioned(ctx, name, input, so)
		if err != nil {
			return nil, err
		}
		// A flow this process lacks starts from its catalog stub: a tick
		// never fails for want of the code.
		if err := c.ensureStub(ctx, name, vo.Version); err != nil {
			return nil, err
		}
		return c.flows.Start(ctx, name, input, vo)
	case store.TargetWorkflow:
		return c.wf.StartWorkflow(ctx, name, input, &wfrt.StartOptions{RunID: o.RunID, Metadata: o.Meta, ID: o.BusinessKey, ConcurrencyKey: o.ConcurrencyKey})
	case store.TargetDocument:
		return c.startDocument(ctx, name, 0, input, so)
	}
	return nil, errTargetKind
}

// TickSchedules handles every schedule that is due now, as the loop that
// Start runs does, and returns when the next one is due (zero when none
// is known). Tests on a fake clock call it to step schedules without
// waiting for the loop; it is safe to call while the loop runs.
func (c *Client) TickSchedules(ctx context.Context) (time.Time, error) {
	return c.sched.Tick(ctx)
}

// declared converts schedules declared with a definition.
func declared(kind TargetKind, name string, ds []hephtype.ScheduleDecl) []*Schedule {
	out := make([]*Schedule, len(ds))
	for i, s := range ds {
		out[i] = &Schedule{
			ID: s.ID, Target: kind, TargetName: name, Cron: s.Cron, Every: s.Every,
			TimeZone: s.TimeZone, Jitter: s.Jitter, Overlap: OverlapPolicy(s.Overlap), Input: s.Input,
		}
	}
	return out
}

// declare declares the schedules of a definition, if it has any.
func (c *Client) declare(kind TargetKind, name string, ds []hephtype.ScheduleDecl) error {
	if len(ds) == 0 {
		return nil
	}
	return c.DeclareSchedules(declared(kind, name, ds)...)
}
