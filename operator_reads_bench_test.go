package hephaestus_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	_ "modernc.org/sqlite"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The active runs of BenchmarkOperatorReads, whatever the runs stored:
// gates waiting for a decision, jobs due tomorrow (running, with a
// scheduled task), running runs (a tenth of them blocked), and the
// recently finished runs of the last hour.
const (
	readsGates   = 200
	readsJobs    = 100
	readsRunning = 50
	readsRecent  = 1000
)

// BenchmarkOperatorReads times the reads an operator or a scraper makes
// often, with N finished runs stored (HEPH_BENCH_READS_RUNS, a
// comma-separated list; default 10000,100000) beside the same few hundred
// active runs and a thousand finished in the last hour, on SQLite and
// PostgreSQL: a Prometheus scrape (the metric reader's collection, which
// reads the queues and the active runs from the store), GET /stats (the
// last hour), the dashboard's overview (the stats of its 1h and 7d windows
// and the queues), the approvals inbox, and lists by status (a page of 50;
// no run is pending).
// The finished runs are copies of a real one, written by bulk SQL, a
// second apart and more than a week old (outside every window).
//
//	HEPH_BENCH_READS_RUNS=10000,100000,1000000 go test -run XXX -bench OperatorReads -benchtime 20x .
func BenchmarkOperatorReads(b *testing.B) {
	sizes := []int{10000, 100000}
	if v := os.Getenv("HEPH_BENCH_READS_RUNS"); v != "" {
		sizes = sizes[:0]
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("HEPH_BENCH_READS_RUNS=%q: %v", v, err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/runs=%d", backend, n), func(b *testing.B) {
				benchOperatorReads(b, backend, n)
			})
		}
	}
}

func benchOperatorReads(b *testing.B, backend string, n int) {
	ctx := context.Background()
	var (
		st   store.Store
		bulk func(template string, n int, since time.Time) error
		err  error
	)
	if backend == "sqlite" {
		path := filepath.Join(b.TempDir(), "reads.db")
		st, err = sqlite.Open(ctx, &sqlite.Config{Path: path})
		bulk = func(template string, n int, since time.Time) error { return bulkSQLite(ctx, path, template, n, since) }
	} else {
		dsn := pgtest.DSN(b)
		st, err = postgres.Open(ctx, &postgres.Config{DSN: dsn})
		bulk = func(template string, n int, since time.Time) error { return bulkPostgres(ctx, dsn, template, n, since) }
	}
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(ctx) }()
	c, err := heph.New(&heph.Config{Store: st, MeterProvider: mp, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	gated, err := flowdoc.Load("gated.yaml", []byte("name: gated\nsteps:\n  ask:\n    approval: {prompt: \"Go?\", assignees: {users: [ann], groups: [ops]}}\n    on: {approved: done, rejected: done}\n"), nil)
	if err != nil {
		b.Fatal(err)
	}
	pb := flow.New("plain")
	flow.Step(pb, "s", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	later := job.MustNew("later", func(ctx context.Context, j *job.Job[string]) error { return nil }, nil)
	if err := c.Register(gated, pb.MustBuild()); err != nil {
		b.Fatal(err)
	}
	if err := c.RegisterJobs(later); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()

	// The template of the finished runs, and the active runs.
	tmpl, err := c.Run(ctx, "plain", map[string]int{"order": 12345}, nil)
	if err != nil || tmpl.Status != heph.StatusCompleted {
		b.Fatalf("template run: %+v, %v", tmpl, err)
	}
	for range readsGates {
		if _, err := c.StartRun(ctx, "gated", map[string]int{"order": 1}, nil); err != nil {
			b.Fatal(err)
		}
	}
	inserts := make([]heph.JobInsert[string], readsJobs)
	for i := range inserts {
		inserts[i] = heph.JobInsert[string]{Args: "x", Options: &heph.JobOptions{RunAfter: 24 * time.Hour}}
	}
	if _, err := heph.InsertJobs(ctx, c, later, inserts); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	start := time.Now()
	if err := bulk(tmpl.ID, n, now.Add(-8*24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	if err := bulk(tmpl.ID, -readsRecent, now.Add(-time.Hour)); err != nil {
		b.Fatal(err)
	}
	if err := bulk(tmpl.ID, -readsRunning, now.Add(-2*time.Hour)); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: copied %d runs in %s", backend, n+readsRecent+readsRunning, time.Since(start).Round(time.Millisecond))
	for {
		l, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "gated", Statuses: []hephtype.RunStatus{heph.StatusWaiting}, Limit: readsGates})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Runs) == readsGates {
			break
		}
		time.Sleep(10 * time.Millisecond) // waiting for the gates, not timing them
	}
	// Check the figures once: the reads must see the runs.
	s, err := c.Stats(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	if s.Active[heph.StatusWaiting] != readsGates || s.Active[heph.StatusPending]+s.Active[heph.StatusRunning] != readsJobs+readsRunning ||
		s.Blocked.Count != readsRunning/10 {
		b.Fatalf("stats: active %v, blocked %d", s.Active, s.Blocked.Count)
	}
	if ps, err := c.PendingApprovals(ctx, nil); err != nil || len(ps) != readsGates {
		b.Fatalf("approvals: %d, %v", len(ps), err)
	}

	reads := []struct {
		name string
		fn   func() error
	}{
		{"metrics", func() error {
			var rm metricdata.ResourceMetrics
			return reader.Collect(ctx, &rm)
		}},
		{"stats", func() error { _, err := c.Stats(ctx, nil); return err }},
		{"overview", func() error {
			if _, err := c.Stats(ctx, &heph.StatsOptions{Bucket: 2 * time.Minute}); err != nil {
				return err
			}
			_, err := c.ListQueues(ctx)
			return err
		}},
		{"overview-7d", func() error {
			_, err := c.Stats(ctx, &heph.StatsOptions{Since: time.Now().Add(-7 * 24 * time.Hour), Bucket: 6 * time.Hour})
			return err
		}},
		{"queues", func() error { _, err := c.ListQueues(ctx); return err }},
		{"approvals", func() error { _, err := c.PendingApprovals(ctx, nil); return err }},
	}
	for _, status := range []heph.RunStatus{heph.StatusPending, heph.StatusRunning, heph.StatusWaiting, heph.StatusCompleted, heph.StatusFailed} {
		reads = append(reads, struct {
			name string
			fn   func() error
		}{"list-" + string(status), func() error {
			_, err := c.ListRuns(ctx, &heph.ListOptions{Statuses: []hephtype.RunStatus{status}, Limit: 50})
			return err
		}})
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if err := r.fn(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/read")
		})
	}
}

// bulkStatus, bulkError: the status and error of the g-th copy (from 1)
// of a finished run: one in 20 failed, one in 50 cancelled, the rest
// completed. n < 0 asks for -n running runs, one in ten with a condition.
const (
	bulkFinished = `CASE WHEN g % 20 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'cancelled' ELSE 'completed' END`
	bulkError    = `CASE WHEN g % 20 = 0 THEN 'boom' ELSE '' END`
)

// bulkPostgres copies the run template n times (see bulkSQLite).
func bulkPostgres(ctx context.Context, dsn, template string, n int, since time.Time) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT column_name FROM information_schema.columns WHERE table_schema = 'heph' AND table_name = 'runs' ORDER BY ordinal_position`)
	if err != nil {
		return err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	prefix := "bulk"
	over := map[string]string{
		"id":          `'%s-' || lpad(g::text, 9, '0')`,
		"status":      bulkFinished,
		"error":       bulkError,
		"created_at":  `$2::timestamptz - g * interval '1 second'`,
		"updated_at":  `$2::timestamptz - g * interval '1 second' + interval '2 seconds'`,
		"finished_at": `$2::timestamptz - g * interval '1 second' + interval '2 seconds'`,
	}
	count := n
	switch {
	case n < 0 && since.After(time.Now().Add(-90*time.Minute)):
		// Recent finished runs, spread over the hour after since.
		count, prefix = -n, "recent"
		over["created_at"] = `$2::timestamptz + g * (interval '1 hour' / $1) - interval '2 seconds'`
		over["updated_at"] = `$2::timestamptz + g * (interval '1 hour' / $1) - interval '1 second'`
		over["finished_at"] = over["updated_at"]
	case n < 0:
		count, prefix = -n, "running"
		over["status"], over["error"], over["finished_at"], over["output"] = `'running'`, `''`, `NULL`, `NULL`
		over["created_at"] = `$2::timestamptz + g * interval '1 second'`
		over["updated_at"] = `$2::timestamptz + g * interval '1 second'`
		over["condition"] = `CASE WHEN g % 10 = 0 THEN '{"code":"unserved","message":"bench","since":"2030-01-01T00:00:00Z"}'::jsonb END`
	}
	over["id"] = fmt.Sprintf(over["id"], prefix)
	exprs := make([]string, len(cols))
	for i, col := range cols {
		exprs[i] = "t." + col
		if e, ok := over[col]; ok {
			exprs[i] = e
		}
	}
	q := fmt.Sprintf(`INSERT INTO heph.runs (%s) SELECT %s FROM heph.runs t, generate_series(1, $1::int) g WHERE t.id = $3`,
		strings.Join(cols, ", "), strings.Join(exprs, ", "))
	tag, err := conn.Exec(ctx, q, count, since, template)
	if err != nil {
		return fmt.Errorf("copy runs: %w", err)
	}
	if tag.RowsAffected() != int64(count) {
		return fmt.Errorf("copied %d runs, want %d", tag.RowsAffected(), count)
	}
	_, err = conn.Exec(ctx, "VACUUM ANALYZE heph.runs")
	return err
}

// bulkSQLite copies the run template n times in one transaction, as
// finished runs a second apart before since (their ids bulk-…); n < 0
// makes -n copies finished in the hour after since (recent-…) when since
// is less than 90 minutes ago, else -n running runs (running-…).
func bulkSQLite(ctx context.Context, path, template string, n int, since time.Time) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('runs') ORDER BY cid`)
	if err != nil {
		return err
	}
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	prefix := "bulk"
	over := map[string]string{
		"id":          `'%s-' || printf('%%09d', g)`,
		"status":      bulkFinished,
		"error":       bulkError,
		"created_at":  `?2 - g * 1000000`,
		"updated_at":  `?2 - g * 1000000 + 2000000`,
		"finished_at": `?2 - g * 1000000 + 2000000`,
	}
	count := n
	switch {
	case n < 0 && since.After(time.Now().Add(-90*time.Minute)):
		count, prefix = -n, "recent"
		over["created_at"] = `?2 + g * (3600000000 / ?1) - 2000000`
		over["updated_at"] = `?2 + g * (3600000000 / ?1) - 1000000`
		over["finished_at"] = over["updated_at"]
	case n < 0:
		count, prefix = -n, "running"
		over["status"], over["error"], over["finished_at"], over["output"] = `'running'`, `''`, `NULL`, `NULL`
		over["created_at"] = `?2 + g * 1000000`
		over["updated_at"] = `?2 + g * 1000000`
		over["condition"] = `CASE WHEN g % 10 = 0 THEN '{"code":"unserved","message":"bench","since":"2030-01-01T00:00:00Z"}' END`
	}
	over["id"] = fmt.Sprintf(over["id"], prefix)
	exprs := make([]string, len(cols))
	for i, col := range cols {
		exprs[i] = "t." + col
		if e, ok := over[col]; ok {
			exprs[i] = e
		}
	}
	q := fmt.Sprintf(`WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < ?1)
		INSERT INTO runs (%s) SELECT %s FROM (SELECT * FROM runs WHERE id = ?3) t, seq`,
		strings.Join(cols, ", "), strings.Join(exprs, ", "))
	res, err := db.ExecContext(ctx, q, count, since.UnixMicro(), template)
	if err != nil {
		return fmt.Errorf("copy runs: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(count) {
		return fmt.Errorf("copied %d runs (%v), want %d", n, err, count)
	}
	// One transaction of a million runs leaves them all in the WAL:
	// checkpoint it, as the commits of a store that grew run by run do.
	_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}
