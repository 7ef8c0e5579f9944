package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// claimQuery selects up to ?3 claimable tasks of the queues selected by
// queueCond (over ?1) at time ?2, in claim order: ready, and nobody holds
// a live lease on them.
//
// The limit is written "?3 + 0": with a bare "LIMIT ?" the planner takes
// the bound value into account, so SQLite prepares the statement again on
// every call with a new limit — a fifth of the CPU of a busy worker.
func claimQuery(queueCond string) string {
	return `SELECT ` + taskCols + ` FROM tasks
		WHERE ` + queueCond + ` AND ready_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2)
		ORDER BY priority DESC, ready_at, id LIMIT ?3 + 0`
}

// ClaimTasks leases up to p.Limit ready tasks.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimParams) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	if err := checkClaim(p); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	var out []*store.Task
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			var err error
			out, err = claim(w, p)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("claim tasks", err)
	}
	return out, nil
}

func checkClaim(p *store.ClaimParams) error {
	switch {
	case p.Owner == "":
		return errors.New("Owner is empty")
	case p.Limit <= 0:
		return fmt.Errorf("Limit must be positive, got %d", p.Limit)
	case p.LeaseFor <= 0:
		return fmt.Errorf("LeaseFor must be positive, got %v", p.LeaseFor)
	case p.Now.IsZero():
		return errors.New("Now is zero")
	}
	return nil
}

// claim leases ready tasks, inside a write transaction: it reads them in
// claim order, then leases them one by one. (One UPDATE … RETURNING costs
// more: SQLite builds a temporary b-tree for the subquery's ids and
// another for the returned rows.) A task's token grows by one at every
// claim, so its tokens never repeat, across processes too.
func claim(w *wconn, p *store.ClaimParams) ([]*store.Task, error) {
	if len(p.Queues) == 0 {
		return nil, nil
	}
	q, queues := qClaimOne, p.Queues[0]
	if len(p.Queues) > 1 {
		b, err := json.Marshal(p.Queues)
		if err != nil {
			return nil, err
		}
		q, queues = qClaimMany, string(b)
	}
	now := micros(p.Now)
	w.arg(queues)
	w.arg(now)
	w.arg(int64(p.Limit))
	rows, err := w.query(q)
	if err != nil {
		return nil, err
	}
	var out []*store.Task
	dest := make([]driver.Value, numTaskCols)
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, taskFromValues(dest))
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	until := now + p.LeaseFor.Microseconds()
	for _, t := range out {
		w.arg(p.Owner)
		w.arg(until)
		w.arg(t.ID)
		if _, err := w.exec(qLease); err != nil {
			return nil, err
		}
		t.Owner, t.Token, t.LeaseUntil, t.Claims = p.Owner, t.Token+1, fromMicros(until), t.Claims+1
	}
	return out, nil
}

// Heartbeat extends the leases still held to p.Until.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if len(p.Leases) == 0 {
		return nil, nil
	}
	if p.Until.IsZero() {
		return nil, errors.New("heartbeat: Until is zero")
	}
	var lost []int64
	until := micros(p.Until)
	err := s.leases(ctx, qHeartbeat, p.Leases, &until, func(l store.Lease) {
		lost = append(lost, l.TaskID)
	})
	if err != nil {
		return nil, s.fail("heartbeat", err)
	}
	return lost, nil
}

// ReleaseTasks makes leased tasks claimable again at once.
func (s *Store) ReleaseTasks(ctx context.Context, leases []store.Lease) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("release tasks: %w", err)
	}
	if len(leases) == 0 {
		return nil
	}
	if err := s.leases(ctx, qReleaseTask, leases, nil, func(store.Lease) {}); err != nil {
		return s.fail("release tasks", err)
	}
	return nil
}

// leases runs q([until,] task id, token) for each lease in one
// transaction and calls lost for those it matched no row for.
func (s *Store) leases(ctx context.Context, q int, leases []store.Lease, until *int64, lost func(store.Lease)) error {
	var missed []store.Lease
	err := s.withWriter(ctx, func(w *wconn) error {
		missed = missed[:0]
		return w.tx(func() error {
			for _, l := range leases {
				if err := ctx.Err(); err != nil {
					return err
				}
				if until != nil {
					w.arg(*until)
				}
				w.arg(l.TaskID)
				w.arg(l.Token)
				res, err := w.exec(q)
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				if n == 0 {
					missed = append(missed, l)
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, l := range missed {
		lost(l)
	}
	return nil
}

// NextReady returns when a task of the queues is next claimable.
func (s *Store) NextReady(ctx context.Context, p *store.NextReadyParams) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next ready: %w", err)
	}
	if len(p.Queues) == 0 {
		return time.Time{}, false, nil
	}
	b, err := json.Marshal(p.Queues)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next ready: %w", err)
	}
	var next *int64
	if err := s.r.nextReady.QueryRowContext(ctx, string(b)).Scan(&next); err != nil {
		return time.Time{}, false, s.fail("next ready", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return fromMicros(*next), true, nil
}
