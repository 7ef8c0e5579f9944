package postgres

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// warmPool opens n connections of pool at once, prepares stmts on each,
// and puts them back idle. A new PostgreSQL connection costs a new backend
// process (tens of milliseconds here), and each statement's first use on
// it a round trip to prepare it on a cold backend: a pool that grows and
// prepares on demand made the first second of traffic after a start ten
// times slower than the next (bench/soak, docs/benchmarks.md). Statements
// prepared here under their own text are used by every later query with
// that text (pgx looks a query's text up among the named statements
// first). One that does not prepare (a fragment completed at run time) is
// skipped: its queries prepare as before.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int, stmts []string) error {
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			conns[i], errs[i] = pool.Acquire(ctx)
			if errs[i] != nil {
				return
			}
			for _, sql := range stmts {
				if _, err := conns[i].Conn().Prepare(ctx, sql, sql); err != nil && ctx.Err() != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	return errors.Join(errs...)
}

// statements returns the text of the store's fixed statements: the string
// fields of its query sets and the flow-control statements.
func (s *Store) statements() []string {
	var out []string
	for _, set := range []any{&s.q, s.acc, s.rc} {
		v := reflect.ValueOf(set).Elem()
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
				out = append(out, f.String())
			}
		}
	}
	for _, q := range s.q.flow {
		out = append(out, q)
	}
	return out
}
