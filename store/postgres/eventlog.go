package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var (
	_ store.Events   = (*Store)(nil)
	_ store.Triggers = (*Store)(nil)
)

const sentEventCols = "seq, id, name, data::text, at"

// inSchema puts a statement in the store's schema.
func (s *Store) inSchema(q string) string { return strings.ReplaceAll(q, "§", `"`+s.schema+`".`) }

// SendEvent stores an event and its firings in one statement, once per
// id. A re-run (a retry after a lost answer) finds the event stored.
func (s *Store) SendEvent(ctx context.Context, p *store.SendEventParams) (*store.EventRecord, bool, error) {
	if err := s.check(); err != nil {
		return nil, false, fmt.Errorf("send event: %w", err)
	}
	if err := store.CheckEvent(p.Event); err != nil {
		return nil, false, err
	}
	e := p.Event
	q := s.inSchema(`WITH ins AS (
		INSERT INTO §sent_events (id, name, data, at) VALUES ($1, $2, $3::text::jsonb, $4) ON CONFLICT (id) DO NOTHING
		RETURNING seq, id, name, data, at
	), f AS (
		INSERT INTO §event_firings (event_id, trigger_name, seq) SELECT ins.id, t.name, ins.seq FROM ins JOIN §triggers t ON t.event = ins.name
	)
	SELECT seq, id, name, data::text, at FROM ins`)
	var out *store.EventRecord
	existed := false
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanSentEvent(s.pool.QueryRow(ctx, q, e.ID, e.Name, textArg(e.Data), truncate(e.At)))
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Stored before (perhaps by a send that committed while this one
		// waited on the id): a new statement sees it.
		existed = true
		out, err = scanSentEvent(s.pool.QueryRow(ctx, s.inSchema("SELECT "+sentEventCols+" FROM §sent_events WHERE id = $1"), e.ID))
		return err
	})
	if err != nil {
		return nil, false, s.fail("send event", err)
	}
	return out, existed, nil
}

func scanSentEvent(row pgx.Row) (*store.EventRecord, error) {
	var e store.EventRecord
	var data *string
	if err := row.Scan(&e.Seq, &e.ID, &e.Name, &data, &e.At); err != nil {
		return nil, err
	}
	if data != nil {
		e.Data = json.RawMessage(*data)
	}
	e.At = e.At.UTC()
	return &e, nil
}

// GetEvent returns an event by id.
func (s *Store) GetEvent(ctx context.Context, id string) (*store.EventRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get event: %w", err)
	}
	var e *store.EventRecord
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		e, err = scanSentEvent(s.pool.QueryRow(ctx, s.inSchema("SELECT "+sentEventCols+" FROM §sent_events WHERE id = $1"), id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get event %q: %w", id, store.ErrEventNotFound)
	}
	if err != nil {
		return nil, s.fail("get event", err)
	}
	return e, nil
}

// ListEvents returns events newest first, filtered.
func (s *Store) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*store.EventRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	f, err := store.CheckEventField(p)
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		for _, v := range a {
			args = append(args, v)
			cond = strings.Replace(cond, "$?", fmt.Sprintf("$%d", len(args)), 1)
		}
		where = append(where, cond)
	}
	if p.Name != "" {
		add("name = $?", p.Name)
	}
	if !p.After.IsZero() {
		add("at >= $?", truncate(p.After))
	}
	if !p.Before.IsZero() {
		add("at < $?", truncate(p.Before))
	}
	if p.BeforeSeq > 0 {
		add("seq < $?", p.BeforeSeq)
	}
	if f != nil {
		switch f.Kind {
		case "string":
			add("jsonb_typeof(data #> $?::text[]) = 'string' AND data #>> $?::text[] = $?", f.Path, f.Path, f.Text)
		case "bool":
			add("data #> $?::text[] = $?::text::jsonb", f.Path, f.Text)
		default:
			add("jsonb_typeof(data #> $?::text[]) = 'number' AND (data #>> $?::text[])::numeric = $?::text::numeric", f.Path, f.Path, f.Text)
		}
	}
	q := "SELECT " + sentEventCols + " FROM §sent_events"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, store.EventsLimit(p.Limit))
	q = s.inSchema(q + fmt.Sprintf(" ORDER BY seq DESC LIMIT $%d", len(args)))
	var out []*store.EventRecord
	err = s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, q, args...)
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
		return nil, s.fail("list events", err)
	}
	return out, nil
}

// PruneEvents deletes the oldest events stored before p.Before, with
// their firings, and the trigger groups that ended before it, with their
// events, in one statement.
func (s *Store) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	limit := p.Limit
	if limit <= 0 || limit > store.MaxEventsPage {
		limit = store.MaxEventsPage
	}
	q := s.inSchema(`WITH d AS (
		DELETE FROM §sent_events WHERE seq IN (SELECT seq FROM §sent_events WHERE at < $1 ORDER BY at, seq LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING id
	), f AS (
		DELETE FROM §event_firings WHERE event_id IN (SELECT id FROM d)
	), g AS (
		DELETE FROM §trigger_groups WHERE id IN (SELECT id FROM §trigger_groups WHERE status <> 'open' AND ended_at < $1
			ORDER BY ended_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING id
	), ge AS (
		DELETE FROM §trigger_group_events WHERE group_id IN (SELECT id FROM g)
	), tw AS (
		DELETE FROM §trigger_windows WHERE (trigger_name, key, window_start) IN (
			SELECT w.trigger_name, w.key, w.window_start FROM §trigger_windows w LEFT JOIN §triggers t ON t.name = w.trigger_name
			WHERE w.window_start < $1 AND w.window_start + COALESCE(t.throttle_period_us, 0) * interval '1 microsecond' <= $1
			LIMIT $2 FOR UPDATE OF w SKIP LOCKED)
	)
	SELECT count(*) FROM d`)
	var n int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, q, truncate(p.Before), limit).Scan(&n)
	})
	if err != nil {
		return 0, s.fail("prune events", err)
	}
	return int(n), nil
}

const triggerCols = "name, event, target_kind, target_name, filter, input, declared, created_at, updated_at, business_key, concurrency_key, " +
	"group_key, debounce_us, throttle_limit, throttle_period_us, batch_size, batch_window_us"

// PutTriggers creates or replaces triggers, in one transaction.
func (s *Store) PutTriggers(ctx context.Context, p *store.PutTriggersParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("put triggers: %w", err)
	}
	for _, t := range p.Triggers {
		if err := store.CheckTrigger(t); err != nil {
			return err
		}
	}
	q := s.inSchema("INSERT INTO §triggers (" + triggerCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12, $13, $14, $15, $16) " +
		"ON CONFLICT (name) DO UPDATE SET event = $2, target_kind = $3, target_name = $4, filter = $5, input = $6, declared = $7, updated_at = $8, " +
		"business_key = $9, concurrency_key = $10, group_key = $11, debounce_us = $12, throttle_limit = $13, throttle_period_us = $14, " +
		"batch_size = $15, batch_window_us = $16")
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for _, t := range p.Triggers {
				if _, err := tx.Exec(ctx, q, t.Name, t.Event, t.TargetKind, t.TargetName, t.Filter, t.Input, t.Declared, truncate(p.Now), t.BusinessKey, t.ConcurrencyKey,
					t.Key, t.Debounce.Microseconds(), t.ThrottleLimit, t.ThrottlePeriod.Microseconds(), t.BatchSize, t.BatchWindow.Microseconds()); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return s.fail("put triggers", err)
	}
	return nil
}

// ListTriggers returns every trigger by name.
func (s *Store) ListTriggers(ctx context.Context) ([]*store.Trigger, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	var out []*store.Trigger
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.inSchema("SELECT "+triggerCols+" FROM §triggers ORDER BY name"))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t store.Trigger
			var debounce, period, window int64
			if err := rows.Scan(&t.Name, &t.Event, &t.TargetKind, &t.TargetName, &t.Filter, &t.Input, &t.Declared, &t.CreatedAt, &t.UpdatedAt, &t.BusinessKey, &t.ConcurrencyKey,
				&t.Key, &debounce, &t.ThrottleLimit, &period, &t.BatchSize, &window); err != nil {
				return err
			}
			t.Debounce, t.ThrottlePeriod, t.BatchWindow = time.Duration(debounce)*time.Microsecond, time.Duration(period)*time.Microsecond, time.Duration(window)*time.Microsecond
			t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
			out = append(out, &t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("list triggers", err)
	}
	return out, nil
}

// DeleteTrigger deletes a trigger, its pending firings and its open
// groups.
func (s *Store) DeleteTrigger(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete trigger: %w", err)
	}
	q := s.inSchema(`WITH d AS (DELETE FROM §triggers WHERE name = $1 RETURNING name),
		f AS (DELETE FROM §event_firings WHERE trigger_name = $1 AND status = 'pending'),
		g AS (DELETE FROM §trigger_groups WHERE trigger_name = $1 AND status = 'open' RETURNING id),
		ge AS (DELETE FROM §trigger_group_events WHERE group_id IN (SELECT id FROM g)),
		w AS (DELETE FROM §trigger_windows WHERE trigger_name = $1)
		SELECT count(*) FROM d`)
	var n int64
	err := s.once(ctx, func(ctx context.Context) error { return s.pool.QueryRow(ctx, q, name).Scan(&n) })
	if err != nil {
		return s.fail("delete trigger", err)
	}
	if n == 0 {
		return fmt.Errorf("delete trigger %q: %w", name, store.ErrTriggerNotFound)
	}
	return nil
}

// ClaimFirings leases pending firings of some triggers, oldest event
// first; concurrent claims skip the rows another holds.
func (s *Store) ClaimFirings(ctx context.Context, p *store.ClaimFiringsParams) ([]*store.Firing, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim firings: %w", err)
	}
	if len(p.Triggers) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	sel := s.inSchema(`SELECT f.event_id, f.trigger_name, f.seq, f.run_id, f.token, e.name, e.data::text, e.at
		FROM §event_firings f JOIN §sent_events e ON e.id = f.event_id
		WHERE f.status = 'pending' AND f.trigger_name = ANY($1::text[]) AND (f.lease_until IS NULL OR f.lease_until <= $2)
		ORDER BY f.seq, f.trigger_name LIMIT $3 FOR UPDATE OF f SKIP LOCKED`)
	upd := s.inSchema(`UPDATE §event_firings f SET owner = $1, token = x.token, lease_until = $2, run_id = x.run_id
		FROM unnest($3::text[], $4::text[], $5::int8[], $6::text[]) AS x(event_id, trigger_name, token, run_id)
		WHERE f.event_id = x.event_id AND f.trigger_name = x.trigger_name`)
	until := truncate(p.Now.Add(p.LeaseFor))
	var out []*store.Firing
	err := s.once(ctx, func(ctx context.Context) error {
		out = out[:0]
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, sel, p.Triggers, truncate(p.Now), p.Limit)
			if err != nil {
				return err
			}
			out, err = scanClaimed(rows, p, until)
			if err != nil || len(out) == 0 {
				return err
			}
			ev, tr, tok, run := make([]string, len(out)), make([]string, len(out)), make([]int64, len(out)), make([]string, len(out))
			for i, f := range out {
				ev[i], tr[i], tok[i], run[i] = f.EventID, f.Trigger, f.Token, f.RunID
			}
			_, err = tx.Exec(ctx, upd, p.Owner, until, ev, tr, tok, run)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("claim firings", err)
	}
	return out, nil
}

// scanClaimed reads the firings selected for a claim and gives them
// their lease and, where they have none, a run id of p.RunIDs; it stops
// at the first that needs one when none is left.
func scanClaimed(rows pgx.Rows, p *store.ClaimFiringsParams, until time.Time) ([]*store.Firing, error) {
	defer rows.Close()
	var out []*store.Firing
	next := 0
	for rows.Next() {
		f := &store.Firing{Status: store.FiringPending, Owner: p.Owner, LeaseUntil: until, Event: &store.EventRecord{}}
		var data *string
		if err := rows.Scan(&f.EventID, &f.Trigger, &f.Seq, &f.RunID, &f.Token, &f.Event.Name, &data, &f.Event.At); err != nil {
			return nil, err
		}
		if f.RunID == "" {
			if next == len(p.RunIDs) {
				break
			}
			f.RunID = p.RunIDs[next]
			next++
		}
		f.Token++
		f.Event.ID, f.Event.Seq, f.Event.At = f.EventID, f.Seq, f.Event.At.UTC()
		if data != nil {
			f.Event.Data = json.RawMessage(*data)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// EndFiring records what a leased firing came to, fenced by its token.
func (s *Store) EndFiring(ctx context.Context, p *store.EndFiringParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("end firing: %w", err)
	}
	q := s.inSchema(`WITH u AS (
		UPDATE §event_firings SET status = $1, error = $2, owner = '', lease_until = NULL, ended_at = $3
		WHERE event_id = $4 AND trigger_name = $5 AND token = $6 AND status = 'pending' RETURNING 1
	) SELECT (SELECT count(*) FROM u), EXISTS (SELECT 1 FROM §event_firings WHERE event_id = $4 AND trigger_name = $5)`)
	var n int64
	var found bool
	err := s.once(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, q, p.Status, p.Error, truncate(p.Now), p.EventID, p.Trigger, p.Token).Scan(&n, &found)
	})
	if err != nil {
		return s.fail("end firing", err)
	}
	switch {
	case n > 0:
		return nil
	case found:
		return fmt.Errorf("end firing of event %q by trigger %q: %w", p.EventID, p.Trigger, store.ErrLeaseLost)
	}
	return fmt.Errorf("end firing of event %q by trigger %q: %w", p.EventID, p.Trigger, store.ErrFiringNotFound)
}

// Firings returns the firings of an event, by trigger.
func (s *Store) Firings(ctx context.Context, eventID string) ([]*store.Firing, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("firings: %w", err)
	}
	var out []*store.Firing
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.inSchema(`SELECT event_id, trigger_name, seq, status, run_id, error, owner, token, lease_until, ended_at
			FROM §event_firings WHERE event_id = $1 ORDER BY trigger_name`), eventID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f store.Firing
			var lease, ended *time.Time
			if err := rows.Scan(&f.EventID, &f.Trigger, &f.Seq, &f.Status, &f.RunID, &f.Error, &f.Owner, &f.Token, &lease, &ended); err != nil {
				return err
			}
			if lease != nil {
				f.LeaseUntil = lease.UTC()
			}
			if ended != nil {
				f.EndedAt = ended.UTC()
			}
			out = append(out, &f)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("firings", err)
	}
	return out, nil
}
