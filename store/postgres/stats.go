package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The statements of RunStats, with § for the schema. $1 is the workflow
// ("": all) in each. Times are bucketed in whole microseconds since the
// epoch: extract returns an exact numeric.
const (
	statsStarted = `SELECT ((extract(epoch FROM created_at) * 1000000)::bigint - $2) / $3, count(*) FROM §runs
		WHERE created_at >= $4 AND created_at < $5 AND ($1 = '' OR workflow = $1) GROUP BY 1`
	// finished_at is not indexed (updates of runs stay HOT): this reads
	// every run.
	statsFinished = `SELECT ((extract(epoch FROM finished_at) * 1000000)::bigint - $2) / $3, status, count(*) FROM §runs
		WHERE finished_at >= $4 AND finished_at < $5 AND status IN ('completed', 'failed', 'cancelled')
			AND ($1 = '' OR workflow = $1) GROUP BY 1, 2`
	statsLatency = `SELECT created_at, finished_at FROM §runs
		WHERE finished_at >= $2 AND finished_at < $3 AND status = 'completed' AND ($1 = '' OR workflow = $1)
		ORDER BY finished_at DESC, id DESC LIMIT $4`
	statsActive = `SELECT status, count(*), count(*) FILTER (WHERE condition IS NOT NULL), count(*) FILTER (WHERE updated_at < $2)
		FROM §runs WHERE status IN ('pending', 'running', 'waiting') AND ($1 = '' OR workflow = $1) GROUP BY 1`
	statsBlocked = `SELECT ` + runCols + ` FROM §runs
		WHERE status IN ('pending', 'running', 'waiting') AND condition IS NOT NULL AND ($1 = '' OR workflow = $1)
		ORDER BY updated_at, id LIMIT $2`
	statsStale = `SELECT ` + runCols + ` FROM §runs
		WHERE status IN ('pending', 'running', 'waiting') AND updated_at < $3 AND ($1 = '' OR workflow = $1)
		ORDER BY updated_at, id LIMIT $2`
)

// RunStats computes the figures of an overview, in one read-only
// transaction (one snapshot).
func (s *Store) RunStats(ctx context.Context, p *store.RunStatsParams) (*store.RunStats, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	q := func(stmt string) string { return strings.ReplaceAll(stmt, "§", `"`+s.schema+`".`) }
	since, until := truncate(p.Since), truncate(p.Until)
	stale := until.Add(-p.StaleAfter)
	var st *store.RunStats
	err := s.idempotent(ctx, func(ctx context.Context) error {
		st = store.NewRunStats(p)
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var b, c int64
			var status string
			rows, err := tx.Query(ctx, q(statsStarted), p.Workflow, since.UnixMicro(), p.Bucket.Microseconds(), since, until)
			if err != nil {
				return err
			}
			if _, err := pgx.ForEachRow(rows, []any{&b, &c}, func() error {
				st.AddStarted(b, c)
				return nil
			}); err != nil {
				return err
			}
			rows, err = tx.Query(ctx, q(statsFinished), p.Workflow, since.UnixMicro(), p.Bucket.Microseconds(), since, until)
			if err != nil {
				return err
			}
			completed := 0
			if _, err := pgx.ForEachRow(rows, []any{&b, &status, &c}, func() error {
				completed += st.AddFinished(b, hephtype.RunStatus(status), c)
				return nil
			}); err != nil {
				return err
			}
			rows, err = tx.Query(ctx, q(statsLatency), p.Workflow, since, until, store.MaxLatencySample)
			if err != nil {
				return err
			}
			var created, finished time.Time
			var durations []time.Duration
			if _, err := pgx.ForEachRow(rows, []any{&created, &finished}, func() error {
				durations = append(durations, finished.Sub(created))
				return nil
			}); err != nil {
				return err
			}
			st.Latency = store.LatencyOf(completed, durations)
			rows, err = tx.Query(ctx, q(statsActive), p.Workflow, stale)
			if err != nil {
				return err
			}
			var blocked, stalled int64
			if _, err := pgx.ForEachRow(rows, []any{&status, &c, &blocked, &stalled}, func() error {
				st.Active[hephtype.RunStatus(status)] = int(c)
				st.Blocked.Count += int(blocked)
				st.Stale.Count += int(stalled)
				return nil
			}); err != nil {
				return err
			}
			if st.Blocked.Runs, err = collectRuns(ctx, tx, q(statsBlocked), p.Workflow, store.MaxStatsRuns); err != nil {
				return err
			}
			st.Stale.Runs, err = collectRuns(ctx, tx, q(statsStale), p.Workflow, store.MaxStatsRuns, stale)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("run stats", err)
	}
	return st, nil
}

func collectRuns(ctx context.Context, tx pgx.Tx, q string, args ...any) ([]*store.Run, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
}
