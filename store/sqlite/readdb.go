package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxReadStmts bounds the statements readDB keeps by their text: past
// it, a query is prepared for its one use, as database/sql does.
const maxReadStmts = 256

// readDB is the reader pool. Its queries are prepared on their first use
// and kept by their text (at most maxReadStmts), so that a query run
// again is not parsed again: SQLite's parse of a statement costs more
// than many of its executions, and the runtime's background loops
// (deadlines, schedules, trigger groups) run the same few at every poll.
type readDB struct {
	*sql.DB

	mu    sync.RWMutex
	stmts map[string]*sql.Stmt
}

func newReadDB(db *sql.DB) *readDB { return &readDB{DB: db, stmts: map[string]*sql.Stmt{}} }

// stmt returns the kept statement of q, preparing it on its first use;
// nil when it cannot be prepared (the query then reports why) or when
// maxReadStmts are kept.
func (r *readDB) stmt(ctx context.Context, q string) *sql.Stmt {
	r.mu.RLock()
	st := r.stmts[q]
	r.mu.RUnlock()
	if st != nil {
		return st
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.stmts[q]; st != nil || len(r.stmts) >= maxReadStmts || r.stmts == nil {
		return st
	}
	st, err := r.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	r.stmts[q] = st
	return st
}

// QueryContext is sql.DB's, on the kept statement of q.
func (r *readDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.DB.QueryContext(ctx, q, args...)
}

// QueryRowContext is sql.DB's, on the kept statement of q.
func (r *readDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := r.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.DB.QueryRowContext(ctx, q, args...)
}

// closeStmts closes the kept statements; later queries are not kept.
func (r *readDB) closeStmts() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, st := range r.stmts {
		errs = append(errs, st.Close())
	}
	r.stmts = nil
	return errors.Join(errs...)
}
