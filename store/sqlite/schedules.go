package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

const scheduleCols = "id, target_kind, target_name, cron, every, anchor, time_zone, jitter, overlap, catchup_ticks, catchup_within, " +
	"input, paused, declared, since, next_fire, last_tick, last_run_id, buffered_tick, pending_tick, pending_run_id, pending_cancel, " +
	"version, created_at, updated_at"

const (
	qScheduleInsert = "INSERT INTO schedules (" + scheduleCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
	qScheduleUpdate = "UPDATE schedules SET target_kind = ?, target_name = ?, cron = ?, every = ?, anchor = ?, time_zone = ?, jitter = ?, overlap = ?, " +
		"catchup_ticks = ?, catchup_within = ?, input = ?, paused = ?, declared = ?, since = ?, next_fire = ?, last_tick = ?, last_run_id = ?, " +
		"buffered_tick = ?, pending_tick = ?, pending_run_id = ?, pending_cancel = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?"
	qScheduleExists = "SELECT version FROM schedules WHERE id = ?"
	qTickUpsert     = "INSERT INTO schedule_ticks (schedule_id, tick, outcome, run_id, error, recorded_at) VALUES (?, ?, ?, ?, ?, ?) " +
		"ON CONFLICT (schedule_id, tick) DO UPDATE SET outcome = excluded.outcome, run_id = excluded.run_id, error = excluded.error, recorded_at = excluded.recorded_at"
)

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// scheduleArgs are the values of the mutable columns, in qScheduleUpdate's
// order (target_kind … pending_cancel).
func scheduleArgs(s *store.Schedule) []any {
	return []any{s.TargetKind, s.TargetName, s.Cron, int64(s.Every), nullMicros(s.Anchor), s.TimeZone, int64(s.Jitter), s.Overlap,
		int64(s.CatchUpTicks), int64(s.CatchUpWithin), jsonArg(s.Input), boolInt(s.Paused), boolInt(s.Declared), micros(s.Since),
		nullMicros(s.NextFire), nullMicros(s.LastTick), s.LastRunID, nullMicros(s.BufferedTick), nullMicros(s.PendingTick),
		s.PendingRunID, s.PendingCancel}
}

// CreateSchedule stores a new schedule.
func (s *Store) CreateSchedule(ctx context.Context, p *store.CreateScheduleParams) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	if err := p.Schedule.Check(); err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	out := p.Schedule.Normalized()
	out.Version, out.CreatedAt, out.UpdatedAt = 1, truncate(p.Now), truncate(p.Now)
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(out.ID)
			for _, a := range scheduleArgs(out) {
				w.arg(a)
			}
			w.arg(out.Version)
			w.arg(micros(out.CreatedAt))
			w.arg(micros(out.UpdatedAt))
			var err error
			n, err = w.adhocExecN(qScheduleInsert)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("create schedule", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("create schedule %q: %w", out.ID, store.ErrScheduleExists)
	}
	return out, nil
}

// adhocExecN is adhocExec that returns the number of rows changed.
func (w *wconn) adhocExecN(q string) (int64, error) {
	res, err := w.execText(q)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// UpdateSchedule compare-and-sets a schedule on its version and records
// ticks, in one write transaction.
func (s *Store) UpdateSchedule(ctx context.Context, p *store.UpdateScheduleParams) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	if err := p.Schedule.Check(); err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	now := truncate(p.Now)
	out := p.Schedule.Normalized()
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			for _, a := range scheduleArgs(out) {
				w.arg(a)
			}
			w.arg(micros(now))
			w.arg(out.ID)
			w.arg(out.Version)
			n, err := w.adhocExecN(qScheduleUpdate)
			if err != nil {
				return err
			}
			if n == 0 {
				w.arg(out.ID)
				found, err := w.adhocRow(qScheduleExists, 1)
				if err != nil {
					return err
				}
				refusal = store.ErrScheduleNotFound
				if found {
					refusal = store.ErrScheduleConflict
				}
				return nil
			}
			for _, t := range p.Ticks {
				w.arg(out.ID)
				w.arg(micros(t.Tick))
				w.arg(t.Outcome)
				w.arg(t.RunID)
				w.arg(t.Error)
				w.arg(micros(now))
				if err := w.adhocExec(qTickUpsert); err != nil {
					return fmt.Errorf("record tick: %w", err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, s.fail("update schedule", err)
	}
	if refusal != nil {
		return nil, fmt.Errorf("update schedule %q (version %d): %w", out.ID, out.Version, refusal)
	}
	out.Version++
	out.UpdatedAt = now
	return out, nil
}

// DeleteSchedule deletes a schedule and its tick log.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(id)
			var err error
			if n, err = w.adhocExecN("DELETE FROM schedules WHERE id = ?"); err != nil {
				return err
			}
			w.arg(id)
			return w.adhocExec("DELETE FROM schedule_ticks WHERE schedule_id = ?")
		})
	})
	if err != nil {
		return s.fail("delete schedule", err)
	}
	if n == 0 {
		return fmt.Errorf("delete schedule %q: %w", id, store.ErrScheduleNotFound)
	}
	return nil
}

func scanSchedule(sc interface{ Scan(...any) error }) (*store.Schedule, error) {
	var s store.Schedule
	var every, jitter, within, ticks, paused, declared, since, created, updated int64
	var anchor, next, last, buffered, pending *int64
	var input sql.NullString
	err := sc.Scan(&s.ID, &s.TargetKind, &s.TargetName, &s.Cron, &every, &anchor, &s.TimeZone, &jitter, &s.Overlap, &ticks, &within,
		&input, &paused, &declared, &since, &next, &last, &s.LastRunID, &buffered, &pending, &s.PendingRunID, &s.PendingCancel,
		&s.Version, &created, &updated)
	if err != nil {
		return nil, err
	}
	s.Every, s.Jitter, s.CatchUpWithin, s.CatchUpTicks = time.Duration(every), time.Duration(jitter), time.Duration(within), int(ticks)
	if input.Valid && input.String != "" {
		s.Input = []byte(input.String)
	}
	s.Paused, s.Declared = paused != 0, declared != 0
	s.Anchor, s.Since, s.NextFire, s.LastTick = fromNullMicros(anchor), fromMicros(since), fromNullMicros(next), fromNullMicros(last)
	s.BufferedTick, s.PendingTick = fromNullMicros(buffered), fromNullMicros(pending)
	s.CreatedAt, s.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &s, nil
}

func (s *Store) querySchedules(ctx context.Context, op, q string, args ...any) ([]*store.Schedule, error) {
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail(op, err)
	}
	defer rows.Close()
	var out []*store.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, s.fail(op, err)
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

// GetSchedule returns a schedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get schedule: %w", err)
	}
	sc, err := scanSchedule(s.reader.QueryRowContext(ctx, "SELECT "+scheduleCols+" FROM schedules WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get schedule %q: %w", id, store.ErrScheduleNotFound)
	}
	if err != nil {
		return nil, s.fail("get schedule", err)
	}
	return sc, nil
}

// ListSchedules returns schedules by id.
func (s *Store) ListSchedules(ctx context.Context, p *store.ListSchedulesParams) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return s.querySchedules(ctx, "list schedules", "SELECT "+scheduleCols+" FROM schedules WHERE id > ? ORDER BY id LIMIT ?",
		p.After, store.ScheduleLimit(p.Limit, 100))
}

// DueSchedules returns the schedules with work at p.Now.
func (s *Store) DueSchedules(ctx context.Context, p *store.DueSchedulesParams) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("due schedules: %w", err)
	}
	return s.querySchedules(ctx, "due schedules", "SELECT "+scheduleCols+" FROM schedules WHERE paused = 0 AND "+
		"(next_fire <= ? OR pending_tick IS NOT NULL OR buffered_tick IS NOT NULL) ORDER BY next_fire, id LIMIT ?",
		micros(p.Now), store.ScheduleLimit(p.Limit, 100))
}

// NextScheduleFire returns the earliest fire time of a schedule that is
// not paused.
func (s *Store) NextScheduleFire(ctx context.Context) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next schedule fire: %w", err)
	}
	var next *int64
	if err := s.reader.QueryRowContext(ctx, "SELECT MIN(next_fire) FROM schedules WHERE paused = 0").Scan(&next); err != nil {
		return time.Time{}, false, s.fail("next schedule fire", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return fromMicros(*next), true, nil
}

// ScheduleTicks returns a schedule's latest ticks, newest first.
func (s *Store) ScheduleTicks(ctx context.Context, p *store.ScheduleTicksParams) ([]*store.ScheduleTick, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("schedule ticks: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT tick, outcome, run_id, error, recorded_at FROM schedule_ticks WHERE schedule_id = ? "+
		"ORDER BY tick DESC LIMIT ?", p.ID, store.ScheduleLimit(p.Limit, 20))
	if err != nil {
		return nil, s.fail("schedule ticks", err)
	}
	defer rows.Close()
	out := []*store.ScheduleTick{}
	for rows.Next() {
		t := &store.ScheduleTick{ScheduleID: p.ID}
		var tick, rec int64
		if err := rows.Scan(&tick, &t.Outcome, &t.RunID, &t.Error, &rec); err != nil {
			return nil, s.fail("schedule ticks", err)
		}
		t.Tick, t.RecordedAt = fromMicros(tick), fromMicros(rec)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("schedule ticks", err)
	}
	return out, nil
}
