package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.TxInserter = (*Store)(nil)

// Pool returns the store's connection pool, for transactions of the
// application's own (InsertInTx takes one begun on it, or on any pool of
// the same database). It belongs to the store: close the store, not the
// pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// InsertInTx creates runs inside tx, a pgx.Tx the caller began on the
// store's database, and commits nothing: the runs, their history and
// their tasks exist if, and only if, the caller commits tx.
//
// The creates go through Apply's own writer (the same statements,
// checks and business-key uniqueness), each in a savepoint of tx, so
// that a create refused for a business-key conflict leaves tx usable and
// the caller's other writes in place. A run whose business id is held by
// a transaction not yet committed waits for it, as any insert of a
// unique value does. The notification that wakes other processes'
// workers is sent in tx, so PostgreSQL delivers it at commit; a
// rolled-back tx notifies nobody.
func (s *Store) InsertInTx(ctx context.Context, tx any, p *store.InsertParams) ([]store.ChangeResult, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("insert in transaction: %w", err)
	}
	t, ok := tx.(pgx.Tx)
	if !ok || t == nil {
		return nil, fmt.Errorf("insert in transaction: %w: PostgreSQL takes a pgx.Tx, got %T", store.ErrTxType, tx)
	}
	if p.Now.IsZero() {
		return nil, errors.New("insert in transaction: Now is zero")
	}
	changes := make([]store.Change, len(p.Runs))
	for i, r := range p.Runs {
		if r == nil {
			return nil, fmt.Errorf("insert in transaction: run %d is nil", i)
		}
		changes[i] = store.Change{Create: r}
	}
	if len(changes) == 0 {
		return []store.ChangeResult{}, nil
	}
	ap := &store.ApplyParams{Changes: changes, Now: p.Now}
	a := &applier{s: s, conn: t.Conn(), p: ap, now: truncate(p.Now), inTx: true,
		// One change at a time, each in a savepoint: a refused create
		// must not abort the caller's transaction.
		slow:   true,
		loaded: map[string]*runState{}, fenced: map[int64]fencedTask{}, fencedOf: map[string][]int64{},
		keys: map[string]map[string]bool{}}
	if err := a.applyAll(ctx); err != nil {
		return nil, fmt.Errorf("insert in transaction: %w", err)
	}
	var queues []string
	for _, r := range a.results {
		for _, t := range r.Tasks {
			if r.Err == nil && !t.ReadyAt.After(a.now) && !slices.Contains(queues, t.Queue) {
				queues = append(queues, t.Queue)
			}
		}
	}
	for _, q := range queues {
		if _, err := t.Exec(ctx, "SELECT pg_notify($1, $2)", s.channel, q); err != nil {
			return nil, fmt.Errorf("insert in transaction: notify: %w", err)
		}
	}
	return a.results, nil
}
