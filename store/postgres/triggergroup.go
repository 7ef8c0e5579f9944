package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.TriggerGroups = (*Store)(nil)

const groupCols = "id, trigger_name, key, status, closed, due_at, run_id, error, owner, token, lease_until, ended_at"

// JoinGroup ends a leased firing grouped and adds its event to a group,
// in one transaction; joins of a (trigger, key) are serialised by a
// transaction advisory lock, so two never open two groups.
func (s *Store) JoinGroup(ctx context.Context, p *store.JoinGroupParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("join group: %w", err)
	}
	end := s.inSchema(`WITH u AS (
		UPDATE §event_firings SET status = 'grouped', error = '', owner = '', lease_until = NULL, ended_at = $1
		WHERE event_id = $2 AND trigger_name = $3 AND token = $4 AND status = 'pending' RETURNING 1
	) SELECT (SELECT count(*) FROM u), EXISTS (SELECT 1 FROM §event_firings WHERE event_id = $2 AND trigger_name = $3)`)
	ins := s.inSchema(`INSERT INTO §trigger_group_events (trigger_name, event_id, group_id, seq, input, business_key, concurrency_key)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7) ON CONFLICT DO NOTHING`)
	var refusal error
	err := s.once(ctx, func(ctx context.Context) error {
		refusal = nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var n int64
			var found bool
			if err := tx.QueryRow(ctx, end, truncate(p.Now), p.Event.EventID, p.Trigger.Name, p.Token).Scan(&n, &found); err != nil {
				return err
			}
			if n == 0 {
				refusal = store.ErrFiringNotFound
				if found {
					refusal = store.ErrLeaseLost
				}
				return nil
			}
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended(length($1)::text || ':' || $1 || $2, 7433))", p.Trigger.Name, p.Key); err != nil {
				return err
			}
			gid, err := s.groupFor(ctx, tx, p)
			if err != nil {
				return err
			}
			e := p.Event
			var input *string
			if len(e.Input) > 0 {
				in := string(e.Input)
				input = &in
			}
			_, err = tx.Exec(ctx, ins, p.Trigger.Name, e.EventID, gid, e.Seq, input, e.BusinessKey, e.ConcurrencyKey)
			return err
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
func (s *Store) groupFor(ctx context.Context, tx pgx.Tx, p *store.JoinGroupParams) (int64, error) {
	t, now := p.Trigger, truncate(p.Now)
	if t.ThrottleLimit > 0 {
		due, err := s.throttleSlot(ctx, tx, p)
		if err != nil {
			return 0, err
		}
		return s.newGroup(ctx, tx, p, due, true)
	}
	var id, n int64
	err := tx.QueryRow(ctx, s.inSchema(`SELECT id, (SELECT count(*) FROM §trigger_group_events e WHERE e.group_id = g.id) FROM §trigger_groups g
		WHERE trigger_name = $1 AND key = $2 AND NOT closed AND status = 'open' AND due_at > $3 ORDER BY id DESC LIMIT 1 FOR UPDATE`),
		t.Name, p.Key, now).Scan(&id, &n)
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	if t.Debounce > 0 {
		due := truncate(store.GroupDue(t, p))
		if !found {
			return s.newGroup(ctx, tx, p, due, false)
		}
		_, err := tx.Exec(ctx, s.inSchema("UPDATE §trigger_groups SET due_at = GREATEST(due_at, $1) WHERE id = $2"), due, id)
		return id, err
	}
	if !found {
		if t.BatchSize <= 1 {
			return s.newGroup(ctx, tx, p, now, true)
		}
		return s.newGroup(ctx, tx, p, truncate(store.GroupDue(t, p)), false)
	}
	if int(n)+1 >= t.BatchSize {
		_, err := tx.Exec(ctx, s.inSchema("UPDATE §trigger_groups SET closed = true, due_at = $1 WHERE id = $2"), now, id)
		return id, err
	}
	return id, nil
}

func (s *Store) newGroup(ctx context.Context, tx pgx.Tx, p *store.JoinGroupParams, due time.Time, closed bool) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, s.inSchema("INSERT INTO §trigger_groups (trigger_name, key, closed, due_at) VALUES ($1, $2, $3, $4) RETURNING id"),
		p.Trigger.Name, p.Key, closed, due).Scan(&id)
	return id, err
}

// throttleSlot counts the event in the first throttle window with room
// from store.ThrottleStart and returns its start; it deletes the key's
// windows before that start, which no join counts again.
func (s *Store) throttleSlot(ctx context.Context, tx pgx.Tx, p *store.JoinGroupParams) (time.Time, error) {
	t := p.Trigger
	rows, err := tx.Query(ctx, s.inSchema("SELECT window_start, runs FROM §trigger_windows WHERE trigger_name = $1 AND key = $2 ORDER BY window_start"),
		t.Name, p.Key)
	if err != nil {
		return time.Time{}, err
	}
	counted, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ThrottleCount, error) {
		var c store.ThrottleCount
		err := r.Scan(&c.Start, &c.Runs)
		c.Start = c.Start.UTC()
		return c, err
	})
	if err != nil {
		return time.Time{}, err
	}
	start := store.ThrottleStart(p.Now, t.ThrottlePeriod, counted)
	if len(counted) > 0 && counted[0].Start.Before(start) {
		if _, err := tx.Exec(ctx, s.inSchema("DELETE FROM §trigger_windows WHERE trigger_name = $1 AND key = $2 AND window_start < $3"), t.Name, p.Key, start); err != nil {
			return time.Time{}, err
		}
	}
	slot := store.ThrottleSlot(start, t.ThrottlePeriod, t.ThrottleLimit, counted)
	_, err = tx.Exec(ctx, s.inSchema(`INSERT INTO §trigger_windows (trigger_name, key, window_start, runs) VALUES ($1, $2, $3, 1)
		ON CONFLICT (trigger_name, key, window_start) DO UPDATE SET runs = §trigger_windows.runs + 1`), t.Name, p.Key, slot)
	return slot, err
}

// ClaimGroups leases due groups, earliest due first; concurrent claims
// skip the rows another holds.
func (s *Store) ClaimGroups(ctx context.Context, p *store.ClaimGroupsParams) ([]*store.TriggerGroup, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim groups: %w", err)
	}
	if len(p.Triggers) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	sel := s.inSchema(`SELECT ` + groupCols + ` FROM §trigger_groups
		WHERE status = 'open' AND trigger_name = ANY($1::text[]) AND due_at <= $2 AND (lease_until IS NULL OR lease_until <= $2)
		ORDER BY due_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`)
	upd := s.inSchema(`UPDATE §trigger_groups g SET closed = true, owner = $1, token = x.token, lease_until = $2, run_id = x.run_id
		FROM unnest($3::int8[], $4::int8[], $5::text[]) AS x(id, token, run_id) WHERE g.id = x.id`)
	until := truncate(p.Now.Add(p.LeaseFor))
	var out []*store.TriggerGroup
	err := s.once(ctx, func(ctx context.Context) error {
		out = out[:0]
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, sel, p.Triggers, truncate(p.Now), p.Limit)
			if err != nil {
				return err
			}
			if out, err = pgx.CollectRows(rows, scanGroup); err != nil {
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
				g.Closed, g.Owner, g.LeaseUntil = true, p.Owner, until
			}
			if len(out) == 0 {
				return nil
			}
			ids, toks, runs := make([]int64, len(out)), make([]int64, len(out)), make([]string, len(out))
			for i, g := range out {
				ids[i], toks[i], runs[i] = g.ID, g.Token, g.RunID
			}
			if _, err := tx.Exec(ctx, upd, p.Owner, until, ids, toks, runs); err != nil {
				return err
			}
			return s.groupEvents(ctx, tx, out)
		})
	})
	if err != nil {
		return nil, s.fail("claim groups", err)
	}
	return out, nil
}

func scanGroup(r pgx.CollectableRow) (*store.TriggerGroup, error) {
	g := &store.TriggerGroup{}
	var lease, ended *time.Time
	if err := r.Scan(&g.ID, &g.Trigger, &g.Key, &g.Status, &g.Closed, &g.DueAt, &g.RunID, &g.Error, &g.Owner, &g.Token, &lease, &ended); err != nil {
		return nil, err
	}
	g.DueAt = g.DueAt.UTC()
	if lease != nil {
		g.LeaseUntil = lease.UTC()
	}
	if ended != nil {
		g.EndedAt = ended.UTC()
	}
	return g, nil
}

// groupEvents fills the events of groups, in event order.
func (s *Store) groupEvents(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, gs []*store.TriggerGroup) error {
	if len(gs) == 0 {
		return nil
	}
	byID := make(map[int64]*store.TriggerGroup, len(gs))
	ids := make([]int64, len(gs))
	for i, g := range gs {
		byID[g.ID], ids[i] = g, g.ID
	}
	rows, err := q.Query(ctx, s.inSchema(`SELECT group_id, event_id, seq, input::text, business_key, concurrency_key
		FROM §trigger_group_events WHERE group_id = ANY($1::int8[]) ORDER BY group_id, seq`), ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var gid int64
		var input *string
		e := &store.GroupEvent{}
		if err := rows.Scan(&gid, &e.EventID, &e.Seq, &input, &e.BusinessKey, &e.ConcurrencyKey); err != nil {
			return err
		}
		if input != nil {
			e.Input = json.RawMessage(*input)
		}
		byID[gid].Events = append(byID[gid].Events, e)
	}
	return rows.Err()
}

// EndGroup records what a leased group came to, fenced by its token.
func (s *Store) EndGroup(ctx context.Context, p *store.EndGroupParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("end group: %w", err)
	}
	q := s.inSchema(`WITH u AS (
		UPDATE §trigger_groups SET status = $1, error = $2, owner = '', lease_until = NULL, ended_at = $3
		WHERE id = $4 AND token = $5 AND status = 'open' RETURNING 1
	) SELECT (SELECT count(*) FROM u), EXISTS (SELECT 1 FROM §trigger_groups WHERE id = $4)`)
	var n int64
	var found bool
	err := s.once(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, q, p.Status, p.Error, truncate(p.Now), p.ID, p.Token).Scan(&n, &found)
	})
	if err != nil {
		return s.fail("end group", err)
	}
	switch {
	case n > 0:
		return nil
	case found:
		return fmt.Errorf("end group %d: %w", p.ID, store.ErrLeaseLost)
	}
	return fmt.Errorf("end group %d: %w", p.ID, store.ErrGroupNotFound)
}

// NextGroupDue returns when the next open group may be claimed.
func (s *Store) NextGroupDue(ctx context.Context, triggers []string) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next group due: %w", err)
	}
	if len(triggers) == 0 {
		return time.Time{}, false, nil
	}
	var at *time.Time
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.inSchema(`SELECT min(GREATEST(due_at, COALESCE(lease_until, due_at))) FROM §trigger_groups
			WHERE status = 'open' AND trigger_name = ANY($1::text[])`), triggers).Scan(&at)
	})
	if err != nil {
		return time.Time{}, false, s.fail("next group due", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return at.UTC(), true, nil
}

// ListTriggerGroups returns a trigger's groups with their events.
func (s *Store) ListTriggerGroups(ctx context.Context, p *store.ListTriggerGroupsParams) ([]*store.TriggerGroup, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list trigger groups: %w", err)
	}
	limit, err := store.CheckListTriggerGroups(p)
	if err != nil {
		return nil, err
	}
	var out []*store.TriggerGroup
	err = s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.inSchema("SELECT "+groupCols+" FROM §trigger_groups WHERE trigger_name = $1 AND id > $2 AND ($3 = '' OR status = $3) ORDER BY id LIMIT $4"),
			p.Trigger, p.AfterID, p.Status, limit)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, scanGroup); err != nil {
			return err
		}
		return s.groupEvents(ctx, s.pool, out)
	})
	if err != nil {
		return nil, s.fail("list trigger groups", err)
	}
	return out, nil
}
