package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.EventWaits = (*Store)(nil)

const eventWaitCols = "id, run_id, step, kind, event, match_expr, input::text, from_time, until_time, created_at, " +
	"matched_event_id, matched_at, delivered_at, resume_with"

func scanEventWait(row pgx.Row) (*store.EventWait, error) {
	var w store.EventWait
	var input, matched *string
	var until, matchedAt, delivered *time.Time
	if err := row.Scan(&w.ID, &w.RunID, &w.Step, &w.Kind, &w.Event, &w.Match, &input, &w.From, &until, &w.CreatedAt,
		&matched, &matchedAt, &delivered, &w.ResumeWith); err != nil {
		return nil, err
	}
	if input != nil {
		w.Input = []byte(*input)
	}
	if matched != nil {
		w.MatchedEventID = *matched
	}
	w.From, w.CreatedAt = w.From.UTC(), w.CreatedAt.UTC()
	for _, t := range []struct {
		src *time.Time
		dst *time.Time
	}{{until, &w.Until}, {matchedAt, &w.MatchedAt}, {delivered, &w.DeliveredAt}} {
		if t.src != nil {
			*t.dst = t.src.UTC()
		}
	}
	return &w, nil
}

// eventWait reads a wait by id.
func (s *Store) eventWait(ctx context.Context, id string) (*store.EventWait, error) {
	w, err := scanEventWait(s.pool.QueryRow(ctx, s.inSchema("SELECT "+eventWaitCols+" FROM §event_waits WHERE id = $1"), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("event wait %q: %w", id, store.ErrEventWaitNotFound)
	}
	return w, err
}

// PutEventWait stores a wait once per id.
func (s *Store) PutEventWait(ctx context.Context, ew *store.EventWait) (*store.EventWait, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put event wait: %w", err)
	}
	if err := store.CheckEventWait(ew); err != nil {
		return nil, err
	}
	q := s.inSchema(`INSERT INTO §event_waits (id, run_id, step, kind, event, match_expr, input, from_time, until_time, created_at, resume_with)
		VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING`)
	var out *store.EventWait
	err := s.idempotent(ctx, func(ctx context.Context) error {
		if _, err := s.pool.Exec(ctx, q, ew.ID, ew.RunID, ew.Step, ew.Kind, ew.Event, ew.Match, textArg(ew.Input),
			truncate(ew.From), nullTime(ew.Until), truncate(ew.CreatedAt), ew.ResumeWith); err != nil {
			return err
		}
		var err error
		out, err = s.eventWait(ctx, ew.ID)
		return err
	})
	if err != nil {
		return nil, s.fail("put event wait", err)
	}
	return out, nil
}

// MatchEventWait records the first event that matched a wait.
func (s *Store) MatchEventWait(ctx context.Context, id, eventID string, now time.Time) (*store.EventWait, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("match event wait: %w", err)
	}
	q := s.inSchema("UPDATE §event_waits SET matched_event_id = $1, matched_at = $2 WHERE id = $3 AND matched_event_id IS NULL")
	var out *store.EventWait
	err := s.idempotent(ctx, func(ctx context.Context) error {
		if _, err := s.pool.Exec(ctx, q, eventID, truncate(now), id); err != nil {
			return err
		}
		var err error
		out, err = s.eventWait(ctx, id)
		return err
	})
	if err != nil {
		return nil, s.fail("match event wait", err)
	}
	return out, nil
}

// DeliveredEventWait records that a wait is done.
func (s *Store) DeliveredEventWait(ctx context.Context, id string, now time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delivered event wait: %w", err)
	}
	q := s.inSchema("UPDATE §event_waits SET delivered_at = $1 WHERE id = $2 AND delivered_at IS NULL")
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, q, truncate(now), id)
		return err
	})
	if err != nil {
		return s.fail("delivered event wait", err)
	}
	return nil
}

// OpenEventWaits returns waits not delivered, oldest first.
func (s *Store) OpenEventWaits(ctx context.Context, limit int) ([]*store.EventWait, error) {
	return s.eventWaits(ctx, "open event waits", "delivered_at IS NULL ORDER BY created_at, id LIMIT $1", store.EventWaitsLimit(limit))
}

// EventWaitsOf returns the waits of a run.
func (s *Store) EventWaitsOf(ctx context.Context, runID string) ([]*store.EventWait, error) {
	return s.eventWaits(ctx, "event waits of run", "run_id = $1 ORDER BY created_at, id LIMIT 1000", runID)
}

// EventWaitsMatched returns the waits an event matched.
func (s *Store) EventWaitsMatched(ctx context.Context, eventID string) ([]*store.EventWait, error) {
	return s.eventWaits(ctx, "event waits matched", "matched_event_id = $1 ORDER BY created_at, id LIMIT 1000", eventID)
}

func (s *Store) eventWaits(ctx context.Context, what, where string, arg any) ([]*store.EventWait, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []*store.EventWait
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.inSchema("SELECT "+eventWaitCols+" FROM §event_waits WHERE "+where), arg)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			w, err := scanEventWait(rows)
			if err != nil {
				return err
			}
			out = append(out, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail(what, err)
	}
	return out, nil
}

// WaitCandidates returns the events a wait may match, oldest first.
func (s *Store) WaitCandidates(ctx context.Context, w *store.EventWait) ([]*store.EventRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("wait candidates: %w", err)
	}
	q := "SELECT " + sentEventCols + " FROM §sent_events WHERE name = $1 AND at >= $2"
	args := []any{w.Event, truncate(w.From)}
	if !w.Until.IsZero() {
		q += " AND at < $3"
		args = append(args, truncate(w.Until))
	}
	q += fmt.Sprintf(" ORDER BY at, seq LIMIT %d", store.MaxWaitCandidates)
	var out []*store.EventRecord
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.inSchema(q), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanSentEvent(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("wait candidates", err)
	}
	return out, nil
}
