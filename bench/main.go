// Command bench runs Hephaestus side by side with its peers, in one run
// against one PostgreSQL server, rounds interleaved so that every engine
// meets the same machine:
//
//   - workloads (a), (b) and (c) of docs/benchmarks.md: Hephaestus flows,
//     Hephaestus code-first workflows and DBOS Transact Go, on PostgreSQL
//     and on SQLite (synchronous FULL unless -sqlite-sync says otherwise);
//   - the jobs workload: Hephaestus and River, on PostgreSQL;
//   - the raw references: one-row INSERT transactions on the same server
//     with 1 and 8 clients, and one-row commits on a bare SQLite file.
//
// Run it from this directory:
//
//	go run . -workloads a,b,c,jobs -engines heph,dbos,river -rounds 3
//
// It has its own go.mod so that no peer ever becomes a dependency of the
// library. Every engine gets a fresh database (or SQLite file) for each
// workload and round, dropped after; the engines' order rotates from one
// round to the next. At the end it prints the median of the rounds for
// each engine and the ratios Hephaestus/peer.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/app/benchrun"
)

// workload is one of the measured workloads.
type workload struct {
	key     string // its -workloads name
	title   string // as printed
	latency bool   // compared on p50, lower is better; otherwise on the rate
	lower   bool   // a figure that is better lower (bytes), compared as it is
}

var allWorkloads = []workload{
	{key: "a", title: "(a) runs/s, 1,000 runs, 50 callers"},
	{key: "b", title: "(b) one-step start-to-result ms, p50 / p90 / p99", latency: true},
	{key: "c", title: "(c) 10-step chain start-to-result ms, p50 / p90 / p99", latency: true},
	{key: "jobs", title: "jobs/s; insert-to-completion ms, p50 / p99"},
	{key: "bytes", title: "bytes on disk per finished one-step run (10,000 runs, then VACUUM)", lower: true},
	{key: "growth", title: "database growth per finished one-step run (20,000 runs, autovacuum only)", lower: true},
	{key: "steady", title: "database growth per finished one-step run in service (20,000 runs after 20,000, autovacuum only)", lower: true},
}

// contestant is one engine, in one variant, on one backend.
type contestant struct {
	label   string // as printed: "Hephaestus flows", "DBOS", ...
	engine  string // the -engines name that selects it
	backend string
	heph    bool // Hephaestus: the numerator of the ratios
	// open sets it up for (a) to (c); nil if it does not take part.
	open func(ctx context.Context, t benchrun.Target) (*benchrun.Caller, error)
	// jobs runs the jobs workload; nil if it does not take part.
	jobs func(ctx context.Context, t benchrun.Target, o benchrun.JobsOptions) (benchrun.JobsResult, error)
}

func (c contestant) key() string { return c.label + " on " + c.backend }

// contestants lists what the flags select, in a fixed order that each
// round rotates.
func contestants(engines, backends []string) []contestant {
	var out []contestant
	for _, b := range backends {
		if slices.Contains(engines, "heph") {
			out = append(out,
				contestant{label: "Hephaestus flows", engine: "heph", backend: b, heph: true, open: benchrun.OpenFlows},
				contestant{label: "Hephaestus workflows", engine: "heph", backend: b, heph: true, open: benchrun.OpenWorkflows})
		}
		if slices.Contains(engines, "dbos") {
			out = append(out, contestant{label: "DBOS", engine: "dbos", backend: b, open: openDBOS})
		}
	}
	if slices.Contains(backends, benchrun.Postgres) {
		if slices.Contains(engines, "heph") {
			out = append(out, contestant{label: "Hephaestus", engine: "heph", backend: benchrun.Postgres, heph: true,
				jobs: func(ctx context.Context, t benchrun.Target, o benchrun.JobsOptions) (benchrun.JobsResult, error) {
					return benchrun.RunJobs(ctx, t, &o)
				}})
		}
		// Flow control's cost: the same jobs through a controlled claim.
		if slices.Contains(engines, "heph-key") {
			out = append(out, contestant{label: "Hephaestus, keys", engine: "heph-key", backend: benchrun.Postgres, heph: true,
				jobs: func(ctx context.Context, t benchrun.Target, o benchrun.JobsOptions) (benchrun.JobsResult, error) {
					return benchrun.RunJobs(ctx, t, benchrun.Keyed(o))
				}})
		}
		if slices.Contains(engines, "heph-rate") {
			out = append(out, contestant{label: "Hephaestus, rate limit", engine: "heph-rate", backend: benchrun.Postgres, heph: true,
				jobs: func(ctx context.Context, t benchrun.Target, o benchrun.JobsOptions) (benchrun.JobsResult, error) {
					return benchrun.RunJobs(ctx, t, benchrun.Rated(o))
				}})
		}
		if slices.Contains(engines, "river") {
			out = append(out, contestant{label: "River", engine: "river", backend: benchrun.Postgres, jobs: runRiver})
		}
	}
	return out
}

// takesPart reports whether c runs workload w.
func (c contestant) takesPart(w workload) bool {
	switch w.key {
	case "jobs":
		return c.jobs != nil
	case "bytes", "growth", "steady": // what a PostgreSQL database keeps
		return c.open != nil && c.backend == benchrun.Postgres
	}
	return c.open != nil
}

type options struct {
	dsn                  string
	jobs, workers, batch int
	history              int
	sqliteSync           string
	sqliteDir            string
}

func main() {
	var o options
	flag.StringVar(&o.dsn, "dsn", envOr("HEPH_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin DSN of the PostgreSQL server")
	flag.IntVar(&o.jobs, "jobs", 20000, "jobs per round (jobs workload)")
	flag.IntVar(&o.workers, "workers", 100, "workers (jobs workload)")
	flag.IntVar(&o.batch, "batch", 1000, "jobs per insert batch (jobs workload)")
	flag.IntVar(&o.history, "history", 0, "finished one-step runs to put in Hephaestus's database before each workload, untimed (on PostgreSQL, beyond 1,000 they are copies of 1,000 run as jobs)")
	flag.IntVar(&riverConns, "river-conns", 0, "River's pool size (0: pgxpool's default, max(4, cores); Hephaestus's store keeps 16)")
	rounds := flag.Int("rounds", 3, "rounds (the median is reported)")
	engines := flag.String("engines", "heph,dbos,river", "engines to run: heph, dbos, river, and heph-key, heph-rate (the jobs workload under flow control)")
	workloads := flag.String("workloads", "a,b,c,jobs", "workloads to run: a, b, c, jobs, bytes, growth, steady")
	backends := flag.String("backends", "postgres,sqlite", "backends for (a) to (c): postgres, sqlite (jobs runs on postgres)")
	flag.StringVar(&o.sqliteSync, "sqlite-sync", "FULL", "SQLite synchronous mode, for every engine: FULL or NORMAL")
	flag.StringVar(&o.sqliteDir, "sqlite-dir", "", "directory for the SQLite files (default: the system's temporary directory)")
	raw := flag.Duration("raw", 2*time.Second, "duration of each raw reference measurement per round (0: none)")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile")
	flag.Parse()

	var ws []workload
	for _, k := range splitComma(*workloads) {
		i := slices.IndexFunc(allWorkloads, func(w workload) bool { return w.key == k })
		if i < 0 {
			log.Fatalf("unknown workload %q", k)
		}
		ws = append(ws, allWorkloads[i])
	}
	es, bs := splitComma(*engines), splitComma(*backends)
	for _, e := range es {
		if !slices.Contains([]string{"heph", "heph-key", "heph-rate", "dbos", "river"}, e) {
			log.Fatalf("unknown engine %q", e)
		}
	}
	for _, b := range bs {
		if b != benchrun.Postgres && b != benchrun.SQLite {
			log.Fatalf("unknown backend %q", b)
		}
	}
	if *rounds < 1 {
		log.Fatal("-rounds must be at least 1")
	}
	o.sqliteSync = strings.ToUpper(o.sqliteSync)
	if o.sqliteSync != "FULL" && o.sqliteSync != "NORMAL" {
		log.Fatalf("-sqlite-sync must be FULL or NORMAL, got %q", o.sqliteSync)
	}
	cs := contestants(es, bs)

	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			log.Fatal(err)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	usePG := slices.Contains(bs, benchrun.Postgres)
	fmt.Printf("%s, %d CPUs, GOMAXPROCS %d; %s\n", runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0), serverVersion(ctx, o.dsn, usePG))
	fmt.Printf("load average at start: %s\n", loadAverage())

	refs := map[string][]float64{}
	all := map[string][]benchrun.Measure{} // by workload key + contestant key
	for round := range *rounds {
		if *raw > 0 {
			if err := measureRaw(ctx, o, *raw, usePG, slices.Contains(bs, benchrun.SQLite), refs); err != nil {
				log.Fatalf("raw reference: %v", err)
			}
		}
		for _, w := range ws {
			var order []contestant
			for _, c := range cs {
				if c.takesPart(w) {
					order = append(order, c)
				}
			}
			if len(order) == 0 {
				continue
			}
			r := round % len(order)
			order = append(order[r:], order[:r]...)
			for _, c := range order {
				m, err := measureOne(ctx, o, w, c)
				if err != nil {
					log.Fatalf("%s, %s: %v", w.title, c.key(), err)
				}
				fmt.Printf("round %d  %-4s %-32s %s\n", round+1, w.key, c.key(), formatMeasure(w, m))
				all[w.key+"|"+c.key()] = append(all[w.key+"|"+c.key()], m)
			}
		}
	}
	fmt.Printf("load average at end: %s\n\n", loadAverage())
	report(*rounds, o, ws, cs, refs, all)
}

// measureOne runs workload w once on c, in a fresh database or SQLite
// file that is removed after.
func measureOne(ctx context.Context, o options, w workload, c contestant) (benchrun.Measure, error) {
	t := benchrun.Target{Backend: c.backend, Sync: o.sqliteSync}
	switch c.backend {
	case benchrun.Postgres:
		dsn, drop, err := freshDB(ctx, o.dsn)
		if err != nil {
			return benchrun.Measure{}, err
		}
		defer drop()
		t.Where = dsn
	case benchrun.SQLite:
		dir, err := os.MkdirTemp(o.sqliteDir, "heph-bench-")
		if err != nil {
			return benchrun.Measure{}, err
		}
		defer os.RemoveAll(dir)
		t.Where = filepath.Join(dir, "bench.db")
	}
	if c.heph && o.history > 0 {
		start := time.Now()
		if err := benchrun.Fill(ctx, t, o.history); err != nil {
			return benchrun.Measure{}, fmt.Errorf("fill with %d finished runs: %w", o.history, err)
		}
		fmt.Fprintf(os.Stderr, "hephaestus: %d finished runs in %v\n", o.history, time.Since(start).Round(time.Second))
	}
	if w.key == "jobs" {
		r, err := c.jobs(ctx, t, benchrun.JobsOptions{Jobs: o.jobs, Workers: o.workers, Batch: o.batch})
		if err != nil {
			return benchrun.Measure{}, err
		}
		fmt.Fprintf(os.Stderr, "%s: inserted in %v\n", r.Engine, r.Inserted)
		return benchrun.Measure{Rate: float64(r.Jobs) / r.Wall.Seconds(), P50: r.P50, P99: r.P99}, nil
	}
	cl, err := c.open(ctx, t)
	if err != nil {
		return benchrun.Measure{}, err
	}
	defer cl.Close()
	switch w.key {
	case "bytes":
		return benchrun.BytesPerRun(ctx, t.Where, cl.One)
	case "growth":
		return benchrun.GrowthPerRun(ctx, t.Where, cl.One)
	case "steady":
		return benchrun.SteadyPerRun(ctx, t.Where, cl.One)
	case "a":
		return benchrun.Throughput(ctx, cl.One)
	case "b":
		return benchrun.Latency(ctx, benchrun.LatencyRuns, cl.One)
	default:
		return benchrun.Latency(ctx, benchrun.ChainRuns, cl.Chain)
	}
}

// Keys of the raw references.
const (
	refPG1     = "PostgreSQL one-row INSERT transactions/s, 1 client"
	refPG8     = "PostgreSQL one-row INSERT transactions/s, 8 clients"
	refSQLite  = "SQLite one-row commits/s (WAL, synchronous %s), 1 connection"
	refClients = 8
)

// measureRaw measures the raw references for one round.
func measureRaw(ctx context.Context, o options, d time.Duration, pg, lite bool, refs map[string][]float64) error {
	if pg {
		dsn, drop, err := freshDB(ctx, o.dsn)
		if err != nil {
			return err
		}
		one, err := benchrun.RawPostgres(ctx, dsn, "", 1, d)
		var eight float64
		if err == nil {
			eight, err = benchrun.RawPostgres(ctx, dsn, "", refClients, d)
		}
		drop()
		if err != nil {
			return err
		}
		refs[refPG1] = append(refs[refPG1], one)
		refs[refPG8] = append(refs[refPG8], eight)
		fmt.Printf("raw  PostgreSQL one-row INSERT tx/s: 1 client %.0f, %d clients %.0f\n", one, refClients, eight)
	}
	if lite {
		dir, err := os.MkdirTemp(o.sqliteDir, "heph-bench-raw-")
		if err != nil {
			return err
		}
		rate, err := benchrun.RawSQLite(filepath.Join(dir, "raw.db"), o.sqliteSync, d)
		_ = os.RemoveAll(dir)
		if err != nil {
			return err
		}
		k := fmt.Sprintf(refSQLite, o.sqliteSync)
		refs[k] = append(refs[k], rate)
		fmt.Printf("raw  SQLite %s one-row commits/s: %.0f\n", o.sqliteSync, rate)
	}
	return nil
}

// report prints the medians of the rounds and the ratios Hephaestus/peer
// as Markdown tables.
func report(rounds int, o options, ws []workload, cs []contestant, refs map[string][]float64, all map[string][]benchrun.Measure) {
	fmt.Printf("Median of %d rounds.\n\n", rounds)
	if len(refs) > 0 {
		fmt.Println("| raw reference | median | rounds |")
		fmt.Println("|---|---|---|")
		for _, k := range []string{refPG1, refPG8, fmt.Sprintf(refSQLite, o.sqliteSync)} {
			if xs := refs[k]; len(xs) > 0 {
				fmt.Printf("| %s | %s | %s |\n", k, thousands(median(xs)), joinRates(xs))
			}
		}
		fmt.Println()
	}

	fmt.Println("| workload | backend | engine | median | rounds |")
	fmt.Println("|---|---|---|---|---|")
	for _, w := range ws {
		for _, c := range cs {
			ms := all[w.key+"|"+c.key()]
			if len(ms) == 0 {
				continue
			}
			fmt.Printf("| %s | %s | %s | %s | %s |\n", w.title, c.backend, c.label, formatMeasure(w, medianMeasure(ms)), formatRounds(w, ms))
		}
	}
	fmt.Println()

	fmt.Println("Hephaestus/peer, of the medians: (a) and jobs compare rates (above 1: Hephaestus is faster),")
	fmt.Println("(b) and (c) compare p50 latencies (below 1: Hephaestus is faster), bytes the bytes on disk")
	fmt.Println("per finished run (below 1: Hephaestus keeps less).")
	fmt.Println()
	fmt.Println("| workload | backend | Hephaestus | peer | Hephaestus/peer |")
	fmt.Println("|---|---|---|---|---|")
	var met []targetResult
	for _, w := range ws {
		for _, h := range cs {
			hm := all[w.key+"|"+h.key()]
			if !h.heph || len(hm) == 0 {
				continue
			}
			for _, p := range cs {
				pm := all[w.key+"|"+p.key()]
				if p.heph || p.backend != h.backend || len(pm) == 0 {
					continue
				}
				a, b := medianMeasure(hm), medianMeasure(pm)
				for _, r := range ratios(w, a, b) {
					fmt.Printf("| %s | %s | %s | %s | %.2f |\n", r.label, h.backend, h.label, p.label, r.ratio)
					if t, ok := targets[w.key+" "+r.label+" "+h.backend]; ok {
						met = append(met, targetResult{r.label, h.backend, h.label, p.label, r.ratio, t})
					}
				}
			}
		}
	}
	printTargets(met)
	flowControlCost(cs, all)
}

// ratio is one Hephaestus/peer figure of a workload.
type ratio struct {
	label string
	ratio float64
}

// ratios are the figures a workload compares: the rate, or the p50 and
// the p99 of the latencies, or the bytes.
func ratios(w workload, a, b benchrun.Measure) []ratio {
	switch {
	case w.latency:
		return []ratio{
			{"(" + w.key + ") p50", float64(a.P50) / float64(b.P50)},
			{"(" + w.key + ") p99", float64(a.P99) / float64(b.P99)},
		}
	case w.key == "jobs":
		return []ratio{{"jobs/s", a.Rate / b.Rate}}
	case w.key == "bytes":
		return []ratio{{"bytes per run", a.Rate / b.Rate}}
	case w.key == "growth":
		return []ratio{{"growth per run", a.Rate / b.Rate}}
	case w.key == "steady":
		return []ratio{{"growth per run in service", a.Rate / b.Rate}}
	}
	return []ratio{{"(" + w.key + ") runs/s", a.Rate / b.Rate}}
}

// target is a ratio that issue 31 of the project sets: at least or at
// most a figure.
type target struct {
	atLeast bool
	limit   float64
}

// targets, by workload key, ratio label and backend.
var targets = map[string]target{
	"a (a) runs/s postgres":                     {true, 3},
	"b (b) p50 postgres":                        {false, 0.8},
	"b (b) p99 postgres":                        {false, 1.0},
	"c (c) p50 postgres":                        {false, 0.8},
	"c (c) p99 postgres":                        {false, 1.0},
	"jobs jobs/s postgres":                      {true, 1.5},
	"bytes bytes per run postgres":              {false, 1.0},
	"growth growth per run postgres":            {false, 1.0},
	"steady growth per run in service postgres": {false, 1.0},
	"a (a) runs/s sqlite":                       {true, 10},
	"c (c) p50 sqlite":                          {false, 0.7},
}

type targetResult struct {
	label, backend, heph, peer string
	ratio                      float64
	t                          target
}

// printTargets prints each ratio that has a target, and whether this run
// met it.
func printTargets(rs []targetResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("| target | backend | Hephaestus | peer | ratio | |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rs {
		want, ok := fmt.Sprintf("≤ %.1f", r.t.limit), r.ratio <= r.t.limit
		if r.t.atLeast {
			want, ok = fmt.Sprintf("≥ %.1f", r.t.limit), r.ratio >= r.t.limit
		}
		verdict := "missed"
		if ok {
			verdict = "met"
		}
		fmt.Printf("| %s %s | %s | %s | %s | %.2f | %s |\n", r.label, want, r.backend, r.heph, r.peer, r.ratio, verdict)
	}
}

// flowControlCost prints the jobs rates under flow control as ratios of
// the plain jobs rate of the same run (below 1: the controlled claim
// costs that much throughput).
func flowControlCost(cs []contestant, all map[string][]benchrun.Measure) {
	var plain []benchrun.Measure
	for _, c := range cs {
		if c.engine == "heph" && c.jobs != nil {
			plain = all["jobs|"+c.key()]
		}
	}
	if len(plain) == 0 {
		return
	}
	first := true
	for _, c := range cs {
		ms := all["jobs|"+c.key()]
		if (c.engine != "heph-key" && c.engine != "heph-rate") || len(ms) == 0 {
			continue
		}
		if first {
			fmt.Println()
			fmt.Println("Flow control: jobs/s under flow control / plain jobs/s, of the medians.")
			fmt.Println()
			fmt.Println("| jobs workload | jobs/s | plain jobs/s | ratio |")
			fmt.Println("|---|---|---|---|")
			first = false
		}
		a, b := medianMeasure(ms), medianMeasure(plain)
		fmt.Printf("| %s | %s | %s | %.2f |\n", c.label, thousands(a.Rate), thousands(b.Rate), a.Rate/b.Rate)
	}
}

// formatMeasure prints m as workload w reports it.
func formatMeasure(w workload, m benchrun.Measure) string {
	switch {
	case w.key == "jobs":
		return fmt.Sprintf("%s; %s / %s", thousands(m.Rate), fmtMs(m.P50), fmtMs(m.P99))
	case w.latency:
		return fmt.Sprintf("%s / %s / %s", fmtMs(m.P50), fmtMs(m.P90), fmtMs(m.P99))
	case w.lower && m.Detail != "":
		return thousands(m.Rate) + " (" + m.Detail + ")"
	}
	return thousands(m.Rate)
}

// formatRounds prints the figure each round gave: the rate, or the p50.
func formatRounds(w workload, ms []benchrun.Measure) string {
	if w.latency {
		parts := make([]string, len(ms))
		for i, m := range ms {
			parts[i] = fmtMs(m.P50)
		}
		return "p50 " + strings.Join(parts, " / ")
	}
	rates := make([]float64, len(ms))
	for i, m := range ms {
		rates[i] = m.Rate
	}
	return joinRates(rates)
}

// medianMeasure takes the median of each figure separately.
func medianMeasure(ms []benchrun.Measure) benchrun.Measure {
	pick := func(f func(m benchrun.Measure) float64) float64 {
		xs := make([]float64, len(ms))
		for i, m := range ms {
			xs[i] = f(m)
		}
		return median(xs)
	}
	dur := func(f func(m benchrun.Measure) time.Duration) time.Duration {
		return time.Duration(pick(func(m benchrun.Measure) float64 { return float64(f(m)) }))
	}
	return benchrun.Measure{
		Rate: pick(func(m benchrun.Measure) float64 { return m.Rate }),
		P50:  dur(func(m benchrun.Measure) time.Duration { return m.P50 }),
		P90:  dur(func(m benchrun.Measure) time.Duration { return m.P90 }),
		P99:  dur(func(m benchrun.Measure) time.Duration { return m.P99 }),
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.SortFunc(s, cmp.Compare)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func joinRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = thousands(x)
	}
	return strings.Join(parts, " / ")
}

// fmtMs prints a duration in milliseconds with three significant digits
// or so.
func fmtMs(d time.Duration) string {
	switch v := benchrun.Ms(d); {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// thousands prints x rounded, with thousands separated by commas.
func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// freshDB creates a database and returns its DSN and a function that drops
// it (even after ctx is cancelled).
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
		_, _ = conn.Exec(context.Background(), "DROP DATABASE "+name)
		conn.Close(ctx)
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		bg := context.Background()
		if _, err := conn.Exec(bg, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			log.Printf("drop database %s: %v", name, err)
		}
		conn.Close(bg)
	}, nil
}

// serverVersion names the PostgreSQL server, if it is used.
func serverVersion(ctx context.Context, dsn string, use bool) string {
	if !use {
		return "no PostgreSQL"
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		log.Fatal(err)
	}
	return "PostgreSQL " + v
}

// loadAverage returns the system's load averages where /proc gives them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
