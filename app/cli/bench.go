package cli

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/hephaestus-go/hephaestus/app/benchrun"
)

// benchWorkload is a workload heph bench runs.
type benchWorkload struct {
	Key, Title string
	latency    bool
	units      int // calls made, for the progress bar
}

var benchWorkloads = []benchWorkload{
	{Key: "a", Title: "(a) runs/s, 1,000 runs, 50 callers", units: benchrun.WarmupCalls + benchrun.ThroughputRuns},
	{Key: "b", Title: "(b) one-step start-to-result ms, p50 / p90 / p99", latency: true, units: benchrun.WarmupCalls + benchrun.LatencyRuns},
	{Key: "c", Title: "(c) 10-step chain start-to-result ms, p50 / p90 / p99", latency: true, units: benchrun.WarmupCalls + benchrun.ChainRuns},
	{Key: "jobs", Title: "jobs/s; insert-to-completion ms, p50 / p99"},
}

// benchRow is one workload on one backend and engine, as -o json prints
// it; rates are per second, latencies in milliseconds.
type benchRow struct {
	Workload string         `json:"workload"`
	Backend  string         `json:"backend"`
	Engine   string         `json:"engine"`
	Median   benchFigures   `json:"median"`
	Rounds   []benchFigures `json:"rounds"`
	latency  bool
}

type benchFigures struct {
	Rate  float64 `json:"rate,omitempty"`
	P50ms float64 `json:"p50_ms,omitempty"`
	P90ms float64 `json:"p90_ms,omitempty"`
	P99ms float64 `json:"p99_ms,omitempty"`
}

func figures(m benchrun.Measure) benchFigures {
	return benchFigures{Rate: m.Rate, P50ms: benchrun.Ms(m.P50), P90ms: benchrun.Ms(m.P90), P99ms: benchrun.Ms(m.P99)}
}

type benchOptions struct {
	workloads, engines, backends []string
	rounds                       int
	sync, dir, dsn               string
	jobs                         benchrun.JobsOptions
	raw                          time.Duration
}

func newBench(g *globals) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the standard workloads against a store and print the table",
		Long: "bench runs the standard workloads of docs/benchmarks.md on Hephaestus flows and\n" +
			"code-first workflows, in this process, against a new SQLite file and (with --postgres)\n" +
			"a new schema of a PostgreSQL database, dropped after. It prints the median of the\n" +
			"rounds for each workload, with the raw commit rate of the same store as reference.\n" +
			"(The comparison with River and DBOS lives in bench/, a module of its own.)",
		Example: `  heph bench
  heph bench --workloads a,b,c,jobs --rounds 3 --sqlite-sync NORMAL
  heph bench --postgres postgres://localhost/bench --backends postgres -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("postgres") {
				o.dsn = g.env.getenv(EnvPostgres)
			}
			if !cmd.Flags().Changed("backends") {
				o.backends = []string{benchrun.SQLite}
				if o.dsn != "" {
					o.backends = append(o.backends, benchrun.Postgres)
				}
			}
			if err := o.check(); err != nil {
				return err
			}
			rows, refs, err := runBench(cmd.Context(), g, &o)
			if err != nil {
				return err
			}
			return g.emitValue(map[string]any{"references": refs, "results": rows}, func(w io.Writer) error {
				return printBench(w, &o, rows, refs)
			})
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&o.workloads, "workloads", []string{"a", "b", "c"}, "workloads: a, b, c, jobs")
	fl.StringSliceVar(&o.engines, "engines", []string{"flows", "workflows"}, "Hephaestus flows and/or code-first workflows (for a, b, c)")
	fl.StringSliceVar(&o.backends, "backends", nil, "sqlite and/or postgres (default sqlite, and postgres when a DSN is given)")
	fl.IntVar(&o.rounds, "rounds", 1, "rounds (the median is printed)")
	fl.StringVar(&o.sync, "sqlite-sync", "FULL", "SQLite synchronous mode: FULL or NORMAL")
	fl.StringVar(&o.dir, "sqlite-dir", "", "directory of the SQLite files (default the system's temporary directory)")
	fl.StringVar(&o.dsn, "postgres", "", "PostgreSQL DSN; each measurement gets a new schema, dropped after (default $"+EnvPostgres+")")
	fl.IntVar(&o.jobs.Jobs, "jobs", 5000, "jobs per round of the jobs workload")
	fl.IntVar(&o.jobs.Workers, "workers", 100, "workers of the jobs workload")
	fl.IntVar(&o.jobs.Batch, "batch", 1000, "jobs per insert of the jobs workload")
	fl.DurationVar(&o.raw, "raw", time.Second, "how long each raw reference is measured per round (0: none)")
	return cmd
}

func (o *benchOptions) check() error {
	for _, w := range o.workloads {
		if !slices.ContainsFunc(benchWorkloads, func(b benchWorkload) bool { return b.Key == w }) {
			return usagef("--workloads: unknown workload %q (a, b, c, jobs)", w)
		}
	}
	for _, e := range o.engines {
		if e != "flows" && e != "workflows" {
			return usagef("--engines: unknown engine %q (flows, workflows)", e)
		}
	}
	for _, b := range o.backends {
		if b != benchrun.SQLite && b != benchrun.Postgres {
			return usagef("--backends: unknown backend %q (sqlite, postgres)", b)
		}
	}
	if slices.Contains(o.backends, benchrun.Postgres) && o.dsn == "" {
		return usagef("--backends postgres needs --postgres DSN (or $%s)", EnvPostgres)
	}
	o.sync = strings.ToUpper(o.sync)
	switch {
	case o.sync != "FULL" && o.sync != "NORMAL":
		return usagef("--sqlite-sync must be FULL or NORMAL, got %q", o.sync)
	case o.rounds < 1:
		return usagef("--rounds must be at least 1, got %d", o.rounds)
	case o.jobs.Jobs < 1 || o.jobs.Workers < 1 || o.jobs.Batch < 1:
		return usagef("--jobs, --workers and --batch must be positive")
	case o.raw < 0:
		return usagef("--raw must not be negative, got %v", o.raw)
	}
	return nil
}

// benchCase is one engine on one backend for one workload.
type benchCase struct {
	w               benchWorkload
	backend, engine string
}

func (o *benchOptions) cases() []benchCase {
	var out []benchCase
	for _, w := range benchWorkloads {
		if !slices.Contains(o.workloads, w.Key) {
			continue
		}
		for _, b := range o.backends {
			if w.Key == "jobs" {
				out = append(out, benchCase{w, b, "jobs"})
				continue
			}
			for _, e := range o.engines {
				out = append(out, benchCase{w, b, e})
			}
		}
	}
	return out
}

// runBench runs every case o.rounds times, with a progress bar of the
// calls made, and returns the rows and the raw references (by backend,
// commits or transactions per second).
func runBench(ctx context.Context, g *globals, o *benchOptions) ([]*benchRow, map[string]float64, error) {
	cases := o.cases()
	total := 0
	for _, c := range cases {
		if c.w.Key == "jobs" {
			total += o.jobs.Jobs * o.rounds
		} else {
			total += c.w.units * o.rounds
		}
	}
	bar := g.newProgress(ctx, "bench")
	var done atomic.Int64
	tick := func(n int) { bar.Set(int(done.Add(int64(n))), total) }
	rows := make([]*benchRow, len(cases))
	measures := make([][]benchrun.Measure, len(cases))
	refs := map[string][]float64{}
	for range o.rounds {
		if o.raw > 0 {
			if err := benchRaw(ctx, o, refs); err != nil {
				bar.Finish(false)
				return nil, nil, fmt.Errorf("raw reference: %w", err)
			}
		}
		for i, c := range cases {
			m, err := benchOne(ctx, o, c, tick)
			if err != nil {
				bar.Finish(false)
				return nil, nil, fmt.Errorf("%s on %s, %s: %w", c.w.Title, c.backend, c.engine, err)
			}
			measures[i] = append(measures[i], m)
		}
	}
	bar.Finish(true)
	for i, c := range cases {
		r := &benchRow{Workload: c.w.Key, Backend: c.backend, Engine: c.engine, latency: c.w.latency}
		for _, m := range measures[i] {
			r.Rounds = append(r.Rounds, figures(m))
		}
		r.Median = figures(medianOf(measures[i]))
		rows[i] = r
	}
	med := map[string]float64{}
	for k, xs := range refs {
		med[k] = median(xs)
	}
	return rows, med, nil
}

// benchOne measures one case once, on a new SQLite file or PostgreSQL
// schema, removed after.
func benchOne(ctx context.Context, o *benchOptions, c benchCase, tick func(int)) (benchrun.Measure, error) {
	t, drop, err := o.target(ctx, c.backend)
	if err != nil {
		return benchrun.Measure{}, err
	}
	defer drop()
	if c.w.Key == "jobs" {
		r, err := benchrun.RunJobs(ctx, t, &o.jobs)
		if err != nil {
			return benchrun.Measure{}, err
		}
		tick(r.Jobs)
		return benchrun.Measure{Rate: float64(r.Jobs) / r.Wall.Seconds(), P50: r.P50, P99: r.P99}, nil
	}
	open := benchrun.OpenFlows
	if c.engine == "workflows" {
		open = benchrun.OpenWorkflows
	}
	cl, err := open(ctx, t)
	if err != nil {
		return benchrun.Measure{}, err
	}
	defer cl.Close()
	counted := func(fn func(ctx context.Context, in int) error) func(ctx context.Context, in int) error {
		return func(ctx context.Context, in int) error {
			err := fn(ctx, in)
			tick(1)
			return err
		}
	}
	switch c.w.Key {
	case "a":
		return benchrun.Throughput(ctx, counted(cl.One))
	case "b":
		return benchrun.Latency(ctx, benchrun.LatencyRuns, counted(cl.One))
	}
	return benchrun.Latency(ctx, benchrun.ChainRuns, counted(cl.Chain))
}

// target makes a new place for one measurement: a SQLite file in a new
// directory, or a new schema of the PostgreSQL database; drop removes it.
func (o *benchOptions) target(ctx context.Context, backend string) (benchrun.Target, func(), error) {
	if backend == benchrun.SQLite {
		dir, err := os.MkdirTemp(o.dir, "heph-bench-")
		if err != nil {
			return benchrun.Target{}, nil, err
		}
		return benchrun.Target{Backend: backend, Where: filepath.Join(dir, "bench.db"), Sync: o.sync}, func() { _ = os.RemoveAll(dir) }, nil
	}
	schema := fmt.Sprintf("heph_bench_%d", rand.Uint32())
	return benchrun.Target{Backend: backend, Where: o.dsn, Schema: schema}, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(dctx, o.dsn)
		if err != nil {
			return
		}
		defer conn.Close(dctx)
		_, _ = conn.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}, nil
}

// The keys of the raw references.
const (
	refSQLite   = "sqlite_commits_per_s"
	refPostgres = "postgres_insert_tx_per_s"
)

// benchRaw measures what the stores give to one-row transactions.
func benchRaw(ctx context.Context, o *benchOptions, refs map[string][]float64) error {
	for _, b := range o.backends {
		switch b {
		case benchrun.SQLite:
			dir, err := os.MkdirTemp(o.dir, "heph-bench-raw-")
			if err != nil {
				return err
			}
			rate, err := benchrun.RawSQLite(filepath.Join(dir, "raw.db"), o.sync, o.raw)
			_ = os.RemoveAll(dir)
			if err != nil {
				return err
			}
			refs[refSQLite] = append(refs[refSQLite], rate)
		case benchrun.Postgres:
			t, drop, err := o.target(ctx, b)
			if err != nil {
				return err
			}
			// The reference's table lives in a schema of its own.
			if err := createSchema(ctx, o.dsn, t.Schema); err != nil {
				drop()
				return err
			}
			rate, err := benchrun.RawPostgres(ctx, o.dsn, t.Schema, 1, o.raw)
			drop()
			if err != nil {
				return err
			}
			refs[refPostgres] = append(refs[refPostgres], rate)
		}
	}
	return nil
}

func createSchema(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	return err
}

func printBench(w io.Writer, o *benchOptions, rows []*benchRow, refs map[string]float64) error {
	fmt.Fprintf(w, "median of %d round(s); SQLite synchronous %s\n\n", o.rounds, o.sync)
	if len(refs) > 0 {
		if r, ok := refs[refSQLite]; ok {
			fmt.Fprintf(w, "raw reference: SQLite one-row commits/s %.0f\n", r)
		}
		if r, ok := refs[refPostgres]; ok {
			fmt.Fprintf(w, "raw reference: PostgreSQL one-row INSERT transactions/s, 1 client %.0f\n", r)
		}
		fmt.Fprintln(w)
	}
	tw := newTable(w, "WORKLOAD", "BACKEND", "ENGINE", "MEDIAN", "ROUNDS")
	for _, r := range rows {
		title := r.Workload
		for _, b := range benchWorkloads {
			if b.Key == r.Workload {
				title = b.Title
			}
		}
		var rounds []string
		for _, f := range r.Rounds {
			rounds = append(rounds, benchFigure(r, f, true))
		}
		row(tw, title, r.Backend, r.Engine, benchFigure(r, r.Median, false), strings.Join(rounds, " / "))
	}
	return tw.Flush()
}

// benchFigure formats figures as the workload reports them (short: the
// rate, or the p50).
func benchFigure(r *benchRow, f benchFigures, short bool) string {
	switch {
	case r.latency && short:
		return fmt.Sprintf("%.2f", f.P50ms)
	case r.latency:
		return fmt.Sprintf("%.2f / %.2f / %.2f", f.P50ms, f.P90ms, f.P99ms)
	case r.Workload == "jobs" && !short:
		return fmt.Sprintf("%.0f; %.1f / %.1f", f.Rate, f.P50ms, f.P99ms)
	}
	return fmt.Sprintf("%.0f", f.Rate)
}

// medianOf takes the median of each figure separately.
func medianOf(ms []benchrun.Measure) benchrun.Measure {
	pick := func(f func(m benchrun.Measure) float64) float64 {
		xs := make([]float64, len(ms))
		for i, m := range ms {
			xs[i] = f(m)
		}
		return median(xs)
	}
	return benchrun.Measure{
		Rate: pick(func(m benchrun.Measure) float64 { return m.Rate }),
		P50:  time.Duration(pick(func(m benchrun.Measure) float64 { return float64(m.P50) })),
		P90:  time.Duration(pick(func(m benchrun.Measure) float64 { return float64(m.P90) })),
		P99:  time.Duration(pick(func(m benchrun.Measure) float64 { return float64(m.P99) })),
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
