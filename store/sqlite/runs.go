package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

// readStmts are prepared on the reader pool.
type readStmts struct {
	getRun, findRun, runExists, history   *sql.Stmt
	nextReady, nextReadyHandlers, strands *sql.Stmt
	strandsPerRun, listWorkers, getTask   *sql.Stmt
	versionPolicy                         *sql.Stmt
}

func (r *readStmts) set() stmtSet {
	return stmtSet{
		{&r.getRun, "SELECT " + runCols + " FROM runs WHERE id = ?"},
		{&r.findRun, "SELECT " + runCols + " FROM runs WHERE business_id = ? AND (? = '' OR workflow = ?) ORDER BY created_at DESC, id DESC LIMIT 1"},
		{&r.runExists, "SELECT 1 FROM runs WHERE id = ?"},
		{&r.history, "SELECT " + eventCols + " FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"},
		{&r.nextReady, nextReadyQuery("")},
		{&r.nextReadyHandlers, nextReadyQuery(handlerIn("?2"))},
		{&r.strands, strandedQuery},
		{&r.strandsPerRun, strandedPerRunQuery},
		{&r.listWorkers, "SELECT " + workerCols + " FROM workers WHERE expires_at > ? ORDER BY id"},
		{&r.getTask, "SELECT " + taskCols + " FROM tasks WHERE id = ?"},
		// The rule (kind 0) and the version states (kind 1) of a name, and
		// the version generation (kind 2), in one statement: one snapshot,
		// no transaction to begin.
		{&r.versionPolicy, "SELECT 0, 0, rule, updated_at, updated_by FROM version_rules WHERE name = ?1 " +
			"UNION ALL SELECT 1, version, state, changed_at, changed_by FROM definition_versions WHERE name = ?1 " +
			"UNION ALL SELECT 2, n, '', 0, '' FROM version_generation ORDER BY 1, 2"},
	}
}

func (r *readStmts) prepare(ctx context.Context, db *sql.DB) error { return r.set().prepare(ctx, db) }
func (r *readStmts) close() error                                  { return r.set().close() }

// GetRun returns a run by id.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	r, err := scanRun(s.r.getRun.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
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
	businessID := p.BusinessID
	if businessID == "" {
		return nil, fmt.Errorf("find run: empty business id: %w", store.ErrRunNotFound)
	}
	r, err := scanRun(s.r.findRun.QueryRowContext(ctx, businessID, p.Workflow, p.Workflow))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find run %s: %w", businessID, store.ErrRunNotFound)
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
	broad, err := s.broadAttrs(ctx, p.Attrs)
	if err != nil {
		return nil, s.fail("list runs", err)
	}
	w, err := runFilter(p, broad)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	q := "SELECT " + runCols + " FROM runs" + w.clause() + " ORDER BY " + runOrder(p) + " LIMIT " + w.param(limit+1)
	args := w.args

	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list runs", err)
	}
	defer rows.Close()
	page := &store.RunPage{Runs: make([]*store.Run, 0, min(limit, 64))}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.fail("list runs", err)
		}
		page.Runs = append(page.Runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list runs", err)
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

// lowerASCII folds the ASCII letters of s to lower case, as SQLite's
// lower() does.
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
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // all
	}
	rows, err := s.r.history.QueryContext(ctx, p.RunID, p.AfterSeq, limit)
	if err != nil {
		return nil, s.fail("history", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, s.fail("history", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("history", err)
	}
	if len(out) == 0 {
		var one int
		err := s.r.runExists.QueryRowContext(ctx, p.RunID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("history %s: %w", p.RunID, store.ErrRunNotFound)
		}
		if err != nil {
			return nil, s.fail("history", err)
		}
	}
	return out, nil
}

// PruneRuns deletes up to p.Limit runs that finished before
// p.FinishedBefore and have no tasks left, oldest first; their history
// goes with them (ON DELETE CASCADE).
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
	statuses, err := jsonList(p.PruneStatuses())
	if err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	only := "" // NULL: every workflow
	if p.Workflows != nil {
		if only, err = jsonList(p.Workflows); err != nil {
			return 0, fmt.Errorf("prune runs: %w", err)
		}
	}
	except, err := jsonList(p.ExceptWorkflows)
	if err != nil {
		return 0, fmt.Errorf("prune runs: %w", err)
	}
	var n int64
	err = s.withWriter(ctx, func(w *wconn) error {
		w.runs.clear()
		w.arg(micros(p.FinishedBefore))
		w.arg(int64(limit))
		w.arg(statuses)
		if p.Workflows != nil {
			w.arg(only)
		} else {
			w.arg(nil)
		}
		w.arg(except)
		res, err := w.exec(qPrune)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
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
