package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Errors of schedules.
var (
	// ErrScheduleNotFound: no schedule has the given id.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrScheduleExists: a create names a schedule id that is stored.
	ErrScheduleExists = errors.New("a schedule with this id exists")
	// ErrScheduleConflict: an update expected a version of the schedule
	// that is no longer the stored one (another process changed it
	// first). Nothing was written; read the schedule again.
	ErrScheduleConflict = errors.New("schedule changed concurrently")
)

// Schedules stores schedules (cron) and the log of their ticks. The store
// does not interpret a schedule's timing: the runtime computes ticks and
// fire times and writes them here. Every change of a stored schedule is a
// compare-and-set on its Version, so of two processes that read the same
// version and act on it, one writes and the other changes nothing.
type Schedules interface {
	// CreateSchedule stores a new schedule with Version 1, or returns
	// ErrScheduleExists. CreatedAt and UpdatedAt are set to p.Now.
	CreateSchedule(ctx context.Context, p *CreateScheduleParams) (*Schedule, error)
	// GetSchedule returns a schedule, or ErrScheduleNotFound.
	GetSchedule(ctx context.Context, id string) (*Schedule, error)
	// ListSchedules returns schedules by id.
	ListSchedules(ctx context.Context, p *ListSchedulesParams) ([]*Schedule, error)
	// UpdateSchedule writes p.Schedule over the stored schedule if the
	// stored Version is p.Schedule.Version, incrementing it and setting
	// UpdatedAt to p.Now, and records p.Ticks (a tick already in the log
	// is overwritten with the new outcome), all in one transaction. It
	// returns the schedule as stored, ErrScheduleConflict when the
	// version differs, or ErrScheduleNotFound.
	UpdateSchedule(ctx context.Context, p *UpdateScheduleParams) (*Schedule, error)
	// DeleteSchedule deletes a schedule and its tick log, or returns
	// ErrScheduleNotFound.
	DeleteSchedule(ctx context.Context, id string) error
	// DueSchedules returns the schedules, not paused, that have work at
	// p.Now: a NextFire at or before it, a PendingTick or a BufferedTick.
	// Oldest NextFire first, at most p.Limit (default 100).
	DueSchedules(ctx context.Context, p *DueSchedulesParams) ([]*Schedule, error)
	// NextScheduleFire returns the earliest NextFire among schedules that
	// are not paused, and false when there is none.
	NextScheduleFire(ctx context.Context) (time.Time, bool, error)
	// ScheduleTicks returns the latest ticks of a schedule's log, newest
	// first, at most p.Limit (default 20, at most 1000).
	ScheduleTicks(ctx context.Context, p *ScheduleTicksParams) ([]*ScheduleTick, error)
}

// Schedule target kinds.
const (
	TargetFlow     = "flow"
	TargetWorkflow = "workflow"
	TargetDocument = "document"
	TargetJob      = "job"
)

// Overlap policies.
const (
	OverlapSkip     = "skip"
	OverlapBuffer   = "buffer_one"
	OverlapAllow    = "allow_all"
	OverlapCancel   = "cancel_previous"
	defaultMaxLimit = 1000
)

// Tick outcomes in the log.
const (
	// TickStarted: the tick started the run named in the entry.
	TickStarted = "started"
	// TickSkipped: the previous run was active and the policy skips.
	TickSkipped = "skipped"
	// TickBuffered: the previous run was active; the tick waits for it to
	// finish (it becomes started then).
	TickBuffered = "buffered"
	// TickFailed: the run could not be started (the target is not
	// registered, the input is refused); the entry's Error says why.
	TickFailed = "failed"
)

// Schedule is a stored schedule.
type Schedule struct {
	ID string
	// TargetKind is TargetFlow, TargetWorkflow, TargetDocument or
	// TargetJob; TargetName names the flow, workflow, document or job
	// kind.
	TargetKind, TargetName string
	// Cron or Every (with Anchor) is the timing, in TimeZone.
	Cron     string
	Every    time.Duration
	Anchor   time.Time
	TimeZone string
	Jitter   time.Duration
	// Overlap is one of the Overlap constants.
	Overlap string
	// CatchUpTicks and CatchUpWithin are the catch-up window.
	CatchUpTicks  int
	CatchUpWithin time.Duration
	Input         json.RawMessage
	Paused        bool
	// Declared marks a schedule declared in code (upserted at start).
	Declared bool
	// Since is where the tick sequence starts: ticks after it count. It
	// is set when the schedule is created or its timing changes.
	Since time.Time
	// NextFire is the fire time (tick plus jitter) of the next tick after
	// the cursor (the later of Since and LastTick); zero when there is
	// none.
	NextFire time.Time
	// LastTick is the latest tick handled (zero before the first).
	LastTick time.Time
	// LastRunID is the run the schedule started last.
	LastRunID string
	// BufferedTick is a tick that waits for LastRunID to finish.
	BufferedTick time.Time
	// PendingTick, when set, is a tick decided but not yet carried out:
	// start PendingRunID (after cancelling PendingCancel, when set). Any
	// process carries it out (each step is idempotent), then clears it.
	PendingTick   time.Time
	PendingRunID  string
	PendingCancel string
	// Version counts the schedule's changes; updates compare-and-set it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleTick is an entry of a schedule's tick log: one per (schedule,
// tick).
type ScheduleTick struct {
	ScheduleID string
	Tick       time.Time
	Outcome    string
	RunID      string
	Error      string
	RecordedAt time.Time
}

// CreateScheduleParams are the parameters of CreateSchedule.
type CreateScheduleParams struct {
	Schedule *Schedule
	Now      time.Time
}

// UpdateScheduleParams are the parameters of UpdateSchedule.
type UpdateScheduleParams struct {
	// Schedule is the new state; its Version is the expected one.
	Schedule *Schedule
	// Ticks are recorded in the same transaction (their RecordedAt is
	// set to Now).
	Ticks []ScheduleTick
	Now   time.Time
}

// ListSchedulesParams filter ListSchedules.
type ListSchedulesParams struct {
	// After continues after this id.
	After string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
}

// DueSchedulesParams are the parameters of DueSchedules.
type DueSchedulesParams struct {
	Now   time.Time
	Limit int
}

// ScheduleTicksParams are the parameters of ScheduleTicks.
type ScheduleTicksParams struct {
	ID    string
	Limit int
}

// MaxScheduleIDLength bounds a schedule id.
const MaxScheduleIDLength = 200

// Check validates a schedule's stored fields, the same on every backend
// (errors wrap hephtype.ErrInvalidInput).
func (s *Schedule) Check() error {
	switch {
	case s.ID == "":
		return fmt.Errorf("%w: schedule id is empty", hephtype.ErrInvalidInput)
	case len(s.ID) > MaxScheduleIDLength:
		return fmt.Errorf("%w: schedule id is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(s.ID), MaxScheduleIDLength)
	case s.TargetName == "":
		return fmt.Errorf("%w: schedule %q: target name is empty", hephtype.ErrInvalidInput, s.ID)
	}
	switch s.TargetKind {
	case TargetFlow, TargetWorkflow, TargetDocument, TargetJob:
	default:
		return fmt.Errorf("%w: schedule %q: target kind %q is not flow, workflow, document or job", hephtype.ErrInvalidInput, s.ID, s.TargetKind)
	}
	switch s.Overlap {
	case OverlapSkip, OverlapBuffer, OverlapAllow, OverlapCancel:
	default:
		return fmt.Errorf("%w: schedule %q: overlap %q is not skip, buffer_one, allow_all or cancel_previous", hephtype.ErrInvalidInput, s.ID, s.Overlap)
	}
	if len(s.Input) > 0 && !json.Valid(s.Input) {
		return fmt.Errorf("%w: schedule %q: input is not JSON", hephtype.ErrInvalidInput, s.ID)
	}
	return nil
}

// ScheduleLimit is the effective limit of a list: n, or def when n is 0
// or less, capped at 1000.
func ScheduleLimit(n, def int) int {
	if n <= 0 {
		return def
	}
	return min(n, defaultMaxLimit)
}

// Normalized returns a copy of s with its times as every backend keeps
// them: UTC, to the microsecond.
func (s *Schedule) Normalized() *Schedule {
	c := *s
	for _, t := range []*time.Time{&c.Anchor, &c.Since, &c.NextFire, &c.LastTick, &c.BufferedTick, &c.PendingTick, &c.CreatedAt, &c.UpdatedAt} {
		if !t.IsZero() {
			*t = time.UnixMicro(t.UnixMicro()).UTC()
		}
	}
	return &c
}
