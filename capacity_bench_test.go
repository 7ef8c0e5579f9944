package hephaestus_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// sqlCounter counts what the store's pool sends: round trips (a query,
// or a batch of them) and statements.
type sqlCounter struct{ trips, stmts atomic.Int64 }

func (c *sqlCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.trips.Add(1)
	c.stmts.Add(1)
	return ctx
}
func (c *sqlCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *sqlCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.trips.Add(1)
	return ctx
}
func (c *sqlCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.stmts.Add(1)
}
func (c *sqlCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// capacitySample is what the database and this process had spent at one
// moment: WAL position and records, the database's committed
// transactions, the CPU time of the server's processes and of this one.
type capacitySample struct {
	walBytes, xacts int64
	lsn             string
	pgCPU, goCPU    time.Duration
	// mallocs and allocBytes: the heap objects and bytes this process had
	// allocated (the engine's, with the benchmark's callers).
	mallocs, allocBytes uint64
}

func takeSample(b *testing.B, ctx context.Context, admin *pgx.Conn) capacitySample {
	b.Helper()
	// The cumulative statistics are flushed by each backend at most once
	// a second: wait for them.
	time.Sleep(1500 * time.Millisecond)
	var s capacitySample
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, pg_current_wal_lsn()::text,
		(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())`).Scan(&s.walBytes, &s.lsn, &s.xacts); err != nil {
		b.Fatal(err)
	}
	s.pgCPU = postgresCPU(b)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	s.goCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.mallocs, s.allocBytes = ms.Mallocs, ms.TotalAlloc
	return s
}

// waldump runs pg_waldump with the given --stats mode over the WAL
// between two positions, when it and the server's data directory are at
// hand on this machine; ok is false otherwise.
func waldump(ctx context.Context, admin *pgx.Conn, stats, from, to string) (out string, ok bool) {
	var dir string
	if err := admin.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return "", false
	}
	tools, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_waldump")
	if len(tools) == 0 {
		return "", false
	}
	b, err := exec.CommandContext(ctx, tools[len(tools)-1], stats, "-p", filepath.Join(dir, "pg_wal"), "-s", from, "-e", to).Output()
	return string(b), err == nil
}

// walRecords counts the WAL records between two positions with
// pg_waldump (the server's own statistics lag: each backend flushes them
// when it next goes idle); -1 when pg_waldump cannot read them here.
func walRecords(ctx context.Context, admin *pgx.Conn, from, to string) int64 {
	out, ok := waldump(ctx, admin, "--stats", from, to)
	if !ok {
		return -1
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Total" {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// walRecordLine is a line of pg_waldump --stats=record: the record type,
// its count, its record bytes and its full-page-image bytes.
var walRecordLine = regexp.MustCompile(`^(\S+)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)`)

// walProfile lists the WAL records between two positions by type, per
// unit of n: count, record bytes, full-page-image bytes (HEPH_CAPACITY_WALSTATS:
// where a unit's WAL goes). Nothing when pg_waldump is not at hand.
func walProfile(ctx context.Context, admin *pgx.Conn, from, to string, n int) []string {
	out, ok := waldump(ctx, admin, "--stats=record", from, to)
	if !ok {
		return nil
	}
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		m := walRecordLine.FindStringSubmatch(line)
		if m == nil || m[2] == "0" {
			continue
		}
		f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v / float64(n) }
		lines = append(lines, fmt.Sprintf("%-32s %6.2f records %7.1f bytes %7.1f FPI bytes per unit", m[1], f(m[2]), f(m[3]), f(m[4])))
	}
	return lines
}

// postgresCPU sums the CPU time (user and system) of the processes named
// postgres on this machine, from /proc (clock ticks of 10 ms).
func postgresCPU(b *testing.B) time.Duration {
	b.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, p := range dirs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// capacityWorkloads are the state changes the capacity model counts, each
// as n units of work done end to end by one engine process on a fresh
// database: started, run by its workers, and its result read once.
var capacityWorkloads = []struct {
	name string
	run  func(b *testing.B, ctx context.Context, c *heph.Client, n int)
	reg  func(c *heph.Client) error
}{
	{"flow_one_step", runCapacityFlows, func(c *heph.Client) error { return c.Register(capacityFlow) }},
	{"flow_ten_steps", runCapacityFlows10, func(c *heph.Client) error { return c.Register(capacityFlow10) }},
	{"job", runCapacityJobs, func(c *heph.Client) error { return c.RegisterJobs(capacityJob) }},
	{"workflow_one_activity", runCapacityWorkflows, func(c *heph.Client) error {
		if err := c.RegisterActivities(capacityActivity); err != nil {
			return err
		}
		return c.RegisterWorkflows(capacityWorkflow)
	}},
}

var (
	capacityFlow = func() *flow.Flow {
		b := flow.New("cap.one")
		flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in + 1, nil })
		return b.MustBuild()
	}()
	capacityFlow10 = func() *flow.Flow {
		b := flow.New("cap.ten")
		prev := ""
		for i := range 10 {
			name := fmt.Sprint("s", i)
			var opts []flow.StepOption
			if prev != "" {
				opts = append(opts, flow.DependsOn(prev))
			}
			flow.Step(b, name, func(ctx context.Context, in any) (int, error) { return i, nil }, opts...)
			prev = name
		}
		return b.MustBuild()
	}()
	capacityJob      = job.MustNew("cap.job", func(ctx context.Context, j *job.Job[int]) error { return nil }, nil)
	capacityActivity = workflow.NewActivity("cap.act", func(ctx context.Context, in int) (int, error) { return in + 1, nil })
	capacityWorkflow = workflow.New("cap.wf", func(ctx workflow.Context, in int) (int, error) {
		return capacityActivity.Execute(ctx, in)
	})
)

// startAndWait starts n units from 50 callers (start returns the run's
// id), then reads each one's result.
func startAndWait(b *testing.B, ctx context.Context, c *heph.Client, n int, start func(i int) (string, error)) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				id, err := start(i)
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		r, err := c.WaitRun(ctx, id)
		if err != nil || r.Status != heph.StatusCompleted {
			b.Fatalf("run %s: %v %v", id, r, err)
		}
	}
}

func runCapacityFlows(b *testing.B, ctx context.Context, c *heph.Client, n int) {
	startAndWait(b, ctx, c, n, func(i int) (string, error) {
		r, err := c.StartRun(ctx, "cap.one", i, nil)
		if err != nil {
			return "", err
		}
		return r.ID, nil
	})
}

func runCapacityFlows10(b *testing.B, ctx context.Context, c *heph.Client, n int) {
	startAndWait(b, ctx, c, n, func(i int) (string, error) {
		r, err := c.StartRun(ctx, "cap.ten", i, nil)
		if err != nil {
			return "", err
		}
		return r.ID, nil
	})
}

func runCapacityWorkflows(b *testing.B, ctx context.Context, c *heph.Client, n int) {
	startAndWait(b, ctx, c, n, func(i int) (string, error) {
		r, err := c.StartWorkflow(ctx, "cap.wf", i, nil)
		if err != nil {
			return "", err
		}
		return r.ID, nil
	})
}

// runCapacityJobs inserts the jobs in batches of 1,000, as workload
// "jobs" of docs/benchmarks.md does.
func runCapacityJobs(b *testing.B, ctx context.Context, c *heph.Client, n int) {
	var ids []string
	for len(ids) < n {
		batch := make([]heph.JobInsert[int], min(1000, n-len(ids)))
		for i := range batch {
			batch[i].Args = len(ids) + i
		}
		js, err := heph.InsertJobs(ctx, c, capacityJob, batch)
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range js {
			ids = append(ids, j.ID)
		}
	}
	for _, id := range ids {
		if r, err := c.WaitRun(ctx, id); err != nil || r.Status != heph.StatusCompleted {
			b.Fatalf("job %s: %v %v", id, r, err)
		}
	}
}

// BenchmarkCapacity measures, per unit of work (a one-step flow run, a
// ten-step one, a job, a one-activity workflow run), what the capacity
// model of docs/capacity.md is made of: round trips and statements the
// engine sends, transactions committed, WAL bytes and records written,
// and the CPU time of the PostgreSQL server's processes and of the engine
// process. Counts do not depend on the machine's load; CPU times do
// somewhat (caches, contention): measure them on a quiet machine.
//
//	go test -run '^$' -bench BenchmarkCapacity -benchtime 1x -timeout 30m .
//	HEPH_CAPACITY_UNITS=5000 go test … (default 2,000 units per workload)
func BenchmarkCapacity(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("HEPH_CAPACITY_UNITS")); err == nil && v > 0 {
		n = v
	}
	for _, w := range capacityWorkloads {
		b.Run(w.name, func(b *testing.B) {
			for b.Loop() {
				measureCapacity(b, n, w.reg, w.run)
			}
		})
	}
}

func measureCapacity(b *testing.B, n int, reg func(*heph.Client) error, run func(*testing.B, context.Context, *heph.Client, int)) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dsn := pgschema.DSN(b)
	counter := &sqlCounter{}
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, QueryTracer: counter})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger(), Queues: map[string]int{"default": 50}})
	if err != nil {
		b.Fatal(err)
	}
	if err := reg(c); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	// Warm up (connections, prepared statements), then measure.
	run(b, ctx, c, 50)
	before, trips, stmts := takeSample(b, ctx, admin), counter.trips.Load(), counter.stmts.Load()
	start := time.Now()
	run(b, ctx, c, n)
	elapsed := time.Since(start)
	after := takeSample(b, ctx, admin)
	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(counter.trips.Load()-trips), "trips/unit")
	b.ReportMetric(per(counter.stmts.Load()-stmts), "stmts/unit")
	b.ReportMetric(per(after.xacts-before.xacts), "xacts/unit")
	b.ReportMetric(per(after.walBytes-before.walBytes), "walB/unit")
	if recs := walRecords(ctx, admin, before.lsn, after.lsn); recs >= 0 {
		b.ReportMetric(per(recs), "walrec/unit")
	}
	if os.Getenv("HEPH_CAPACITY_WALSTATS") != "" {
		for _, l := range walProfile(ctx, admin, before.lsn, after.lsn, n) {
			b.Log(l)
		}
	}
	b.ReportMetric(float64((after.pgCPU-before.pgCPU).Microseconds())/float64(n), "pgCPUµs/unit")
	b.ReportMetric(float64((after.goCPU-before.goCPU).Microseconds())/float64(n), "goCPUµs/unit")
	b.ReportMetric(float64(after.mallocs-before.mallocs)/float64(n), "goallocs/unit")
	b.ReportMetric(float64(after.allocBytes-before.allocBytes)/float64(n), "goallocB/unit")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "units/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCapacityProcesses runs 2,000 one-step flow runs (or
// HEPH_CAPACITY_UNITS) with 1, 2, 4 and 8 engine processes on one
// database (each a client with its own pool and workers, started from
// its own callers): the throughput must hold or grow, not collapse under
// the contention of their claims.
//
//	go test -run '^$' -bench BenchmarkCapacityProcesses -benchtime 1x -timeout 30m .
func BenchmarkCapacityProcesses(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("HEPH_CAPACITY_UNITS")); err == nil && v > 0 {
		n = v
	}
	for _, k := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprint("processes=", k), func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
				dsn := pgschema.DSN(b)
				clients := make([]*heph.Client, k)
				for i := range clients {
					st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, MaxConns: 8})
					if err != nil {
						b.Fatal(err)
					}
					defer func() { _ = st.Close() }()
					c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger(), Queues: map[string]int{"default": max(50/k, 8)},
						WorkerID: fmt.Sprint("cap-", i)})
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Register(capacityFlow); err != nil {
						b.Fatal(err)
					}
					if err := c.Start(ctx); err != nil {
						b.Fatal(err)
					}
					defer func() { _ = c.Stop(context.Background()) }()
					clients[i] = c
					runCapacityFlows(b, ctx, c, 20) // warm up
				}
				start := time.Now()
				var wg sync.WaitGroup
				for i, c := range clients {
					share := n / k
					if i < n%k {
						share++
					}
					wg.Go(func() { runCapacityFlows(b, ctx, c, share) })
				}
				wg.Wait()
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "units/s")
				b.ReportMetric(0, "ns/op")
				cancel()
			}
		})
	}
}
