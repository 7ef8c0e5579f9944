package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The statements of RunStats. ?1 is the workflow ("": all) in each; times
// are Unix microseconds, so a bucket is an integer division.
const (
	statsStarted = `SELECT (created_at - ?2) / ?3, count(*) FROM runs
		WHERE created_at >= ?2 AND created_at < ?4 AND (?1 = '' OR workflow = ?1) GROUP BY 1`
	statsFinished = `SELECT (finished_at - ?2) / ?3, status, count(*) FROM runs
		WHERE finished_at >= ?2 AND finished_at < ?4 AND status IN ('completed', 'failed', 'cancelled')
			AND (?1 = '' OR workflow = ?1) GROUP BY 1, 2`
	statsLatency = `SELECT finished_at - created_at FROM runs
		WHERE finished_at >= ?2 AND finished_at < ?3 AND status = 'completed' AND (?1 = '' OR workflow = ?1)
		ORDER BY finished_at DESC, id DESC LIMIT ?4`
	statsActive = `SELECT status, count(*), count(*) FILTER (WHERE condition IS NOT NULL), count(*) FILTER (WHERE updated_at < ?2)
		FROM runs WHERE status IN ('pending', 'running', 'waiting') AND (?1 = '' OR workflow = ?1) GROUP BY 1`
	statsBlocked = `SELECT ` + runCols + ` FROM runs
		WHERE status IN ('pending', 'running', 'waiting') AND condition IS NOT NULL AND (?1 = '' OR workflow = ?1)
		ORDER BY updated_at, id LIMIT ?2`
	statsStale = `SELECT ` + runCols + ` FROM runs
		WHERE status IN ('pending', 'running', 'waiting') AND updated_at < ?3 AND (?1 = '' OR workflow = ?1)
		ORDER BY updated_at, id LIMIT ?2`
)

// RunStats computes the figures of an overview, in one read transaction
// (one snapshot).
func (s *Store) RunStats(ctx context.Context, p *store.RunStatsParams) (*store.RunStats, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("run stats: %w", err)
	}
	st, err := s.runStats(ctx, p)
	if err != nil {
		return nil, s.fail("run stats", err)
	}
	return st, nil
}

func (s *Store) runStats(ctx context.Context, p *store.RunStatsParams) (*store.RunStats, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	since, until := micros(p.Since), micros(p.Until)
	stale := micros(p.Until.Add(-p.StaleAfter))
	st := store.NewRunStats(p)
	each := func(q string, args []any, dest []any, fn func()) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			fn()
		}
		return rows.Err()
	}
	var b, c, blocked, stalled int64
	var status string
	if err := each(statsStarted, []any{p.Workflow, since, p.Bucket.Microseconds(), until}, []any{&b, &c}, func() {
		st.AddStarted(b, c)
	}); err != nil {
		return nil, err
	}
	completed := 0
	if err := each(statsFinished, []any{p.Workflow, since, p.Bucket.Microseconds(), until}, []any{&b, &status, &c}, func() {
		completed += st.AddFinished(b, hephtype.RunStatus(status), c)
	}); err != nil {
		return nil, err
	}
	var durations []time.Duration
	if err := each(statsLatency, []any{p.Workflow, since, until, store.MaxLatencySample}, []any{&c}, func() {
		durations = append(durations, time.Duration(c)*time.Microsecond)
	}); err != nil {
		return nil, err
	}
	st.Latency = store.LatencyOf(completed, durations)
	if err := each(statsActive, []any{p.Workflow, stale}, []any{&status, &c, &blocked, &stalled}, func() {
		st.Active[hephtype.RunStatus(status)] = int(c)
		st.Blocked.Count += int(blocked)
		st.Stale.Count += int(stalled)
	}); err != nil {
		return nil, err
	}
	runs := func(q string, args ...any) ([]*store.Run, error) {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []*store.Run
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	}
	if st.Blocked.Runs, err = runs(statsBlocked, p.Workflow, store.MaxStatsRuns); err != nil {
		return nil, err
	}
	if st.Stale.Runs, err = runs(statsStale, p.Workflow, store.MaxStatsRuns, stale); err != nil {
		return nil, err
	}
	return st, nil
}
