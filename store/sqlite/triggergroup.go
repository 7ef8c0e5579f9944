package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.TriggerGroups = (*Store)(nil)

const groupCols = "id, trigger_name, key, status, closed, due_at, run_id, error, owner, token, lease_until, ended_at"

// JoinGroup ends a leased firing grouped and adds its event to a group,
// in one transaction (the writer is one connection: joins of a key are
// serialised).
func (s *Store) JoinGroup(ctx context.Context, p *store.JoinGroupParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("join group: %w", err)
	}
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			for _, a := range []driver.Value{micros(p.Now), p.Event.EventID, p.Trigger.Name, p.Token} {
				w.arg(a)
			}
			n, err := w.adhocExecN("UPDATE event_firings SET status = 'grouped', error = '', owner = '', lease_until = NULL, ended_at = ? " +
				"WHERE event_id = ? AND trigger_name = ? AND token = ? AND status = 'pending'")
			if err != nil {
				return err
			}
			if n == 0 {
				w.arg(p.Event.EventID)
				w.arg(p.Trigger.Name)
				found, err := w.adhocRow("SELECT 1 FROM event_firings WHERE event_id = ? AND trigger_name = ?", 1)
				refusal = store.ErrFiringNotFound
				if found {
					refusal = store.ErrLeaseLost
				}
				return err
			}
			gid, err := w.groupFor(p)
			if err != nil {
				return err
			}
			e := p.Event
			for _, a := range []driver.Value{p.Trigger.Name, e.EventID, gid, e.Seq, jsonArg(e.Input), e.BusinessKey, e.ConcurrencyKey} {
				w.arg(a)
			}
			return w.adhocExec("INSERT INTO trigger_group_events (trigger_name, event_id, group_id, seq, input, business_key, concurrency_key) " +
				"VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
		})
	})
	if err != nil {
		return s.fail("join group", err)
	}
	if refusal != nil {
		return fmt.Errorf("join group: event %q, trigger %q: %w", p.Event.EventID, p.Trigger.Name, refusal)
	}
	return nil
}

// groupFor returns the group the event of p joins, creating it or
// moving its deadline as the trigger's flow control says.
func (w *wconn) groupFor(p *store.JoinGroupParams) (int64, error) {
	t, now := p.Trigger, micros(p.Now)
	if t.ThrottleLimit > 0 {
		due, err := w.throttleSlot(p)
		if err != nil {
			return 0, err
		}
		return w.newGroup(p, due, true)
	}
	w.arg(t.Name)
	w.arg(p.Key)
	w.arg(now)
	found, err := w.adhocRow("SELECT id, (SELECT count(*) FROM trigger_group_events e WHERE e.group_id = g.id) FROM trigger_groups g "+
		"WHERE trigger_name = ? AND key = ? AND closed = 0 AND status = 'open' AND due_at > ? ORDER BY id DESC LIMIT 1", 2)
	if err != nil {
		return 0, err
	}
	if t.Debounce > 0 {
		due := micros(store.GroupDue(t, p))
		if !found {
			return w.newGroup(p, due, false)
		}
		id := w.dest[0].(int64)
		w.arg(due)
		w.arg(id)
		return id, w.adhocExec("UPDATE trigger_groups SET due_at = max(due_at, ?) WHERE id = ?")
	}
	if !found {
		if t.BatchSize <= 1 {
			return w.newGroup(p, now, true)
		}
		return w.newGroup(p, micros(store.GroupDue(t, p)), false)
	}
	id, n := w.dest[0].(int64), w.dest[1].(int64)
	if int(n)+1 >= t.BatchSize {
		w.arg(now)
		w.arg(id)
		return id, w.adhocExec("UPDATE trigger_groups SET closed = 1, due_at = ? WHERE id = ?")
	}
	return id, nil
}

func (w *wconn) newGroup(p *store.JoinGroupParams, due int64, closed bool) (int64, error) {
	for _, a := range []driver.Value{p.Trigger.Name, p.Key, boolInt(closed), due} {
		w.arg(a)
	}
	found, err := w.adhocRow("INSERT INTO trigger_groups (trigger_name, key, closed, due_at) VALUES (?, ?, ?, ?) RETURNING id", 1)
	if err != nil || !found {
		return 0, errors.Join(err, errors.New("no id for the new group"))
	}
	return w.dest[0].(int64), nil
}

// throttleSlot counts the event in the first throttle window with room
// from store.ThrottleStart and returns its start; it deletes the key's
// windows before that start, which no join counts again.
func (w *wconn) throttleSlot(p *store.JoinGroupParams) (int64, error) {
	t := p.Trigger
	var counted []store.ThrottleCount
	for _, a := range []driver.Value{t.Name, p.Key} {
		w.arg(a)
	}
	err := w.adhocRows("SELECT window_start, runs FROM trigger_windows WHERE trigger_name = ? AND key = ? ORDER BY window_start", 2,
		func(v []driver.Value) {
			counted = append(counted, store.ThrottleCount{Start: fromMicros(v[0].(int64)), Runs: int(v[1].(int64))})
		})
	if err != nil {
		return 0, err
	}
	start := store.ThrottleStart(p.Now, t.ThrottlePeriod, counted)
	if len(counted) > 0 && counted[0].Start.Before(start) {
		for _, a := range []driver.Value{t.Name, p.Key, micros(start)} {
			w.arg(a)
		}
		if err := w.adhocExec("DELETE FROM trigger_windows WHERE trigger_name = ? AND key = ? AND window_start < ?"); err != nil {
			return 0, err
		}
	}
	slot := micros(store.ThrottleSlot(start, t.ThrottlePeriod, t.ThrottleLimit, counted))
	for _, a := range []driver.Value{t.Name, p.Key, slot} {
		w.arg(a)
	}
	return slot, w.adhocExec("INSERT INTO trigger_windows (trigger_name, key, window_start, runs) VALUES (?, ?, ?, 1) " +
		"ON CONFLICT (trigger_name, key, window_start) DO UPDATE SET runs = runs + 1")
}

// ClaimGroups leases due groups, earliest due first.
func (s *Store) ClaimGroups(ctx context.Context, p *store.ClaimGroupsParams) ([]*store.TriggerGroup, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim groups: %w", err)
	}
	if len(p.Triggers) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	names, err := json.Marshal(p.Triggers)
	if err != nil {
		return nil, err
	}
	now, until := micros(p.Now), micros(p.Now.Add(p.LeaseFor))
	var out []*store.TriggerGroup
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			out = out[:0]
			w.arg(string(names))
			w.arg(now)
			w.arg(int64(p.Limit))
			err := w.adhocRows("SELECT "+groupCols+" FROM trigger_groups WHERE status = 'open' AND trigger_name IN (SELECT value FROM json_each(?1)) "+
				"AND due_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2) ORDER BY due_at, id LIMIT ?3", 12, func(v []driver.Value) {
				out = append(out, groupFromValues(v))
			})
			if err != nil {
				return err
			}
			next := 0
			for i, g := range out {
				if g.RunID == "" {
					if next == len(p.RunIDs) {
						out = out[:i]
						break
					}
					g.RunID = p.RunIDs[next]
					next++
				}
				g.Token++
				g.Closed, g.Owner, g.LeaseUntil = true, p.Owner, fromMicros(until)
				for _, a := range []driver.Value{p.Owner, g.Token, until, g.RunID, g.ID} {
					w.arg(a)
				}
				if err := w.adhocExec("UPDATE trigger_groups SET closed = 1, owner = ?, token = ?, lease_until = ?, run_id = ? WHERE id = ?"); err != nil {
					return err
				}
			}
			for _, g := range out {
				if g.Events, err = w.groupEvents(g.ID); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, s.fail("claim groups", err)
	}
	return out, nil
}

func groupFromValues(v []driver.Value) *store.TriggerGroup {
	g := &store.TriggerGroup{ID: v[0].(int64), Trigger: str(v[1]), Key: str(v[2]), Status: str(v[3]), Closed: vInt(v[4]) != 0,
		DueAt: fromMicros(v[5].(int64)), RunID: str(v[6]), Error: str(v[7]), Owner: str(v[8]), Token: v[9].(int64)}
	if l, ok := v[10].(int64); ok {
		g.LeaseUntil = fromMicros(l)
	}
	if e, ok := v[11].(int64); ok {
		g.EndedAt = fromMicros(e)
	}
	return g
}

func (w *wconn) groupEvents(id int64) ([]*store.GroupEvent, error) {
	var out []*store.GroupEvent
	w.arg(id)
	err := w.adhocRows("SELECT event_id, seq, input, business_key, concurrency_key FROM trigger_group_events WHERE group_id = ? ORDER BY seq", 5,
		func(v []driver.Value) {
			out = append(out, &store.GroupEvent{EventID: str(v[0]), Seq: v[1].(int64), Input: vJSON(v[2]), BusinessKey: str(v[3]), ConcurrencyKey: str(v[4])})
		})
	return out, err
}

// EndGroup records what a leased group came to, fenced by its token.
func (s *Store) EndGroup(ctx context.Context, p *store.EndGroupParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("end group: %w", err)
	}
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			for _, a := range []driver.Value{p.Status, p.Error, micros(p.Now), p.ID, p.Token} {
				w.arg(a)
			}
			n, err := w.adhocExecN("UPDATE trigger_groups SET status = ?, error = ?, owner = '', lease_until = NULL, ended_at = ? " +
				"WHERE id = ? AND token = ? AND status = 'open'")
			if err != nil || n > 0 {
				return err
			}
			w.arg(p.ID)
			found, err := w.adhocRow("SELECT 1 FROM trigger_groups WHERE id = ?", 1)
			refusal = store.ErrGroupNotFound
			if found {
				refusal = store.ErrLeaseLost
			}
			return err
		})
	})
	if err != nil {
		return s.fail("end group", err)
	}
	if refusal != nil {
		return fmt.Errorf("end group %d: %w", p.ID, refusal)
	}
	return nil
}

// NextGroupDue returns when the next open group may be claimed.
func (s *Store) NextGroupDue(ctx context.Context, triggers []string) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next group due: %w", err)
	}
	if len(triggers) == 0 {
		return time.Time{}, false, nil
	}
	names, err := json.Marshal(triggers)
	if err != nil {
		return time.Time{}, false, err
	}
	var at *int64
	err = s.reader.QueryRowContext(ctx, "SELECT min(max(due_at, coalesce(lease_until, 0))) FROM trigger_groups "+
		"WHERE status = 'open' AND trigger_name IN (SELECT value FROM json_each(?))", string(names)).Scan(&at)
	if err != nil {
		return time.Time{}, false, s.fail("next group due", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return fromMicros(*at), true, nil
}

// ListTriggerGroups returns a page of a trigger's groups with their
// events.
func (s *Store) ListTriggerGroups(ctx context.Context, p *store.ListTriggerGroupsParams) ([]*store.TriggerGroup, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list trigger groups: %w", err)
	}
	limit, err := store.CheckListTriggerGroups(p)
	if err != nil {
		return nil, err
	}
	var out []*store.TriggerGroup
	err = s.withWriter(ctx, func(w *wconn) error {
		out = out[:0]
		for _, a := range []driver.Value{p.Trigger, p.AfterID, p.Status, p.Status, int64(limit)} {
			w.arg(a)
		}
		err := w.adhocRows("SELECT "+groupCols+" FROM trigger_groups WHERE trigger_name = ? AND id > ? AND (? = '' OR status = ?) ORDER BY id LIMIT ?", 12, func(v []driver.Value) {
			out = append(out, groupFromValues(v))
		})
		if err != nil {
			return err
		}
		for _, g := range out {
			if g.Events, err = w.groupEvents(g.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("list trigger groups", err)
	}
	return out, nil
}
