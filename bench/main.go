// Command bench compares Hephaestus with River on the jobs workload: N
// single-step jobs inserted in batches and processed by W workers, timed
// from the first insert to the last completion, against one PostgreSQL
// server in the same run.
//
//	cd bench && go run . -dsn postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
//
// It has its own go.mod so that River never becomes a dependency of the
// library. Each engine gets a fresh database per round, dropped after.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func main() {
	dsn := flag.String("dsn", envOr("HEPH_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin DSN of the PostgreSQL server")
	jobs := flag.Int("jobs", 20000, "jobs per round")
	workers := flag.Int("workers", 100, "workers")
	batch := flag.Int("batch", 1000, "jobs per insert batch")
	rounds := flag.Int("rounds", 3, "rounds per engine (the median is reported)")
	engines := flag.String("engines", "heph,river", "engines to run: heph, river")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile")
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			log.Fatal(err)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	all := map[string][]result{}
	for round := range *rounds {
		for _, e := range splitComma(*engines) {
			db, drop, err := freshDB(ctx, *dsn)
			if err != nil {
				log.Fatal(err)
			}
			var r result
			switch e {
			case "heph":
				r, err = runHeph(ctx, db, *jobs, *workers, *batch)
			case "river":
				r, err = runRiver(ctx, db, *jobs, *workers, *batch)
			default:
				err = fmt.Errorf("unknown engine %q", e)
			}
			drop()
			if err != nil {
				log.Fatalf("%s: %v", e, err)
			}
			fmt.Printf("round %d  %s\n", round+1, r)
			all[e] = append(all[e], r)
		}
	}
	fmt.Println("median of", *rounds, "rounds:")
	for _, e := range splitComma(*engines) {
		rs := all[e]
		sort.Slice(rs, func(i, j int) bool { return rs[i].wall < rs[j].wall })
		fmt.Println("  ", rs[len(rs)/2])
	}
}

// latencies records insert-to-completion times.
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
	if len(l.lat) == 0 {
		return 0
	}
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func runHeph(ctx context.Context, dsn string, n, workers, batch int) (result, error) {
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, MaxConns: 16})
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	b := flow.New("job")
	flow.Step(b, "work", func(ctx context.Context, in int) (int, error) { return in, nil })
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": workers}})
	if err != nil {
		return result{}, err
	}
	if err := c.Register(b.MustBuild()); err != nil {
		return result{}, err
	}
	lat := &latencies{inserted: map[string]time.Time{}}
	var completed atomic.Int64
	all := make(chan struct{})
	c.Subscribe(func(e heph.Event) {
		if e.Kind == heph.RunCompleted {
			lat.done(e.RunID, time.Now())
			if completed.Add(1) == int64(n) {
				close(all)
			}
		}
	})
	if err := c.Start(ctx); err != nil {
		return result{}, err
	}
	defer func() { _ = c.Stop(ctx) }()
	start := time.Now()
	for i := 0; i < n; i += batch {
		reqs := make([]heph.StartRequest, min(batch, n-i))
		for k := range reqs {
			reqs[k] = heph.StartRequest{Input: i + k}
		}
		at := time.Now()
		runs, err := c.StartRuns(ctx, "job", reqs)
		if err != nil {
			return result{}, err
		}
		lat.mu.Lock()
		for _, r := range runs {
			lat.inserted[r.ID] = at
		}
		lat.mu.Unlock()
	}
	fmt.Fprintf(os.Stderr, "hephaestus: inserted in %v\n", time.Since(start))
	<-all
	return result{engine: "hephaestus", jobs: n, wall: time.Since(start), p50: lat.pct(0.5), p99: lat.pct(0.99)}, nil
}

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error { return nil }

func runRiver(ctx context.Context, dsn string, n, workers, batch int) (result, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, nil)
	if err != nil {
		return result{}, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return result{}, err
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return result{}, err
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	lat := &latencies{inserted: map[string]time.Time{}}
	all := make(chan struct{})
	go func() {
		done := 0
		for ev := range events {
			lat.done(fmt.Sprint(ev.Job.ID), time.Now())
			if done++; done == n {
				close(all)
				return
			}
		}
	}()
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	defer func() { _ = client.Stop(ctx) }()
	start := time.Now()
	for i := 0; i < n; i += batch {
		params := make([]river.InsertManyParams, min(batch, n-i))
		for k := range params {
			params[k] = river.InsertManyParams{Args: noopArgs{N: i + k}}
		}
		at := time.Now()
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return result{}, err
		}
		lat.mu.Lock()
		for _, r := range res {
			lat.inserted[fmt.Sprint(r.Job.ID)] = at
		}
		lat.mu.Unlock()
	}
	fmt.Fprintf(os.Stderr, "river: inserted in %v\n", time.Since(start))
	<-all
	return result{engine: "river", jobs: n, wall: time.Since(start), p50: lat.pct(0.5), p99: lat.pct(0.99)}, nil
}

// freshDB creates a database for one round and returns its DSN and a
// function that drops it.
func freshDB(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("heph_bench_%d", rand.Int64())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		_, _ = conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		conn.Close(ctx)
	}, nil
}

func splitComma(s string) []string {
	var out []string
	cur := ""
	for _, r := range s + "," {
		if r == ',' {
			if cur != "" {
				out = append(out, cur)
			}
			cur = ""
			continue
		}
		cur += string(r)
	}
	return out
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
