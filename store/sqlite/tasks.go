package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// claimQuery leases up to ?5 tasks of the queues selected by queueCond
// (over ?1) to owner ?2 until ?3, at time ?4, in one statement. A task's
// token grows by one at every claim, so its tokens never repeat, across
// processes too.
//
// The limit is written "?5 + 0": with a bare "LIMIT ?" the planner takes
// the bound value into account, so SQLite prepares the statement again on
// every call with a new limit — a fifth of the CPU of a busy worker.
func claimQuery(queueCond string) string {
	return `UPDATE tasks SET owner = ?2, token = token + 1, lease_until = ?3, claims = claims + 1
		WHERE id IN (SELECT id FROM tasks
			WHERE ` + queueCond + ` AND ready_at <= ?4 AND (lease_until IS NULL OR lease_until <= ?4)
			ORDER BY priority DESC, ready_at, id LIMIT ?5 + 0)
		RETURNING ` + taskCols
}

// ClaimTasks leases up to p.Limit ready tasks in one statement.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimParams) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	if err := checkClaim(p); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	out, err := claim(ctx, p, func(st *sql.Stmt) *sql.Stmt { return st }, &s.w)
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

// claim leases ready tasks with the writer's statements, bound by bind (to
// a transaction, inside Apply).
func claim(ctx context.Context, p *store.ClaimParams, bind func(*sql.Stmt) *sql.Stmt, w *writeStmts) ([]*store.Task, error) {
	if len(p.Queues) == 0 {
		return nil, nil
	}
	st, queues := w.claimOne, any(p.Queues[0])
	if len(p.Queues) > 1 {
		b, err := json.Marshal(p.Queues)
		if err != nil {
			return nil, err
		}
		st, queues = w.claimMany, string(b)
	}
	now := micros(p.Now)
	rows, err := bind(st).QueryContext(ctx, queues, p.Owner, now+p.LeaseFor.Microseconds(), now, p.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// RETURNING comes in no particular order.
	slices.SortFunc(out, func(a, b *store.Task) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		if c := a.ReadyAt.Compare(b.ReadyAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
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
	err := s.leases(ctx, s.w.heartbeat, p.Leases, []any{micros(p.Until)}, func(l store.Lease) {
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
	if err := s.leases(ctx, s.w.releaseTask, leases, nil, func(store.Lease) {}); err != nil {
		return s.fail("release tasks", err)
	}
	return nil
}

// leases runs st(args..., task id, token) for each lease in one
// transaction and calls lost for those it matched no row for.
func (s *Store) leases(ctx context.Context, st *sql.Stmt, leases []store.Lease, args []any, lost func(store.Lease)) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	bound := tx.StmtContext(ctx, st)
	defer bound.Close()
	stmtCtx := context.WithoutCancel(ctx) // see Apply
	for _, l := range leases {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := bound.ExecContext(stmtCtx, append(args[:len(args):len(args)], l.TaskID, l.Token)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			lost(l)
		}
	}
	return tx.Commit()
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
