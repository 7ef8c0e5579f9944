// Package benchrun holds the standard benchmark workloads of Hephaestus
// (docs/benchmarks.md) and the Hephaestus side of them: bench/ (its own
// module, which runs them beside River and DBOS) and heph bench both call
// it.
//
// The workloads are independent of the engine: (a) to (c) drive a Caller
// the way e2e/bench_test.go drives a client, and the raw references
// measure what the database gives to one-row transactions in the same
// run.
package benchrun

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
	ThroughputRuns    = 1000 // (a)
	ThroughputCallers = 50   // (a)
	LatencyRuns       = 100  // (b)
	ChainRuns         = 50   // (c)
	WarmupCalls       = 5    // before each of (a) to (c): connections, statement caches
)

// Backends.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// Target is where an engine keeps its state for one measurement.
type Target struct {
	Backend string // Postgres or SQLite
	Where   string // the DSN of a fresh database, or the path of a new SQLite file
	Sync    string // SQLite's synchronous mode: FULL (default) or NORMAL
	// Schema is the PostgreSQL schema of Hephaestus's tables. Defaults to
	// the store's default, "heph".
	Schema string
}

// Caller is an engine set up for (a) to (c). One starts a run of the
// one-step workflow on in and waits for its result (in+1); Chain does the
// same with the ten-step chain. Both check the result. Close releases
// the engine.
type Caller struct {
	One   func(ctx context.Context, in int) error
	Chain func(ctx context.Context, in int) error
	Close func()
}

// Measure is one engine's figures for one workload in one round: a rate
// ((a): runs/s; jobs: jobs/s) or latencies ((b), (c); jobs: insert to
// completion).
type Measure struct {
	Rate          float64
	P50, P90, P99 time.Duration
	Detail        string // what makes up the figure, where it says
}

// Throughput is (a): ThroughputRuns calls of fn shared by
// ThroughputCallers callers, each calling in a loop, after WarmupCalls
// calls; it returns calls per second.
func Throughput(ctx context.Context, fn func(ctx context.Context, in int) error) (Measure, error) {
	for i := range WarmupCalls {
		if err := fn(ctx, i); err != nil {
			return Measure{}, err
		}
	}
	start := time.Now()
	if err := FanOut(ctx, ThroughputRuns, fn); err != nil {
		return Measure{}, err
	}
	return Measure{Rate: ThroughputRuns / time.Since(start).Seconds()}, nil
}

// FanOut makes n calls of fn (in = 0 .. n-1), ThroughputCallers at a
// time, and returns the first error.
func FanOut(ctx context.Context, n int, fn func(ctx context.Context, in int) error) error {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	for range ThroughputCallers {
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

// Latency is (b) and (c): n sequential calls of fn, timed one by one,
// after WarmupCalls calls.
func Latency(ctx context.Context, n int, fn func(ctx context.Context, in int) error) (Measure, error) {
	for i := range WarmupCalls {
		if err := fn(ctx, i); err != nil {
			return Measure{}, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := fn(ctx, i); err != nil {
			return Measure{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return Measure{P50: Percentile(lat, 0.5), P90: Percentile(lat, 0.9), P99: Percentile(lat, 0.99)}, nil
}

// Percentile returns the p-quantile of sorted durations, as
// e2e/bench_test.go takes it.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// RawPostgres is the PostgreSQL reference: clients connections, each
// inserting one row per transaction (a single autocommit INSERT, as a
// one-statement pgbench script does) for d; it returns transactions per
// second. Its table, raw_insert, is made in schema ("" for the
// connection's default), which must exist.
func RawPostgres(ctx context.Context, dsn, schema string, clients int, d time.Duration) (float64, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return 0, err
	}
	if schema != "" {
		cc.RuntimeParams["search_path"] = schema
	}
	conns := make([]*pgx.Conn, clients)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close(ctx)
			}
		}
	}()
	for i := range conns {
		c, err := pgx.ConnectConfig(ctx, cc)
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

// RawSQLite is the SQLite reference, as in e2e/bench_test.go: one-row
// transactions on a bare file in WAL mode with the given synchronous mode,
// one connection, for d; it returns commits per second.
func RawSQLite(path, sync string, d time.Duration) (float64, error) {
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

// JobsResult is one round of the jobs workload.
type JobsResult struct {
	Engine string
	Jobs   int
	// Wall is from the first insert to the last completion; Inserted from
	// the first insert to the last.
	Wall, Inserted time.Duration
	// P50 and P99 are the insert-to-completion latencies.
	P50, P99 time.Duration
}

func (r JobsResult) String() string {
	return fmt.Sprintf("%-12s %6d jobs  %8.0f jobs/s  wall %7.3fs  insert->done p50 %6.1fms p99 %6.1fms",
		r.Engine, r.Jobs, float64(r.Jobs)/r.Wall.Seconds(), r.Wall.Seconds(), Ms(r.P50), Ms(r.P99))
}

// Latencies records the jobs workload's insert-to-completion times. It
// is safe for concurrent use.
type Latencies struct {
	mu       sync.Mutex
	inserted map[string]time.Time
	lat      []time.Duration
}

// NewLatencies returns an empty record.
func NewLatencies() *Latencies { return &Latencies{inserted: map[string]time.Time{}} }

// Inserted records when the job id was inserted.
func (l *Latencies) Inserted(at time.Time, ids ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.inserted[id] = at
	}
}

// Done records when the job id completed.
func (l *Latencies) Done(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.inserted[id]; ok {
		l.lat = append(l.lat, at.Sub(t))
	}
}

// Pct returns the p-quantile of the recorded latencies.
func (l *Latencies) Pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return Percentile(s, p)
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BytesRuns is the number of runs the bytes workload leaves in the
// database.
const BytesRuns = 10000

// BytesPerRun is the bytes workload: the growth of the database at dsn,
// every table and index with its TOAST, over BytesRuns calls of fn
// (ThroughputCallers at a time), measured after a VACUUM of the database
// both before and after, per call. The detail names the relations that
// grew most, with their bytes per call.
func BytesPerRun(ctx context.Context, dsn string, fn func(ctx context.Context, in int) error) (Measure, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Measure{}, err
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
	before, after, err := around(ctx, BytesRuns, fn, sizes)
	if err != nil {
		return Measure{}, err
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
		parts = append(parts, fmt.Sprintf("%s %d", g.name, g.bytes/BytesRuns))
	}
	return Measure{Rate: float64(total) / BytesRuns, Detail: strings.Join(parts, ", ")}, nil
}

// GrowthRuns is the number of runs the growth workload leaves in the
// database.
const GrowthRuns = 20000

// GrowthPerRun is the growth workload: what a user's database grows by,
// per finished run, over GrowthRuns calls of fn (ThroughputCallers at a
// time) with no VACUUM but the server's autovacuum: pg_database_size
// before and after, after WarmupCalls calls. Unlike BytesPerRun it counts
// the space that dead row versions hold until autovacuum reclaims it, as
// a database in service keeps it.
func GrowthPerRun(ctx context.Context, dsn string, fn func(ctx context.Context, in int) error) (Measure, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return Measure{}, err
	}
	defer conn.Close(context.Background())
	size := func() (int64, error) {
		var n int64
		err := conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n)
		return n, err
	}
	before, after, err := around(ctx, GrowthRuns, fn, size)
	if err != nil {
		return Measure{}, err
	}
	return Measure{Rate: float64(after-before) / GrowthRuns}, nil
}

// SteadyPerRun is the steady workload: the growth workload's measure
// taken over GrowthRuns calls made after GrowthRuns others. A database in
// service reuses the space that autovacuum (or a store's own VACUUM of
// its queue) frees from dead rows; the growth workload, which starts
// empty, counts that space once, as if every run kept it. This one counts
// what a database that has run for a while grows by per run.
func SteadyPerRun(ctx context.Context, dsn string, fn func(ctx context.Context, in int) error) (Measure, error) {
	if err := FanOut(ctx, GrowthRuns, fn); err != nil {
		return Measure{}, err
	}
	return GrowthPerRun(ctx, dsn, fn)
}

// around makes WarmupCalls calls of fn, measures, makes n calls
// (ThroughputCallers at a time) and measures again.
func around[T any](ctx context.Context, n int, fn func(ctx context.Context, in int) error, measure func() (T, error)) (before, after T, err error) {
	for i := range WarmupCalls {
		if err = fn(ctx, i); err != nil {
			return before, after, err
		}
	}
	if before, err = measure(); err != nil {
		return before, after, err
	}
	if err = FanOut(ctx, n, fn); err != nil {
		return before, after, err
	}
	after, err = measure()
	return before, after, err
}
