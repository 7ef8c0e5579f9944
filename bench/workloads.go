// The workloads, independent of the engine: (a) to (c) drive a caller the
// way e2e/bench_test.go drives a client, and the raw references measure
// what the database gives to one-row transactions in the same run.

package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"
)

// The sizes of docs/benchmarks.md.
const (
	throughputRuns    = 1000 // (a)
	throughputCallers = 50   // (a)
	latencyRuns       = 100  // (b)
	chainRuns         = 50   // (c)
	warmupCalls       = 5    // before each of (a) to (c): connections, statement caches
)

// Backends.
const (
	backendPostgres = "postgres"
	backendSQLite   = "sqlite"
)

// target is where an engine keeps its state for one measurement.
type target struct {
	backend string // backendPostgres or backendSQLite
	where   string // the DSN of a fresh database, or the path of a new SQLite file
	sync    string // SQLite's synchronous mode
}

// caller is an engine set up for (a) to (c). one starts a run of the
// one-step workflow on in and waits for its result (in+1); chain does the
// same with the ten-step chain. Both check the result.
type caller struct {
	one   func(ctx context.Context, in int) error
	chain func(ctx context.Context, in int) error
	close func()
}

// measure is one engine's figures for one workload in one round: a rate
// ((a): runs/s; jobs: jobs/s) or latencies ((b), (c); jobs: insert to
// completion).
type measure struct {
	rate          float64
	p50, p90, p99 time.Duration
	detail        string // what makes up the figure, where it says
}

// throughput is (a): throughputRuns calls of fn shared by throughputCallers
// callers, each calling in a loop; it returns calls per second.
func throughput(ctx context.Context, fn func(ctx context.Context, in int) error) (measure, error) {
	for i := range warmupCalls {
		if err := fn(ctx, i); err != nil {
			return measure{}, err
		}
	}
	start := time.Now()
	if err := fanOut(ctx, throughputRuns, fn); err != nil {
		return measure{}, err
	}
	return measure{rate: throughputRuns / time.Since(start).Seconds()}, nil
}

// fanOut makes n calls of fn (in = 0 .. n-1), throughputCallers at a
// time, and returns the first error.
func fanOut(ctx context.Context, n int, fn func(ctx context.Context, in int) error) error {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	for range throughputCallers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// latency is (b) and (c): n sequential calls of fn, timed one by one.
func latency(ctx context.Context, n int, fn func(ctx context.Context, in int) error) (measure, error) {
	for i := range warmupCalls {
		if err := fn(ctx, i); err != nil {
			return measure{}, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := fn(ctx, i); err != nil {
			return measure{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return measure{p50: percentile(lat, 0.5), p90: percentile(lat, 0.9), p99: percentile(lat, 0.99)}, nil
}

// percentile returns the p-quantile of sorted durations, as
// e2e/bench_test.go takes it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// rawPostgres is the PostgreSQL reference: clients connections, each
// inserting one row per transaction (a single autocommit INSERT, as a
// one-statement pgbench script does) for d; it returns transactions per
// second.
func rawPostgres(ctx context.Context, dsn string, clients int, d time.Duration) (float64, error) {
	conns := make([]*pgx.Conn, clients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close(ctx)
			}
		}
	}()
	for i := range conns {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, err
		}
		conns[i] = c
	}
	const insert = `INSERT INTO raw_insert (v) VALUES ('x')`
	if _, err := conns[0].Exec(ctx, `CREATE TABLE IF NOT EXISTS raw_insert (id bigserial PRIMARY KEY, v text)`); err != nil {
		return 0, err
	}
	for _, c := range conns { // prepare the statement on every connection
		if _, err := c.Exec(ctx, insert); err != nil {
			return 0, err
		}
	}
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		errs  = make([]error, clients)
	)
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range conns {
		wg.Go(func() {
			n := int64(0)
			for time.Now().Before(deadline) {
				if _, err := c.Exec(ctx, insert); err != nil {
					errs[i] = err
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(total.Load()) / time.Since(start).Seconds(), nil
}

// rawSQLite is the SQLite reference, as in e2e/bench_test.go: one-row
// transactions on a bare file in WAL mode with the given synchronous mode,
// one connection, for d; it returns commits per second.
func rawSQLite(path, sync string, d time.Duration) (float64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		return 0, err
	}
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		tx, err := db.Begin()
		if err != nil {
			return 0, err
		}
		if _, err := tx.Exec(`INSERT INTO t (v) VALUES ('x')`); err != nil {
			_ = tx.Rollback()
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// result is one round of the jobs workload.
type result struct {
	engine string
	jobs   int
	wall   time.Duration
	p50    time.Duration
	p99    time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("%-12s %6d jobs  %8.0f jobs/s  wall %7.3fs  insert->done p50 %6.1fms p99 %6.1fms",
		r.engine, r.jobs, float64(r.jobs)/r.wall.Seconds(), r.wall.Seconds(), ms(r.p50), ms(r.p99))
}

// latencies records the jobs workload's insert-to-completion times.
type latencies struct {
	mu       sync.Mutex
	inserted map[string]time.Time
	lat      []time.Duration
}

func (l *latencies) done(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.inserted[id]; ok {
		l.lat = append(l.lat, at.Sub(t))
	}
}

func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return percentile(s, p)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// bytesRuns is the number of runs the bytes workload leaves in the
// database.
const bytesRuns = 10000

// bytesPerRun is the bytes workload: the growth of the database at dsn,
// every table and index with its TOAST, over bytesRuns calls of fn
// (throughputCallers at a time), measured after a VACUUM of the database
// both before and after, per call. The detail names the relations that
// grew most, with their bytes per call.
func bytesPerRun(ctx context.Context, dsn string, fn func(ctx context.Context, in int) error) (measure, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return measure{}, err
	}
	defer conn.Close(context.Background())
	sizes := func() (map[string]int64, error) {
		if _, err := conn.Exec(ctx, "VACUUM"); err != nil {
			return nil, err
		}
		rows, err := conn.Query(ctx, `SELECT n.nspname || '.' || c.relname, pg_relation_size(c.oid)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind IN ('r', 'i', 't', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
				AND n.nspname NOT LIKE 'pg_temp%' AND n.nspname NOT LIKE 'pg_toast_temp%'`)
		if err != nil {
			return nil, err
		}
		out := map[string]int64{}
		var name string
		var size int64
		_, err = pgx.ForEachRow(rows, []any{&name, &size}, func() error { out[name] = size; return nil })
		return out, err
	}
	for i := range warmupCalls {
		if err := fn(ctx, i); err != nil {
			return measure{}, err
		}
	}
	before, err := sizes()
	if err != nil {
		return measure{}, err
	}
	if err := fanOut(ctx, bytesRuns, fn); err != nil {
		return measure{}, err
	}
	after, err := sizes()
	if err != nil {
		return measure{}, err
	}
	type grown struct {
		name  string
		bytes int64
	}
	var total int64
	var gs []grown
	for name, size := range after {
		if d := size - before[name]; d != 0 {
			total += d
			gs = append(gs, grown{name, d})
		}
	}
	slices.SortFunc(gs, func(a, b grown) int { return int(b.bytes - a.bytes) })
	var parts []string
	for _, g := range gs[:min(len(gs), 4)] {
		parts = append(parts, fmt.Sprintf("%s %d", g.name, g.bytes/bytesRuns))
	}
	return measure{rate: float64(total) / bytesRuns, detail: strings.Join(parts, ", ")}, nil
}
