package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.EventWaits = (*Store)(nil)

const (
	eventWaitCols = "id, run_id, step, kind, event, match_expr, input, from_time, until_time, created_at, " +
		"matched_event_id, matched_at, delivered_at, resume_with"
	qEventWaitByID = "SELECT " + eventWaitCols + " FROM event_waits WHERE id = ?"
)

// eventWaitFromValues reads a row of eventWaitCols from the writer.
func eventWaitFromValues(v []driver.Value) *store.EventWait {
	t := func(x driver.Value) time.Time {
		if n, ok := x.(int64); ok {
			return fromMicros(n)
		}
		return time.Time{}
	}
	return &store.EventWait{ID: str(v[0]), RunID: str(v[1]), Step: str(v[2]), Kind: str(v[3]), Event: str(v[4]),
		Match: str(v[5]), Input: vJSON(v[6]), From: t(v[7]), Until: t(v[8]), CreatedAt: t(v[9]),
		MatchedEventID: str(v[10]), MatchedAt: t(v[11]), DeliveredAt: t(v[12]), ResumeWith: str(v[13])}
}

// PutEventWait stores a wait once per id.
func (s *Store) PutEventWait(ctx context.Context, ew *store.EventWait) (*store.EventWait, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put event wait: %w", err)
	}
	if err := store.CheckEventWait(ew); err != nil {
		return nil, err
	}
	var out *store.EventWait
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range []driver.Value{ew.ID, ew.RunID, ew.Step, ew.Kind, ew.Event, ew.Match, jsonArg(ew.Input),
				micros(ew.From), nullMicros(ew.Until), micros(ew.CreatedAt), ew.ResumeWith} {
				w.arg(a)
			}
			if err := w.adhocExec("INSERT INTO event_waits (id, run_id, step, kind, event, match_expr, input, from_time, until_time, created_at, resume_with) " +
				"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"); err != nil {
				return err
			}
			var err error
			out, err = w.eventWait(ew.ID)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("put event wait", err)
	}
	return out, nil
}

// eventWait reads a wait in the writer's transaction.
func (w *wconn) eventWait(id string) (*store.EventWait, error) {
	w.arg(id)
	found, err := w.adhocRow(qEventWaitByID, 14)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("event wait %q: %w", id, store.ErrEventWaitNotFound)
	}
	return eventWaitFromValues(w.dest), nil
}

// MatchEventWait records the first event that matched a wait.
func (s *Store) MatchEventWait(ctx context.Context, id, eventID string, now time.Time) (*store.EventWait, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("match event wait: %w", err)
	}
	var out *store.EventWait
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(eventID)
			w.arg(micros(now))
			w.arg(id)
			if err := w.adhocExec("UPDATE event_waits SET matched_event_id = ?, matched_at = ? WHERE id = ? AND matched_event_id IS NULL"); err != nil {
				return err
			}
			var err error
			out, err = w.eventWait(id)
			return err
		})
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
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(micros(now))
			w.arg(id)
			return w.adhocExec("UPDATE event_waits SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL")
		})
	})
	if err != nil {
		return s.fail("delivered event wait", err)
	}
	return nil
}

// OpenEventWaits returns waits not delivered, oldest first.
func (s *Store) OpenEventWaits(ctx context.Context, limit int) ([]*store.EventWait, error) {
	return s.eventWaits(ctx, "open event waits", "delivered_at IS NULL ORDER BY created_at, id LIMIT ?", int64(store.EventWaitsLimit(limit)))
}

// EventWaitsOf returns the waits of a run.
func (s *Store) EventWaitsOf(ctx context.Context, runID string) ([]*store.EventWait, error) {
	return s.eventWaits(ctx, "event waits of run", "run_id = ? ORDER BY created_at, id LIMIT 1000", runID)
}

// EventWaitsMatched returns the waits an event matched.
func (s *Store) EventWaitsMatched(ctx context.Context, eventID string) ([]*store.EventWait, error) {
	return s.eventWaits(ctx, "event waits matched", "matched_event_id = ? ORDER BY created_at, id LIMIT 1000", eventID)
}

func (s *Store) eventWaits(ctx context.Context, what, where string, args ...any) ([]*store.EventWait, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+eventWaitCols+" FROM event_waits WHERE "+where, args...)
	if err != nil {
		return nil, s.fail(what, err)
	}
	defer rows.Close()
	var out []*store.EventWait
	for rows.Next() {
		var id, run, step, kind, event, match, resume string
		var input, matched sql.NullString
		var from, created int64
		var until, matchedAt, delivered *int64
		if err := rows.Scan(&id, &run, &step, &kind, &event, &match, &input, &from, &until, &created, &matched, &matchedAt, &delivered, &resume); err != nil {
			return nil, s.fail(what, err)
		}
		w := &store.EventWait{ID: id, RunID: run, Step: step, Kind: kind, Event: event, Match: match,
			From: fromMicros(from), Until: fromNullMicros(until), CreatedAt: fromMicros(created),
			MatchedEventID: matched.String, MatchedAt: fromNullMicros(matchedAt), DeliveredAt: fromNullMicros(delivered), ResumeWith: resume}
		if input.Valid && input.String != "" {
			w.Input = []byte(input.String)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(what, err)
	}
	return out, nil
}

// WaitCandidates returns the events a wait may match, oldest first.
func (s *Store) WaitCandidates(ctx context.Context, w *store.EventWait) ([]*store.EventRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("wait candidates: %w", err)
	}
	q := "SELECT " + sentEventCols + " FROM sent_events WHERE name = ? AND at >= ?"
	args := []any{w.Event, micros(w.From)}
	if !w.Until.IsZero() {
		q += " AND at < ?"
		args = append(args, micros(w.Until))
	}
	q += " ORDER BY at, seq LIMIT ?"
	args = append(args, store.MaxWaitCandidates)
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("wait candidates", err)
	}
	defer rows.Close()
	var out []*store.EventRecord
	for rows.Next() {
		e, err := scanSentEvent(rows)
		if err != nil {
			return nil, s.fail("wait candidates", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("wait candidates", err)
	}
	return out, nil
}
