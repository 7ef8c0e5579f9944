package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The runtime benchmarks of docs/benchmarks.md:
//
//	(a) Throughput: 1,000 runs of a one-step flow, 50 concurrent callers
//	    each starting a run and waiting for its result in a loop: runs/s.
//	(b) Latency: start-to-result of a one-step run, 100 sequential runs.
//	(c) Chain: start-to-result of a 10-step sequential chain.
//	(d) Map: wall time of a run with one 100-element map step.
//	(e) Jobs: 5,000 one-step runs inserted in batches of 1,000
//	    (StartRuns) and processed by 100 workers, from the first insert
//	    to the last completion: jobs/s.
//	events: events sent and fanned out to triggers (events_bench_test.go).
//
// Each reports its figure with b.ReportMetric; run with -count 3 and take
// the median.

func benchFlows() []*flow.Flow {
	one := flow.New("one")
	flow.Step(one, "step", func(ctx context.Context, in int) (int, error) { return in + 1, nil })

	chain := flow.New("chain")
	for i := range 10 {
		var opts []flow.StepOption
		if i > 0 {
			opts = append(opts, flow.DependsOn(fmt.Sprintf("s%d", i-1)))
		}
		flow.Step(chain, fmt.Sprintf("s%d", i), func(ctx context.Context, in int) (int, error) { return in, nil }, opts...)
	}

	mapper := flow.New("map")
	flow.Map(mapper, "double", func(ctx context.Context, x int) (int, error) { return 2 * x, nil })
	return []*flow.Flow{one.MustBuild(), chain.MustBuild(), mapper.MustBuild()}
}

func benchClient(b *testing.B, open func(b *testing.B) store.Store) *heph.Client {
	st := open(b)
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 64}, Logger: e2e.QuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(benchFlows()...); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func sqliteOpener(sync string) func(b *testing.B) store.Store {
	return func(b *testing.B) store.Store {
		st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	}
}

func BenchmarkSQLite(b *testing.B) {
	for _, mode := range []string{"FULL", "NORMAL"} {
		b.Run(mode, func(b *testing.B) {
			b.Run("raw_commit", func(b *testing.B) { benchRawCommit(b, mode) })
			runBenchmarks(b, sqliteOpener(mode))
		})
	}
}

// benchRawCommit measures what this disk gives: one-row transactions on a
// bare SQLite file in WAL mode, in the same run as the engine's figures, so
// they can be read as ratios of it.
func benchRawCommit(b *testing.B, mode string) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+mode+")")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N * 200 {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO t (v) VALUES ('x')`); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*200)/time.Since(start).Seconds(), "commits/s")
}

// runBenchmarks runs (a) to (e) and the events benchmarks on the stores
// open returns; other backends call it with their own opener.
func runBenchmarks(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("a_throughput", func(b *testing.B) { benchThroughput(b, open) })
	b.Run("b_latency", func(b *testing.B) { benchLatency(b, open, "one", 100) })
	b.Run("c_chain10", func(b *testing.B) { benchLatency(b, open, "chain", 50) })
	b.Run("d_map100", func(b *testing.B) { benchMap(b, open) })
	b.Run("e_jobs", func(b *testing.B) { benchJobs(b, open) })
	b.Run("events", func(b *testing.B) { benchEvents(b, open) })
}

func benchJobs(b *testing.B, open func(b *testing.B) store.Store) {
	const jobs, batch = 5000, 1000
	var rate float64
	for range b.N {
		st := open(b)
		c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 100}, Logger: e2e.QuietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Register(benchFlows()...); err != nil {
			b.Fatal(err)
		}
		var done atomic.Int64
		all := make(chan struct{})
		c.Subscribe(func(e heph.Event) {
			if e.Kind == heph.RunCompleted && done.Add(1) == jobs {
				close(all)
			}
		})
		ctx := context.Background()
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := 0; i < jobs; i += batch {
			reqs := make([]heph.StartRequest, batch)
			for k := range reqs {
				reqs[k] = heph.StartRequest{Input: i + k}
			}
			if _, err := c.StartRuns(ctx, "one", reqs); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-all:
		case <-time.After(10 * time.Minute):
			b.Fatalf("%d of %d jobs completed", done.Load(), jobs)
		}
		rate += float64(jobs) / time.Since(start).Seconds()
		_ = c.Stop(ctx)
	}
	b.ReportMetric(rate/float64(b.N), "jobs/s")
}

func benchThroughput(b *testing.B, open func(b *testing.B) store.Store) {
	c := benchClient(b, open)
	ctx := context.Background()
	loadTest(b, "runs/s", func(i int) error {
		r, err := c.Run(ctx, "one", i, nil)
		if err == nil && r.Status != heph.StatusCompleted {
			err = fmt.Errorf("run %s is %s: %s", r.ID, r.Status, r.Error)
		}
		return err
	})
}

func benchLatency(b *testing.B, open func(b *testing.B) store.Store, name string, n int) {
	c := benchClient(b, open)
	ctx := context.Background()
	latencyTest(b, n, func() error {
		r, err := c.Run(ctx, name, 1, nil)
		if err == nil && r.Status != heph.StatusCompleted {
			err = fmt.Errorf("run %s is %s: %s", r.ID, r.Status, r.Error)
		}
		return err
	})
}

// loadTest is workload (a): 1,000 calls of fn from 50 concurrent callers,
// b.N times; it reports calls per second under unit.
func loadTest(b *testing.B, unit string, fn func(i int) error) {
	const calls, callers = 1000, 50
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		next := make(chan int, calls)
		for i := range calls {
			next <- i
		}
		close(next)
		for range callers {
			wg.Go(func() {
				for i := range next {
					if err := fn(i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(calls*b.N)/time.Since(start).Seconds(), unit)
}

// latencyTest times n sequential calls of fn, b.N times, after a warm-up
// (the first calls pay for connections and statement caches), and reports
// the p50, p90 and p99 in milliseconds.
func latencyTest(b *testing.B, n int, fn func() error) {
	for range 5 {
		if err := fn(); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		for range n {
			t0 := time.Now()
			if err := fn(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.9), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func benchMap(b *testing.B, open func(b *testing.B) store.Store) {
	c := benchClient(b, open)
	ctx := context.Background()
	items := make([]int, 100)
	for i := range items {
		items[i] = i
	}
	if _, err := c.Run(ctx, "map", items, nil); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r, err := c.Run(ctx, "map", items, nil)
		if err != nil || r.Status != heph.StatusCompleted {
			b.Fatalf("run: %v %v", err, r)
		}
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/run")
}

// BenchmarkPostgres runs the raw reference (raw_commit), (a) to (e) and
// the events benchmarks on PostgreSQL: a fresh database per benchmark on
// the server named by HEPH_TEST_POSTGRES.
func BenchmarkPostgres(b *testing.B) {
	b.Run("raw_commit", benchPostgresRawCommit)
	runBenchmarks(b, postgresOpener)
}

// postgresOpener opens a store on a database of its own.
func postgresOpener(b *testing.B) store.Store {
	st, err := postgres.Open(context.Background(), &postgres.Config{DSN: pgtest.DSN(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// BenchmarkPayloadCodec is what the payload codec costs (docs/payloads.md,
// docs/benchmarks.md): workloads (a), (b), (c) and (e) on each backend,
// with payloads stored plain and through a chain of zstd (from 1 KiB:
// these payloads are smaller, so it declines) and AES-256-GCM, which is
// what Config.PayloadCodec wraps the store in. Read codec against plain
// of the same run.
func BenchmarkPayloadCodec(b *testing.B) {
	chain := e2e.PayloadChainFrom(b, 0, "k1", "k1")
	backends := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", sqliteOpener("NORMAL")},
		{"postgres", postgresOpener},
	}
	workloads := []struct {
		name string
		run  func(b *testing.B, open func(b *testing.B) store.Store)
	}{
		{"a_throughput", benchThroughput},
		{"b_latency", func(b *testing.B, open func(b *testing.B) store.Store) { benchLatency(b, open, "one", 100) }},
		{"c_chain10", func(b *testing.B, open func(b *testing.B) store.Store) { benchLatency(b, open, "chain", 50) }},
		{"e_jobs", benchJobs},
	}
	// Plain and codec of each workload run one after the other, and
	// -test.count repeats the whole: the two are interleaved, so a drift
	// of the machine between rounds does not read as the codec's cost.
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			for _, w := range workloads {
				b.Run(w.name, func(b *testing.B) {
					b.Run("plain", func(b *testing.B) { w.run(b, be.open) })
					b.Run("codec", func(b *testing.B) {
						w.run(b, func(b *testing.B) store.Store { return payloadstore.Wrap(be.open(b), chain) })
					})
				})
			}
		})
	}
}
