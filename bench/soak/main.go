// Command soak starts runs at a fixed rate for a while against a server
// with HTTP workers, and reports, per interval, the start requests'
// latency (p50, p99, p99.9, max), the process's RSS and goroutines, and
// the runs acknowledged and completed (issue 35).
//
// The server runs in this process (as `heph server` does: the engine, the
// HTTP API and its workers' protocol), on a new SQLite file or a new
// PostgreSQL schema; the workers are the example Python workers
// (examples/python-worker/heph_worker.py), as separate processes that
// long-poll for the document's actions. Each start is `POST /api/v1/runs`
// of the document "quote" (two remote steps), timed from the request to
// its answer on one of a pool of keep-alive connections.
//
//	cd bench && go run ./soak -backend postgres -rate 50 -duration 10m
//
// RSS and goroutines are this process's: the server's, plus the driver's
// own (a goroutine per start in flight).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

type options struct {
	backend, dsn, worker, dir string
	schema                    string
	rate                      float64
	duration, interval        time.Duration
	workers, maxTasks         int
	minConns                  int
	settle, traceSlow, warmup time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.backend, "backend", "postgres", "postgres or sqlite")
	flag.StringVar(&o.dsn, "dsn", envOr("HEPH_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin DSN of the PostgreSQL server (a new schema is made and dropped)")
	flag.StringVar(&o.dir, "sqlite-dir", "", "directory of the SQLite file (default: a temporary one)")
	flag.StringVar(&o.worker, "worker", "../examples/python-worker/heph_worker.py", "the example Python worker")
	flag.Float64Var(&o.rate, "rate", 50, "starts per second")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to start runs")
	flag.DurationVar(&o.interval, "interval", 30*time.Second, "reporting interval")
	flag.IntVar(&o.workers, "workers", 2, "Python worker processes")
	flag.IntVar(&o.maxTasks, "max-tasks", 16, "tasks each worker runs at once")
	flag.DurationVar(&o.traceSlow, "trace-slow", 0, "print PostgreSQL statements, prepares, connects and pool waits slower than this (0: none)")
	flag.IntVar(&o.minConns, "min-conns", 8, "PostgreSQL connections kept open (postgres.Config.MinConns; heph server's --postgres-min-conns)")
	flag.StringVar(&o.schema, "schema", "", "PostgreSQL schema to use and keep (default: a new one, dropped at the end)")
	flag.DurationVar(&o.warmup, "warmup", 0, "start runs at the same rate for this long first, reported apart")
	flag.DurationVar(&o.settle, "settle", 0, "wait this long after starting the workers before starting runs")
	flag.Parse()
	if o.rate <= 0 || o.duration <= 0 || o.interval <= 0 || o.workers < 1 {
		log.Fatal("soak: -rate, -duration, -interval and -workers must be positive")
	}
	if err := soak(context.Background(), &o); err != nil {
		log.Fatal("soak: ", err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// env is the server under test.
type env struct {
	url, admin, workerToken, worker string
	http                            *http.Client
}

func soak(ctx context.Context, o *options) error {
	st, cleanup, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	defer cleanup()
	e, stop, err := startServer(ctx, st)
	if err != nil {
		return err
	}
	defer stop()
	for i := range o.workers {
		w, err := startWorker(e, o, fmt.Sprintf("soak-py-%d", i))
		if err != nil {
			return err
		}
		defer func() { _ = w.Process.Kill(); _ = w.Wait() }()
	}
	fmt.Printf("soak: %s, %.0f starts/s for %s, %d Python workers × %d tasks, %s, GOMAXPROCS %d\n",
		o.backend, o.rate, o.duration, o.workers, o.maxTasks, runtime.Version(), runtime.GOMAXPROCS(0))
	if err := e.waitWorkers(ctx, o.workers, time.Minute); err != nil {
		return err
	}
	time.Sleep(o.settle)
	var warm []string
	if o.warmup > 0 {
		w, wo := &driver{e: e}, *o
		wo.duration = o.warmup
		fmt.Printf("warm-up (not counted below):\n")
		w.run(ctx, &wo)
		warm = w.ids
		fmt.Printf("\nmeasured:\n")
	}
	d := &driver{e: e, ids: warm}
	d.run(ctx, o)
	return d.drain(ctx, st)
}

func openStore(ctx context.Context, o *options) (store.Store, func(), error) {
	switch o.backend {
	case "sqlite":
		dir := o.dir
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "heph-soak-"); err != nil {
				return nil, nil, err
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("soak-%d.db", time.Now().UnixNano()))
		st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = st.Close(); _ = os.Remove(path) }, nil
	case "postgres":
		schema := fmt.Sprintf("soak_%d", time.Now().UnixNano())
		if o.schema != "" {
			schema = o.schema
		}
		conn, err := pgx.Connect(ctx, o.dsn)
		if err != nil {
			return nil, nil, err
		}
		if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
			_ = conn.Close(ctx)
			return nil, nil, err
		}
		pc := &postgres.Config{DSN: o.dsn, Schema: schema, MinConns: o.minConns}
		if o.traceSlow > 0 {
			pc.QueryTracer = &slowTracer{limit: o.traceSlow, start: time.Now()}
		}
		st, err := postgres.Open(ctx, pc)
		if err != nil {
			_ = conn.Close(ctx)
			return nil, nil, err
		}
		return st, func() {
			_ = st.Close()
			if o.schema == "" {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			}
			_ = conn.Close(context.Background())
		}, nil
	}
	return nil, nil, fmt.Errorf("-backend %q: want postgres or sqlite", o.backend)
}

// quoteDoc is the example worker's document (examples/python-worker).
const quoteDoc = `name: quote
search_attributes: {tier: keyword}
defaults:
  timeout: 1m
  retry: {max_attempts: 3, initial_backoff: 1s}
steps:
  customer:
    action: lookup_customer
    args: {customer: "{{input.customer}}"}
    next: price
  price:
    action: quote
    args: {amount: "{{input.amount}}", tier: "{{steps.customer.output.tier}}"}
    done: true
`

func startServer(ctx context.Context, st store.Store) (*env, func(), error) {
	c, err := heph.New(&heph.Config{Store: st, LeaseDuration: 30 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	reg := flowdoc.NewRegistry()
	reg.SetFallback(flowdoc.RemoteAction)
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		return nil, nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	srv, err := server.New(&server.Config{Client: c, Store: st})
	if err != nil {
		return nil, nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		wg.Wait()
		srv.Stop()
		_ = c.Stop(sctx)
	}
	admin, ok := st.(store.Admin)
	if !ok {
		stop()
		return nil, nil, errors.New("the store keeps no tokens")
	}
	_, _, at, err := server.NewToken(ctx, admin, &server.TokenParams{Principal: "soak-admin", Role: server.RoleAdmin}, time.Now())
	if err != nil {
		stop()
		return nil, nil, err
	}
	_, _, wt, err := server.NewToken(ctx, admin, &server.TokenParams{Principal: "soak-python", Service: true, Role: server.RoleWorker}, time.Now())
	if err != nil {
		stop()
		return nil, nil, err
	}
	e := &env{url: "http://" + ln.Addr().String(), admin: at, workerToken: wt,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: time.Minute}}
	if _, err := e.call(ctx, "POST", "/documents", map[string]any{"name": "quote", "format": "yaml", "content": quoteDoc}); err != nil {
		stop()
		return nil, nil, err
	}
	return e, stop, nil
}

func startWorker(e *env, o *options, id string) (*exec.Cmd, error) {
	e.worker = o.worker
	cmd := exec.Command("python3", o.worker, "--addr", e.url, "--worker-id", id, "--max-tasks", strconv.Itoa(o.maxTasks))
	cmd.Env = append(os.Environ(), "HEPH_TOKEN="+e.workerToken, "PYTHONUNBUFFERED=1")
	cmd.Stdout, cmd.Stderr = io.Discard, &dropTasks{w: os.Stderr} // a line per task, and its errors
	return cmd, cmd.Start()
}

// waitWorkers waits until n workers have registered with the server, so
// that the first starts are not measured against Python's start-up.
func (e *env) waitWorkers(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		raw, err := e.call(ctx, "GET", "/workers", nil)
		if err != nil {
			return err
		}
		var ws []json.RawMessage
		if err := json.Unmarshal(raw, &ws); err != nil {
			return err
		}
		if len(ws) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d workers registered after %s (is -worker %q right?)", len(ws), n, limit, e.worker)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dropTasks writes the lines of a worker's output but those that report a
// task.
type dropTasks struct {
	w    io.Writer
	part []byte
}

func (d *dropTasks) Write(p []byte) (int, error) {
	d.part = append(d.part, p...)
	for {
		i := bytes.IndexByte(d.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := d.part[:i+1]; !bytes.HasPrefix(line, []byte("task ")) {
			_, _ = d.w.Write(line)
		}
		d.part = d.part[i+1:]
	}
}

// call sends a request with the admin token and returns a 2xx answer's
// body.
func (e *env) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+"/api/v1"+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return raw, nil
}

// driver starts the runs and keeps what it measured.
type driver struct {
	e *env

	mu       sync.Mutex
	interval []time.Duration // start latencies of the current interval
	all      []time.Duration
	ids      []string
	failed   atomic.Int64
	firstErr atomic.Value
}

func (d *driver) run(ctx context.Context, o *options) {
	every := time.Duration(float64(time.Second) / o.rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	report := time.NewTicker(o.interval)
	defer report.Stop()
	end := time.After(o.duration)
	start := time.Now()
	var wg sync.WaitGroup
	var n int64
	fmt.Println("| at s | starts | p50 ms | p99 ms | p99.9 ms | max ms | >100 ms | failed | RSS MiB | goroutines |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for {
		select {
		case <-tick.C:
			n++
			body := map[string]any{"kind": "document", "name": "quote",
				"input": map[string]any{"customer": fmt.Sprintf("c-%d", n%97), "amount": 100}}
			wg.Go(func() { d.start(ctx, body) })
		case <-report.C:
			d.report(time.Since(start))
		case <-end:
			wg.Wait()
			d.report(time.Since(start))
			d.mu.Lock()
			all := slices.Clone(d.all)
			d.mu.Unlock()
			fmt.Printf("\nall %d starts: %s\n", len(all), summary(all))
			return
		}
	}
}

func (d *driver) start(ctx context.Context, body map[string]any) {
	t0 := time.Now()
	raw, err := d.e.call(ctx, "POST", "/runs", body)
	took := time.Since(t0)
	if err != nil {
		d.failed.Add(1)
		d.firstErr.CompareAndSwap(nil, err.Error())
		return
	}
	var r struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.ID == "" {
		d.failed.Add(1)
		return
	}
	d.mu.Lock()
	d.interval = append(d.interval, took)
	d.all = append(d.all, took)
	d.ids = append(d.ids, r.ID)
	d.mu.Unlock()
}

func (d *driver) report(at time.Duration) {
	d.mu.Lock()
	lat := d.interval
	d.interval = nil
	d.mu.Unlock()
	slices.Sort(lat)
	over := len(lat) - sortIndex(lat, 100*time.Millisecond)
	fmt.Printf("| %.0f | %d | %s | %d | %d | %.0f | %d |\n", at.Seconds(), len(lat), figures(lat), over, d.failed.Load(), rssMiB(), runtime.NumGoroutine())
}

func sortIndex(sorted []time.Duration, d time.Duration) int {
	i, _ := slices.BinarySearch(sorted, d)
	return i
}

// figures are p50 | p99 | p99.9 | max of sorted latencies, in ms.
func figures(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "- | - | - | -"
	}
	return fmt.Sprintf("%.2f | %.2f | %.2f | %.2f", ms(pct(sorted, 50)), ms(pct(sorted, 99)), ms(pct(sorted, 99.9)), ms(sorted[len(sorted)-1]))
}

func summary(all []time.Duration) string {
	slices.Sort(all)
	over := len(all) - sortIndex(all, 100*time.Millisecond)
	return fmt.Sprintf("p50 | p99 | p99.9 | max ms = %s; %d over 100 ms", figures(all), over)
}

// pct is the nearest-rank percentile of sorted.
func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rssMiB is this process's resident set size (Linux; 0 elsewhere).
func rssMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// drain waits until every acknowledged run has ended and reports how
// many completed, failed, or are missing.
func (d *driver) drain(ctx context.Context, st store.Store) error {
	d.mu.Lock()
	ids := slices.Clone(d.ids)
	d.mu.Unlock()
	if e, ok := d.firstErr.Load().(string); ok {
		fmt.Printf("first failed start: %s\n", e)
	}
	deadline := time.Now().Add(10 * time.Minute)
	completed, other := 0, map[string]int{}
	for _, id := range ids {
		for {
			r, err := st.GetRun(ctx, id)
			if err != nil {
				other["missing: "+err.Error()]++
				break
			}
			if r.Status.Terminal() {
				if r.Status == heph.StatusCompleted {
					completed++
				} else {
					other[string(r.Status)]++
				}
				break
			}
			if time.Now().After(deadline) {
				other["not ended after 10 minutes"]++
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fmt.Printf("acknowledged %d, completed %d, failed starts %d, other %v\n", len(ids), completed, d.failed.Load(), other)
	if completed != len(ids) {
		return fmt.Errorf("%d of %d acknowledged runs did not complete", len(ids)-completed, len(ids))
	}
	return nil
}
