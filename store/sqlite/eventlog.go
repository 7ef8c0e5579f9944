package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var (
	_ store.Events   = (*Store)(nil)
	_ store.Triggers = (*Store)(nil)
)

const (
	sentEventCols  = "seq, id, name, data, at"
	qEventInsert   = "INSERT INTO sent_events (id, name, data, at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
	qEventByID     = "SELECT " + sentEventCols + " FROM sent_events WHERE id = ?"
	qFiringsInsert = "INSERT INTO event_firings (event_id, trigger_name, seq) " +
		"SELECT ?1, t.name, (SELECT seq FROM sent_events WHERE id = ?1) FROM triggers t WHERE t.event = ?2"
)

// SendEvent stores an event and its firings, once per id.
func (s *Store) SendEvent(ctx context.Context, p *store.SendEventParams) (*store.EventRecord, bool, error) {
	if err := s.check(); err != nil {
		return nil, false, fmt.Errorf("send event: %w", err)
	}
	if err := store.CheckEvent(p.Event); err != nil {
		return nil, false, err
	}
	e := p.Event
	var out *store.EventRecord
	var existed bool
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(e.ID)
			w.arg(e.Name)
			w.arg(jsonArg(e.Data))
			w.arg(micros(e.At))
			n, err := w.adhocExecN(qEventInsert)
			if err != nil {
				return err
			}
			existed = n == 0
			if !existed {
				w.arg(e.ID)
				w.arg(e.Name)
				if err := w.adhocExec(qFiringsInsert); err != nil {
					return fmt.Errorf("firings: %w", err)
				}
			}
			w.arg(e.ID)
			found, err := w.adhocRow(qEventByID, 5)
			if err != nil || !found {
				return errors.Join(err, errors.New("the event is not there after its insert"))
			}
			out = eventFromValues(w.dest)
			return nil
		})
	})
	if err != nil {
		return nil, false, s.fail("send event", err)
	}
	return out, existed, nil
}

func eventFromValues(v []driver.Value) *store.EventRecord {
	return &store.EventRecord{Seq: v[0].(int64), ID: str(v[1]), Name: str(v[2]), Data: vJSON(v[3]), At: fromMicros(v[4].(int64))}
}

func scanSentEvent(sc interface{ Scan(...any) error }) (*store.EventRecord, error) {
	var e store.EventRecord
	var data sql.NullString
	var at int64
	if err := sc.Scan(&e.Seq, &e.ID, &e.Name, &data, &at); err != nil {
		return nil, err
	}
	if data.Valid && data.String != "" {
		e.Data = json.RawMessage(data.String)
	}
	e.At = fromMicros(at)
	return &e, nil
}

// GetEvent returns an event by id.
func (s *Store) GetEvent(ctx context.Context, id string) (*store.EventRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get event: %w", err)
	}
	e, err := scanSentEvent(s.reader.QueryRowContext(ctx, qEventByID, id))
	if errors.Is(err, sql.ErrNoRows) {
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
		where = append(where, cond)
		args = append(args, a...)
	}
	if p.Name != "" {
		add("name = ?", p.Name)
	}
	if !p.After.IsZero() {
		add("at >= ?", micros(p.After))
	}
	if !p.Before.IsZero() {
		add("at < ?", micros(p.Before))
	}
	if p.BeforeSeq > 0 {
		add("seq < ?", p.BeforeSeq)
	}
	if f != nil {
		path := `$."` + strings.Join(f.Path, `"."`) + `"`
		switch f.Kind {
		case "string":
			add("json_type(data, ?) = 'text' AND json_extract(data, ?) = ?", path, path, f.Text)
		case "bool":
			add("json_type(data, ?) = ?", path, f.Text)
		default:
			add("json_type(data, ?) IN ('integer', 'real') AND json_extract(data, ?) = ?", path, path, f.Number)
		}
	}
	q := "SELECT " + sentEventCols + " FROM sent_events"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	args = append(args, store.EventsLimit(p.Limit))
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list events", err)
	}
	defer rows.Close()
	var out []*store.EventRecord
	for rows.Next() {
		e, err := scanSentEvent(rows)
		if err != nil {
			return nil, s.fail("list events", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list events", err)
	}
	return out, nil
}

// PruneEvents deletes the oldest events stored before p.Before, with
// their firings.
func (s *Store) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	limit := p.Limit
	if limit <= 0 || limit > store.MaxEventsPage {
		limit = store.MaxEventsPage
	}
	const pick = "SELECT id FROM sent_events WHERE at < ?1 ORDER BY at, seq LIMIT ?2"
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(micros(p.Before))
			w.arg(int64(limit))
			if err := w.adhocExec("DELETE FROM event_firings WHERE event_id IN (" + pick + ")"); err != nil {
				return err
			}
			w.arg(micros(p.Before))
			w.arg(int64(limit))
			var err error
			if n, err = w.adhocExecN("DELETE FROM sent_events WHERE id IN (" + pick + ")"); err != nil {
				return err
			}
			const ended = "SELECT id FROM trigger_groups WHERE status <> 'open' AND ended_at < ?1 ORDER BY ended_at LIMIT ?2"
			w.arg(micros(p.Before))
			w.arg(int64(limit))
			if err := w.adhocExec("DELETE FROM trigger_group_events WHERE group_id IN (" + ended + ")"); err != nil {
				return err
			}
			w.arg(micros(p.Before))
			w.arg(int64(limit))
			if err := w.adhocExec("DELETE FROM trigger_groups WHERE id IN (" + ended + ")"); err != nil {
				return err
			}
			w.arg(micros(p.Before))
			w.arg(int64(limit))
			return w.adhocExec(`DELETE FROM trigger_windows WHERE rowid IN (SELECT w.rowid FROM trigger_windows w
				LEFT JOIN triggers t ON t.name = w.trigger_name
				WHERE w.window_start < ?1 AND w.window_start + COALESCE(t.throttle_period_us, 0) <= ?1 LIMIT ?2)`)
		})
	})
	if err != nil {
		return 0, s.fail("prune events", err)
	}
	return int(n), nil
}

const triggerCols = "name, event, target_kind, target_name, filter, input, declared, created_at, updated_at, business_key, concurrency_key, " +
	"group_key, debounce_us, throttle_limit, throttle_period_us, batch_size, batch_window_us"

// PutTriggers creates or replaces triggers.
func (s *Store) PutTriggers(ctx context.Context, p *store.PutTriggersParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("put triggers: %w", err)
	}
	for _, t := range p.Triggers {
		if err := store.CheckTrigger(t); err != nil {
			return err
		}
	}
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, t := range p.Triggers {
				for _, a := range []driver.Value{t.Name, t.Event, t.TargetKind, t.TargetName, t.Filter, t.Input, boolInt(t.Declared), micros(p.Now), t.BusinessKey, t.ConcurrencyKey,
					t.Key, t.Debounce.Microseconds(), int64(t.ThrottleLimit), t.ThrottlePeriod.Microseconds(), int64(t.BatchSize), t.BatchWindow.Microseconds()} {
					w.arg(a)
				}
				if err := w.adhocExec("INSERT INTO triggers (" + triggerCols + ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) " +
					"ON CONFLICT (name) DO UPDATE SET event = ?2, target_kind = ?3, target_name = ?4, filter = ?5, input = ?6, " +
					"declared = ?7, updated_at = ?8, business_key = ?9, concurrency_key = ?10, group_key = ?11, debounce_us = ?12, " +
					"throttle_limit = ?13, throttle_period_us = ?14, batch_size = ?15, batch_window_us = ?16"); err != nil {
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
	rows, err := s.reader.QueryContext(ctx, "SELECT "+triggerCols+" FROM triggers ORDER BY name")
	if err != nil {
		return nil, s.fail("list triggers", err)
	}
	defer rows.Close()
	var out []*store.Trigger
	for rows.Next() {
		var t store.Trigger
		var declared, created, updated, debounce, period, window int64
		if err := rows.Scan(&t.Name, &t.Event, &t.TargetKind, &t.TargetName, &t.Filter, &t.Input, &declared, &created, &updated, &t.BusinessKey, &t.ConcurrencyKey,
			&t.Key, &debounce, &t.ThrottleLimit, &period, &t.BatchSize, &window); err != nil {
			return nil, s.fail("list triggers", err)
		}
		t.Debounce, t.ThrottlePeriod, t.BatchWindow = time.Duration(debounce)*time.Microsecond, time.Duration(period)*time.Microsecond, time.Duration(window)*time.Microsecond
		t.Declared, t.CreatedAt, t.UpdatedAt = declared != 0, fromMicros(created), fromMicros(updated)
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
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
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(name)
			var err error
			if n, err = w.adhocExecN("DELETE FROM triggers WHERE name = ?"); err != nil {
				return err
			}
			for _, q := range []string{
				"DELETE FROM event_firings WHERE trigger_name = ? AND status = 'pending'",
				"DELETE FROM trigger_group_events WHERE group_id IN (SELECT id FROM trigger_groups WHERE trigger_name = ? AND status = 'open')",
				"DELETE FROM trigger_groups WHERE trigger_name = ? AND status = 'open'",
				"DELETE FROM trigger_windows WHERE trigger_name = ?",
			} {
				w.arg(name)
				if err := w.adhocExec(q); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return s.fail("delete trigger", err)
	}
	if n == 0 {
		return fmt.Errorf("delete trigger %q: %w", name, store.ErrTriggerNotFound)
	}
	return nil
}

// ClaimFirings leases pending firings of some triggers, oldest event
// first.
func (s *Store) ClaimFirings(ctx context.Context, p *store.ClaimFiringsParams) ([]*store.Firing, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim firings: %w", err)
	}
	if len(p.Triggers) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	names, err := json.Marshal(p.Triggers)
	if err != nil {
		return nil, err
	}
	now, until := micros(p.Now), micros(p.Now.Add(p.LeaseFor))
	var out []*store.Firing
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			out = out[:0]
			w.arg(string(names))
			w.arg(now)
			w.arg(int64(p.Limit))
			err := w.adhocRows("SELECT f.event_id, f.trigger_name, f.seq, f.run_id, f.token, e.name, e.data, e.at "+
				"FROM event_firings f JOIN sent_events e ON e.id = f.event_id "+
				"WHERE f.status = 'pending' AND f.trigger_name IN (SELECT value FROM json_each(?1)) "+
				"AND (f.lease_until IS NULL OR f.lease_until <= ?2) ORDER BY f.seq, f.trigger_name LIMIT ?3", 8, func(v []driver.Value) {
				f := &store.Firing{EventID: str(v[0]), Trigger: str(v[1]), Seq: v[2].(int64), RunID: str(v[3]),
					Token: v[4].(int64), Status: store.FiringPending, Owner: p.Owner, LeaseUntil: fromMicros(until)}
				f.Event = &store.EventRecord{ID: f.EventID, Name: str(v[5]), Data: vJSON(v[6]), Seq: f.Seq, At: fromMicros(v[7].(int64))}
				out = append(out, f)
			})
			if err != nil {
				return err
			}
			k, err := claimEach(w, p, out, until)
			out = out[:k]
			return err
		})
	})
	if err != nil {
		return nil, s.fail("claim firings", err)
	}
	return out, nil
}

// claimEach leases the firings selected, giving a run id to those
// without one, and returns how many it leased: it stops at the first that
// needs a run id when p.RunIDs has none left.
func claimEach(w *wconn, p *store.ClaimFiringsParams, fs []*store.Firing, until int64) (int, error) {
	next := 0
	for i, f := range fs {
		if f.RunID == "" {
			if next == len(p.RunIDs) {
				return i, nil
			}
			f.RunID = p.RunIDs[next]
			next++
		}
		f.Token++
		for _, a := range []driver.Value{p.Owner, f.Token, until, f.RunID, f.EventID, f.Trigger} {
			w.arg(a)
		}
		if err := w.adhocExec("UPDATE event_firings SET owner = ?, token = ?, lease_until = ?, run_id = ? WHERE event_id = ? AND trigger_name = ?"); err != nil {
			return i, err
		}
	}
	return len(fs), nil
}

// EndFiring records what a leased firing came to.
func (s *Store) EndFiring(ctx context.Context, p *store.EndFiringParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("end firing: %w", err)
	}
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			for _, a := range []driver.Value{p.Status, p.Error, micros(p.Now), p.EventID, p.Trigger, p.Token} {
				w.arg(a)
			}
			n, err := w.adhocExecN("UPDATE event_firings SET status = ?, error = ?, owner = '', lease_until = NULL, ended_at = ? " +
				"WHERE event_id = ? AND trigger_name = ? AND token = ? AND status = 'pending'")
			if err != nil || n > 0 {
				return err
			}
			w.arg(p.EventID)
			w.arg(p.Trigger)
			found, err := w.adhocRow("SELECT 1 FROM event_firings WHERE event_id = ? AND trigger_name = ?", 1)
			refusal = store.ErrFiringNotFound
			if found {
				refusal = store.ErrLeaseLost
			}
			return err
		})
	})
	if err != nil {
		return s.fail("end firing", err)
	}
	if refusal != nil {
		return fmt.Errorf("end firing of event %q by trigger %q: %w", p.EventID, p.Trigger, refusal)
	}
	return nil
}

// Firings returns the firings of an event, by trigger.
func (s *Store) Firings(ctx context.Context, eventID string) ([]*store.Firing, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("firings: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT event_id, trigger_name, seq, status, run_id, error, owner, token, lease_until, ended_at "+
		"FROM event_firings WHERE event_id = ? ORDER BY trigger_name", eventID)
	if err != nil {
		return nil, s.fail("firings", err)
	}
	defer rows.Close()
	var out []*store.Firing
	for rows.Next() {
		var f store.Firing
		var lease, ended *int64
		if err := rows.Scan(&f.EventID, &f.Trigger, &f.Seq, &f.Status, &f.RunID, &f.Error, &f.Owner, &f.Token, &lease, &ended); err != nil {
			return nil, s.fail("firings", err)
		}
		f.LeaseUntil, f.EndedAt = fromNullMicros(lease), fromNullMicros(ended)
		out = append(out, &f)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("firings", err)
	}
	return out, nil
}
