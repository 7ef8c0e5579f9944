package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

const scheduleCols = "id, target_kind, target_name, cron, every, anchor, time_zone, jitter, overlap, catchup_ticks, catchup_within, " +
	"input, paused, declared, since, next_fire, last_tick, last_run_id, buffered_tick, pending_tick, pending_run_id, pending_cancel, " +
	"version, created_at, updated_at"

// scheduleQueries are the statements of schedules, in the store's schema.
type scheduleQueries struct {
	insert, update, exists, tick, get, list, due, next, ticks, del, delTicks string
}

func newScheduleQueries(schema string) *scheduleQueries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return &scheduleQueries{
		insert: s("INSERT INTO §schedules (" + scheduleCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, " +
			"$16, $17, $18, $19, $20, $21, $22, $23, $24, $25) ON CONFLICT DO NOTHING"),
		update: s("UPDATE §schedules SET target_kind = $1, target_name = $2, cron = $3, every = $4, anchor = $5, time_zone = $6, jitter = $7, " +
			"overlap = $8, catchup_ticks = $9, catchup_within = $10, input = $11, paused = $12, declared = $13, since = $14, next_fire = $15, " +
			"last_tick = $16, last_run_id = $17, buffered_tick = $18, pending_tick = $19, pending_run_id = $20, pending_cancel = $21, " +
			"version = version + 1, updated_at = $22 WHERE id = $23 AND version = $24"),
		exists: s("SELECT version FROM §schedules WHERE id = $1"),
		tick: s("INSERT INTO §schedule_ticks (schedule_id, tick, outcome, run_id, error, recorded_at) VALUES ($1, $2, $3, $4, $5, $6) " +
			"ON CONFLICT (schedule_id, tick) DO UPDATE SET outcome = excluded.outcome, run_id = excluded.run_id, error = excluded.error, " +
			"recorded_at = excluded.recorded_at"),
		get:  s("SELECT " + scheduleCols + " FROM §schedules WHERE id = $1"),
		list: s("SELECT " + scheduleCols + " FROM §schedules WHERE id > $1 ORDER BY id LIMIT $2"),
		due: s("SELECT " + scheduleCols + " FROM §schedules WHERE NOT paused AND (next_fire <= $1 OR pending_tick IS NOT NULL OR " +
			"buffered_tick IS NOT NULL) ORDER BY next_fire NULLS LAST, id LIMIT $2"),
		next:     s("SELECT MIN(next_fire) FROM §schedules WHERE NOT paused"),
		ticks:    s("SELECT tick, outcome, run_id, error, recorded_at FROM §schedule_ticks WHERE schedule_id = $1 ORDER BY tick DESC LIMIT $2"),
		del:      s("DELETE FROM §schedules WHERE id = $1"),
		delTicks: s("DELETE FROM §schedule_ticks WHERE schedule_id = $1"),
	}
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return truncate(t)
}

func textArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// scheduleArgs are the values of the mutable columns, in the update's
// order (target_kind … pending_cancel).
func scheduleArgs(s *store.Schedule) []any {
	return []any{s.TargetKind, s.TargetName, s.Cron, int64(s.Every), nullTime(s.Anchor), s.TimeZone, int64(s.Jitter), s.Overlap,
		int64(s.CatchUpTicks), int64(s.CatchUpWithin), textArg(s.Input), s.Paused, s.Declared, truncate(s.Since),
		nullTime(s.NextFire), nullTime(s.LastTick), s.LastRunID, nullTime(s.BufferedTick), nullTime(s.PendingTick),
		s.PendingRunID, s.PendingCancel}
}

// CreateSchedule stores a new schedule; the primary key refuses a second
// one with the same id.
func (s *Store) CreateSchedule(ctx context.Context, p *store.CreateScheduleParams) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	if err := p.Schedule.Check(); err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	q := newScheduleQueries(s.schema)
	out := p.Schedule.Normalized()
	out.Version, out.CreatedAt, out.UpdatedAt = 1, truncate(p.Now), truncate(p.Now)
	args := append([]any{out.ID}, scheduleArgs(out)...)
	args = append(args, out.Version, out.CreatedAt, out.UpdatedAt)
	var n int64
	err := s.once(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, q.insert, args...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return nil, s.fail("create schedule", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("create schedule %q: %w", out.ID, store.ErrScheduleExists)
	}
	return out, nil
}

// UpdateSchedule compare-and-sets a schedule on its version and records
// ticks, in one transaction. A retry after a lost COMMIT finds the
// version changed and returns ErrScheduleConflict.
func (s *Store) UpdateSchedule(ctx context.Context, p *store.UpdateScheduleParams) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	if err := p.Schedule.Check(); err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	q := newScheduleQueries(s.schema)
	now := truncate(p.Now)
	out := p.Schedule.Normalized()
	args := append(scheduleArgs(out), now, out.ID, out.Version)
	var refusal error
	err := s.once(ctx, func(ctx context.Context) error {
		refusal = nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, q.update, args...)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				var v int64
				err := tx.QueryRow(ctx, q.exists, out.ID).Scan(&v)
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					refusal = store.ErrScheduleNotFound
				case err != nil:
					return err
				default:
					refusal = store.ErrScheduleConflict
				}
				return nil
			}
			for _, t := range p.Ticks {
				if _, err := tx.Exec(ctx, q.tick, out.ID, truncate(t.Tick), t.Outcome, t.RunID, t.Error, now); err != nil {
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
	q := newScheduleQueries(s.schema)
	var n int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, q.del, id)
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
			_, err = tx.Exec(ctx, q.delTicks, id)
			return err
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

func scanSchedule(row pgx.Row) (*store.Schedule, error) {
	var s store.Schedule
	var every, jitter, within, ticks int64
	var anchor, next, last, buffered, pending *time.Time
	var input *string
	err := row.Scan(&s.ID, &s.TargetKind, &s.TargetName, &s.Cron, &every, &anchor, &s.TimeZone, &jitter, &s.Overlap, &ticks, &within,
		&input, &s.Paused, &s.Declared, &s.Since, &next, &last, &s.LastRunID, &buffered, &pending, &s.PendingRunID, &s.PendingCancel,
		&s.Version, &s.CreatedAt, &s.UpdatedAt)
	if err != nil {
		return nil, err
	}
	s.Every, s.Jitter, s.CatchUpWithin, s.CatchUpTicks = time.Duration(every), time.Duration(jitter), time.Duration(within), int(ticks)
	if input != nil && *input != "" {
		s.Input = []byte(*input)
	}
	opt := func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return t.UTC()
	}
	s.Anchor, s.NextFire, s.LastTick, s.BufferedTick, s.PendingTick = opt(anchor), opt(next), opt(last), opt(buffered), opt(pending)
	s.Since, s.CreatedAt, s.UpdatedAt = s.Since.UTC(), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, nil
}

func (s *Store) querySchedules(ctx context.Context, op, q string, args ...any) ([]*store.Schedule, error) {
	var out []*store.Schedule
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sc, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			out = append(out, sc)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

// GetSchedule returns a schedule.
func (s *Store) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get schedule: %w", err)
	}
	out, err := s.querySchedules(ctx, "get schedule", newScheduleQueries(s.schema).get, id)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("get schedule %q: %w", id, store.ErrScheduleNotFound)
	}
	return out[0], nil
}

// ListSchedules returns schedules by id.
func (s *Store) ListSchedules(ctx context.Context, p *store.ListSchedulesParams) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return s.querySchedules(ctx, "list schedules", newScheduleQueries(s.schema).list, p.After, store.ScheduleLimit(p.Limit, 100))
}

// DueSchedules returns the schedules with work at p.Now.
func (s *Store) DueSchedules(ctx context.Context, p *store.DueSchedulesParams) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("due schedules: %w", err)
	}
	return s.querySchedules(ctx, "due schedules", newScheduleQueries(s.schema).due, truncate(p.Now), store.ScheduleLimit(p.Limit, 100))
}

// NextScheduleFire returns the earliest fire time of a schedule that is
// not paused.
func (s *Store) NextScheduleFire(ctx context.Context) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next schedule fire: %w", err)
	}
	var next *time.Time
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, newScheduleQueries(s.schema).next).Scan(&next)
	})
	if err != nil {
		return time.Time{}, false, s.fail("next schedule fire", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return next.UTC(), true, nil
}

// ScheduleTicks returns a schedule's latest ticks, newest first.
func (s *Store) ScheduleTicks(ctx context.Context, p *store.ScheduleTicksParams) ([]*store.ScheduleTick, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("schedule ticks: %w", err)
	}
	q := newScheduleQueries(s.schema).ticks
	var out []*store.ScheduleTick
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = []*store.ScheduleTick{}
		rows, err := s.pool.Query(ctx, q, p.ID, store.ScheduleLimit(p.Limit, 20))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t := &store.ScheduleTick{ScheduleID: p.ID}
			if err := rows.Scan(&t.Tick, &t.Outcome, &t.RunID, &t.Error, &t.RecordedAt); err != nil {
				return err
			}
			t.Tick, t.RecordedAt = t.Tick.UTC(), t.RecordedAt.UTC()
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("schedule ticks", err)
	}
	return out, nil
}
