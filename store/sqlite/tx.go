package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.TxInserter = (*Store)(nil)

// DB returns the store's writer: the database/sql handle of its single
// write connection, for transactions of the application's own on the
// same file (tables of its own, and runs created with InsertInTx in the
// same transaction).
//
// It has one connection. While a transaction of it is open, the store's
// own writes wait for it (in the process, not on SQLite's lock), so keep
// such transactions short, and do not use the DB outside the transaction
// (nor call the store's writing methods) before it ends: that would wait
// for the connection the transaction holds. With Config.Memory the same
// connection also serves reads. The DB belongs to the store: close the
// store, not it.
func (s *Store) DB() *sql.DB { return s.writer }

// InsertInTx creates runs inside tx, a *sql.Tx of the store's DB (see
// DB), and commits nothing: the runs, their history and their tasks
// exist if, and only if, the caller commits tx.
//
// The creates run Apply's own code for creates (the same statements,
// checks and business-key uniqueness) through tx. A refused create writes
// nothing, so tx stays usable. Workers find the new tasks at their next
// poll after the commit (an idle worker polls at least every
// PollInterval of the runtime); SQLite has no notifications.
func (s *Store) InsertInTx(ctx context.Context, tx any, p *store.InsertParams) ([]store.ChangeResult, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("insert in transaction: %w", err)
	}
	t, ok := tx.(*sql.Tx)
	if !ok || t == nil {
		return nil, fmt.Errorf("insert in transaction: %w: SQLite takes a *sql.Tx of the store's DB(), got %T", store.ErrTxType, tx)
	}
	if p.Now.IsZero() {
		return nil, errors.New("insert in transaction: Now is zero")
	}
	now := truncate(p.Now)
	a := &applier{w: &wconn{callerTx: t, ctx: ctx}, now: now, nowUS: micros(now)}
	results := make([]store.ChangeResult, len(p.Runs))
	for i, r := range p.Runs {
		if r == nil {
			return nil, fmt.Errorf("insert in transaction: run %d is nil", i)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("insert in transaction: %w", err)
		}
		res, err := a.create(r, nil)
		if err != nil {
			return nil, fmt.Errorf("insert in transaction: %w", err)
		}
		results[i] = res
	}
	if err := a.flush(); err != nil {
		return nil, fmt.Errorf("insert in transaction: %w", err)
	}
	return results, nil
}
