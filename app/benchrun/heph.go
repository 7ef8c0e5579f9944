// Hephaestus in the workloads: flows and code-first workflows for (a) to
// (c), on PostgreSQL or SQLite, defined as in e2e/bench_test.go and
// e2e/workflow_bench_test.go, and the job API (package job) for the jobs
// workload.

package benchrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// hephFlows returns the flows of (a) to (c): "one", a step returning its
// input plus one, and "chain", ten steps each following the previous one.
func hephFlows() []*flow.Flow {
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
	return []*flow.Flow{one.MustBuild(), chain.MustBuild()}
}

// The code-first workflows of (a) to (c): one activity returning its input
// plus one, and ten of them in sequence.
var (
	hephInc = workflow.NewActivity("inc", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	hephOne = workflow.New("bench_one", func(ctx workflow.Context, n int) (int, error) {
		return hephInc.Execute(ctx, n)
	})
	hephChain = workflow.New("bench_chain10", func(ctx workflow.Context, n int) (int, error) {
		for range 10 {
			var err error
			if n, err = hephInc.Execute(ctx, n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
)

// OpenStore opens the store t names: a fresh PostgreSQL database (or
// schema) or a new SQLite file with t's synchronous mode. maxConns sizes
// a PostgreSQL pool (0: the store's default).
func OpenStore(ctx context.Context, t Target, maxConns int) (store.Store, error) {
	switch t.Backend {
	case Postgres:
		st, err := postgres.Open(ctx, &postgres.Config{DSN: t.Where, Schema: t.Schema, MaxConns: maxConns})
		if err != nil {
			return nil, err
		}
		return st, nil
	case SQLite:
		st, err := sqlite.Open(ctx, &sqlite.Config{Path: t.Where, Synchronous: t.Sync})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, fmt.Errorf("hephaestus: unknown backend %q", t.Backend)
}

// startHeph starts a client on t with the default queue of the e2e
// benchmarks (64 workers); register adds the definitions.
func startHeph(ctx context.Context, t Target, register func(c *heph.Client) error) (*heph.Client, func(), error) {
	st, err := OpenStore(ctx, t, 0)
	if err != nil {
		return nil, nil, err
	}
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 64}, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		err = register(c)
	}
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return c, func() {
		_ = c.Stop(context.Background())
		_ = st.Close()
	}, nil
}

// OpenFlows sets up Hephaestus flows for (a) to (c): each call is
// Client.Run, which starts a run and waits for it to finish.
func OpenFlows(ctx context.Context, t Target) (*Caller, error) {
	c, stop, err := startHeph(ctx, t, func(c *heph.Client) error { return c.Register(hephFlows()...) })
	if err != nil {
		return nil, err
	}
	// A flow run's output holds the outputs of the steps that ended their
	// paths, by step name.
	run := func(ctx context.Context, name, last string, in, want int) error {
		r, err := c.Run(ctx, name, in, nil)
		if err != nil {
			return err
		}
		if r.Status != heph.StatusCompleted {
			return fmt.Errorf("run %s is %s: %s", r.ID, r.Status, r.Error)
		}
		var out map[string]int
		if err := json.Unmarshal(r.Output, &out); err != nil || out[last] != want {
			return fmt.Errorf("run %s returned %s, want %d", r.ID, r.Output, want)
		}
		return nil
	}
	return &Caller{
		One:   func(ctx context.Context, in int) error { return run(ctx, "one", "step", in, in+1) },
		Chain: func(ctx context.Context, in int) error { return run(ctx, "chain", "s9", in, in) },
		Close: stop,
	}, nil
}

// OpenWorkflows sets up Hephaestus code-first workflows for (a) to (c):
// each call is ExecuteWorkflow, which starts a workflow and waits for its
// result.
func OpenWorkflows(ctx context.Context, t Target) (*Caller, error) {
	c, stop, err := startHeph(ctx, t, func(c *heph.Client) error {
		if err := c.RegisterWorkflows(hephOne, hephChain); err != nil {
			return err
		}
		return c.RegisterActivities(hephInc)
	})
	if err != nil {
		return nil, err
	}
	run := func(ctx context.Context, def *workflow.Definition[int, int], in, want int) error {
		out, err := heph.ExecuteWorkflow(ctx, c, def, in, nil)
		if err == nil && out != want {
			err = fmt.Errorf("%s returned %d, want %d", def.Name(), out, want)
		}
		return err
	}
	return &Caller{
		One:   func(ctx context.Context, in int) error { return run(ctx, hephOne, in, in+1) },
		Chain: func(ctx context.Context, in int) error { return run(ctx, hephChain, in, in+10) },
		Close: stop,
	}, nil
}

// JobsOptions are the parameters of the jobs workload.
type JobsOptions struct {
	// Jobs is how many jobs are inserted; Workers the size of the default
	// queue; Batch how many jobs one InsertJobs call inserts.
	Jobs, Workers, Batch int
	// Queue, when set, puts the default queue under flow control.
	Queue *heph.QueueOptions
	// Keys, when positive, spreads the jobs over that many concurrency
	// keys.
	Keys int
}

// BenchTenants is how many concurrency keys the keyed jobs workload
// spreads its jobs over.
const BenchTenants = 10

// Keyed is the jobs workload with flow control on the queue: each job has
// one of BenchTenants concurrency keys, and the queue allows as many per
// key as there are workers, so the limit never binds; what it measures is
// the cost of the controlled claim (limits checked, keys rotated, in the
// claim's transaction).
func Keyed(o JobsOptions) *JobsOptions {
	o.Queue, o.Keys = &heph.QueueOptions{MaxRunningPerKey: o.Workers}, BenchTenants
	return &o
}

// Rated is the jobs workload under a queue rate limit too high to bind
// (ten million starts a second): the cost of the controlled claim and its
// rate window.
func Rated(o JobsOptions) *JobsOptions {
	o.Queue = &heph.QueueOptions{Rate: heph.RateLimit{Limit: 10_000_000, Period: time.Second}}
	return &o
}

// RunJobs is the jobs workload on Hephaestus: o.Jobs jobs of a no-op kind
// inserted with InsertJobs in batches, worked by a default queue of
// o.Workers, timed from the first insert to the last RunCompleted event.
func RunJobs(ctx context.Context, t Target, o *JobsOptions) (JobsResult, error) {
	n := o.Jobs
	st, err := OpenStore(ctx, t, 16)
	if err != nil {
		return JobsResult{}, err
	}
	defer st.Close()
	c, err := jobClient(st, o.Workers, nil)
	if err != nil {
		return JobsResult{}, err
	}
	if o.Queue != nil {
		if err := c.SetQueue(ctx, "default", *o.Queue); err != nil {
			return JobsResult{}, err
		}
	}
	lat := NewLatencies()
	var completed atomic.Int64
	all := make(chan struct{})
	c.Subscribe(func(e heph.Event) {
		if e.Kind == heph.RunCompleted {
			lat.Done(e.RunID, time.Now())
			if completed.Add(1) == int64(n) {
				close(all)
			}
		}
	})
	if err := c.Start(ctx); err != nil {
		return JobsResult{}, err
	}
	defer func() { _ = c.Stop(ctx) }()
	start := time.Now()
	for i := 0; i < n; i += o.Batch {
		reqs := make([]heph.JobInsert[int], min(o.Batch, n-i))
		for k := range reqs {
			reqs[k] = heph.JobInsert[int]{Args: i + k}
			if o.Keys > 0 {
				reqs[k].Options = &heph.JobOptions{ConcurrencyKey: fmt.Sprintf("tenant-%d", (i+k)%o.Keys)}
			}
		}
		at := time.Now()
		jobs, err := heph.InsertJobs(ctx, c, benchJob, reqs)
		if err != nil {
			return JobsResult{}, err
		}
		ids := make([]string, len(jobs))
		for k, j := range jobs {
			ids[k] = j.ID
		}
		lat.Inserted(at, ids...)
	}
	inserted := time.Since(start)
	select {
	case <-all:
	case <-ctx.Done():
		return JobsResult{}, ctx.Err()
	}
	return JobsResult{Engine: "hephaestus", Jobs: n, Wall: time.Since(start), Inserted: inserted, P50: lat.Pct(0.5), P99: lat.Pct(0.99)}, nil
}

// fillByRunning is how many finished runs Fill makes by running them;
// on PostgreSQL, the rest are copies of these (fillCopies).
const fillByRunning = 1000

// Fill puts n finished one-step runs (of the jobs workload's kind) in t's
// database, as a history for the workloads to run beside. On PostgreSQL,
// beyond fillByRunning runs it runs fillByRunning jobs and copies their
// rows (fillCopies), so that millions take minutes, not hours.
func Fill(ctx context.Context, t Target, n int) error {
	if t.Backend != Postgres || n <= fillByRunning {
		return fillByJobs(ctx, t, n)
	}
	if err := fillByJobs(ctx, t, fillByRunning); err != nil {
		return err
	}
	return fillCopies(ctx, t, n-fillByRunning)
}

// fillCopies copies the finished runs in t's PostgreSQL database, and
// their history, until n more are there: each copy's id is the original's
// with a suffix, its times moved back by a second per copy (older runs,
// as a database in service holds); then VACUUM ANALYZE, as autovacuum
// would have done over the time those runs took, and a CHECKPOINT.
func fillCopies(ctx context.Context, t Target, n int) error {
	conn, err := pgx.Connect(ctx, t.Where)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	schema := cmp.Or(t.Schema, "heph")
	var per int
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q.runs WHERE finished_at IS NOT NULL`, schema)).Scan(&per); err != nil {
		return err
	}
	if per == 0 {
		return errors.New("fill: no finished run to copy")
	}
	// Copies 1..k of every finished original: k*per runs a statement.
	const chunk = 1000
	for from := 1; (from-1)*per < n; from += chunk {
		to := min(from+chunk-1, (n+per-1)/per)
		for _, q := range fillCopySQL(schema) {
			_, err := conn.Exec(ctx, q, from, to)
			if err != nil {
				return fmt.Errorf("fill: copies %d to %d: %w", from, to, err)
			}
		}
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`VACUUM ANALYZE %q.runs, %q.history`, schema, schema)); err != nil {
		return err
	}
	// Write the fill's dirty pages out now, not during the workload that
	// follows (a superuser's command; without the right, the workload
	// pays for them).
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		fmt.Fprintf(os.Stderr, "fill: no CHECKPOINT after the fill: %v\n", err)
	}
	return nil
}

// fillCopySQL copies the finished runs ($1 to $2 copies of each) and
// their history rows, whatever their columns (a row as JSON, changed,
// back to a row).
func fillCopySQL(schema string) []string {
	runs, history := fmt.Sprintf("%q.runs", schema), fmt.Sprintf("%q.history", schema)
	shift := func(col string) string {
		return fmt.Sprintf(`'%s', to_jsonb(x.%s - make_interval(secs => g))`, col, col)
	}
	// The row is rebuilt in a LATERAL: "(f(...)).*" would call f once
	// per column.
	return []string{
		`INSERT INTO ` + runs + ` SELECT p.* FROM ` + runs + ` x CROSS JOIN generate_series($1::int, $2::int) g
			CROSS JOIN LATERAL jsonb_populate_record(NULL::` + runs + `, to_jsonb(x) || jsonb_build_object(
				'id', x.id || '.' || g, ` + shift("created_at") + `, ` + shift("updated_at") + `, ` + shift("finished_at") + `)) p
			WHERE x.finished_at IS NOT NULL AND x.id NOT LIKE '%.%'`,
		`INSERT INTO ` + history + ` SELECT p.* FROM ` + history + ` x
			JOIN ` + runs + ` r ON r.id = x.run_id AND r.finished_at IS NOT NULL AND r.id NOT LIKE '%.%'
			CROSS JOIN generate_series($1::int, $2::int) g
			CROSS JOIN LATERAL jsonb_populate_record(NULL::` + history + `, to_jsonb(x) || jsonb_build_object(
				'run_id', x.run_id || '.' || g, ` + shift("at") + `)) p`,
	}
}

// fillByJobs runs n one-step jobs to their end.
func fillByJobs(ctx context.Context, t Target, n int) error {
	st, err := OpenStore(ctx, t, 0)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := jobClient(st, 100, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	var completed atomic.Int64
	all := make(chan struct{})
	c.Subscribe(func(e heph.Event) {
		if e.Kind == heph.RunCompleted && completed.Add(1) == int64(n) {
			close(all)
		}
	})
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = c.Stop(context.Background()) }()
	for i := 0; i < n; i += 1000 {
		reqs := make([]heph.JobInsert[int], min(1000, n-i))
		for k := range reqs {
			reqs[k] = heph.JobInsert[int]{Args: i + k}
		}
		if _, err := heph.InsertJobs(ctx, c, benchJob, reqs); err != nil {
			return err
		}
		// Keep the queue short, as a steady state would.
		for completed.Load() < int64(i+len(reqs)-5000) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// benchJob is the jobs workload's kind: a no-op job with an int argument.
var benchJob = job.MustNew("job", func(ctx context.Context, j *job.Job[int]) error { return nil }, nil)

// jobClient is a client on st with the jobs workload's kind registered and
// a default queue of the given size (not started).
func jobClient(st store.Store, workers int, logger *slog.Logger) (*heph.Client, error) {
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": workers}, Logger: logger})
	if err != nil {
		return nil, err
	}
	if err := c.RegisterJobs(benchJob); err != nil {
		return nil, err
	}
	return c, nil
}
