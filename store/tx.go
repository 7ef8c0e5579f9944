package store

import (
	"context"
	"errors"
	"time"
)

// ErrTxType: InsertInTx was given a transaction of another kind than the
// backend's (PostgreSQL takes a pgx.Tx, SQLite a *sql.Tx).
var ErrTxType = errors.New("transaction of the wrong type")

// TxInserter is implemented by stores that create runs inside a
// transaction of the caller's own, so that an application enqueues work
// (a job) atomically with its own data: the runs exist if, and only if,
// the caller commits.
type TxInserter interface {
	// InsertInTx creates runs with tx, a transaction the caller opened on
	// the store's database (PostgreSQL: a pgx.Tx on the same database
	// and schema; SQLite: a *sql.Tx of the store's DB). It writes what
	// Apply writes for creates, with the same checks and the same
	// business-key uniqueness, and commits nothing. Each run gets a result
	// in order: its run and tasks, or why it was refused (ErrRunExists, a
	// *DuplicateRunError), having written nothing. The error is for
	// failures of the store, after which the caller should roll back; a
	// tx of another kind fails with ErrTxType. Stores that notify do so
	// inside tx: the notification is delivered when tx commits.
	InsertInTx(ctx context.Context, tx any, p *InsertParams) ([]ChangeResult, error)
}

// InsertParams are the runs InsertInTx creates.
type InsertParams struct {
	Runs []*NewRun
	// Now is the creation time of the runs. Required.
	Now time.Time
}
