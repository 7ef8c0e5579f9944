package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

// GetRun returns a run by id.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	var r *store.Run
	err := s.idempotent(ctx, func(ctx context.Context) (err error) {
		r, err = scanRun(s.pool.QueryRow(ctx, s.q.getRun, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.RunNotFound(id)
	}
	if err != nil {
		return nil, s.fail("get run", err)
	}
	return r, nil
}

// FindRun returns the newest run with a business id.
func (s *Store) FindRun(ctx context.Context, p *store.FindRunParams) (*store.Run, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("find run: %w", err)
	}
	if p.BusinessID == "" {
		return nil, fmt.Errorf("find run: empty business id: %w", store.ErrRunNotFound)
	}
	var r *store.Run
	err := s.idempotent(ctx, func(ctx context.Context) (err error) {
		r, err = scanRun(s.pool.QueryRow(ctx, s.q.findRun, p.BusinessID, p.Workflow))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("find run %s: %w", p.BusinessID, store.ErrRunNotFound)
	}
	if err != nil {
		return nil, s.fail("find run", err)
	}
	return r, nil
}

// ListRuns returns runs newest first (by creation time, then id), with
// keyset pagination.
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.RunPage, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	if p == nil {
		p = &store.ListRunsParams{}
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	limit := p.PageSize()
	w, err := runFilter(s.schema, p)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	q := s.q.listRuns + w.clause() + " ORDER BY " + runOrder(p) + " LIMIT " + w.param(limit+1)
	args := w.args

	var runs []*store.Run
	err = s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
		return err
	})
	if err != nil {
		return nil, s.fail("list runs", err)
	}
	page := &store.RunPage{Runs: runs}
	if page.Runs == nil {
		page.Runs = []*store.Run{}
	}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		last := page.Runs[limit-1]
		page.Next = store.EncodeRunCursor(last.CreatedAt, last.ID)
		if !p.ChangedAfter.IsZero() {
			page.Next = store.EncodeRunCursor(last.UpdatedAt, last.ID)
		}
	}
	return page, nil
}

// lowerASCII folds the ASCII letters of s to lower case, as lower() does
// under the "C" collation.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// History returns a run's history in sequence order.
func (s *Store) History(ctx context.Context, p *store.HistoryParams) ([]store.Event, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	var out []store.Event
	exists := true
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.q.history, p.RunID, p.AfterSeq, limit)
		if err != nil {
			return err
		}
		out = out[:0]
		var (
			runID, entries string
			seq, n         int64
			key            *string
			at             time.Time
		)
		_, err = pgx.ForEachRow(rows, []any{&runID, &seq, &n, &key, &at, &entries}, func() error {
			var err error
			out, err = expandRow(out, runID, seq, n, key, at.UTC(), entries, p.AfterSeq)
			return err
		})
		if err != nil || len(out) > 0 {
			return err
		}
		return s.pool.QueryRow(ctx, s.q.runExists, p.RunID).Scan(&exists)
	})
	if err != nil {
		return nil, s.fail("history", err)
	}
	if !exists {
		return nil, fmt.Errorf("history %s: %w", p.RunID, store.ErrRunNotFound)
	}
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// PruneRuns deletes up to p.Limit runs that finished before
// p.FinishedBefore and have no task left, the earliest created first,
// with their history. Runs that another transaction holds locked are left
// for the next call.
func (s *Store) PruneRuns(ctx context.Context, p *store.PruneParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	if err := p.Check(); err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	limit := p.Limit
	if limit == 0 {
		limit = 1000
	}
	var only []string // NULL: every workflow
	if p.Workflows != nil {
		only = append([]string{}, p.Workflows...)
	}
	except := append([]string{}, p.ExceptWorkflows...)
	var n int64
	err := s.once(ctx, func(ctx context.Context) error {
		n = 0
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, applySettings); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, s.q.pruneLock, truncate(p.FinishedBefore), limit, p.PruneStatuses(), only, except)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil || len(ids) == 0 {
				return err
			}
			// A statement of its own: its snapshot, taken with the runs
			// locked, sees every history entry and task written for them.
			tag, err := tx.Exec(ctx, s.q.prune, ids)
			n = tag.RowsAffected()
			return err
		})
	})
	if err != nil {
		return 0, s.fail("prune runs", err)
	}
	return int(n), nil
}

// runOrder is the order of a list of runs: newest first, or with
// ChangedAfter the oldest change first.
func runOrder(p *store.ListRunsParams) string {
	if !p.ChangedAfter.IsZero() {
		return "updated_at, id"
	}
	return "created_at DESC, id DESC"
}
