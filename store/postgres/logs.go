package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.StepLogs = (*Store)(nil)

// The statements of store.StepLogs (migration 0020_step_logs); § stands
// for the store's schema. Appends to a run are serialized by a
// transaction-level advisory lock on the schema and run id, so that Seq
// grows in commit order and a reader's cursor misses nothing.
const (
	qLogLock = "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/step_logs/' || $2, 0))"
	qLogNext = "SELECT EXISTS (SELECT 1 FROM §runs WHERE id = $1), COALESCE((SELECT MAX(seq) FROM §step_logs WHERE run_id = $1), 0)"
	qLogPut  = "INSERT INTO §step_logs (run_id, seq, step, idx, attempt, worker, at, level, message, attrs, size, dropped) " +
		"SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::int[], $5::int[], $6::text[], $7::timestamptz[], " +
		"$8::int[], $9::text[], $10::text[], $11::int[], $12::int[])"
	qLogSums = "SELECT COALESCE(SUM(size), 0), COALESCE(SUM(size) FILTER (WHERE step = $2 AND idx = $3 AND attempt = $4), 0) " +
		"FROM §step_logs WHERE run_id = $1"
	qLogRows   = "SELECT seq, step, idx, attempt, size, dropped FROM §step_logs WHERE run_id = $1 ORDER BY seq"
	qLogDelete = "DELETE FROM §step_logs WHERE run_id = $1 AND seq = ANY($2::bigint[])"
	qLogMark   = "UPDATE §step_logs SET level = $3, message = $4, attrs = NULL, size = 0, dropped = $5 WHERE run_id = $1 AND seq = $2"
	qLogExists = "SELECT EXISTS (SELECT 1 FROM §runs WHERE id = $1)"
	qLogList   = "SELECT seq, step, idx, attempt, worker, at, level, message, attrs, dropped FROM §step_logs " +
		"WHERE run_id = $1 AND ($2 = '' OR step = $2) AND ($3::int IS NULL OR idx = $3) AND ($4 = 0 OR attempt = $4) " +
		"AND ($5::int IS NULL OR level >= $5 OR dropped > 0) AND seq > $6 ORDER BY seq LIMIT $7"
)

func (s *Store) logQ(q string) string { return strings.ReplaceAll(q, "§", `"`+s.schema+`".`) }

// logCols are the columns of records to insert.
type logCols struct {
	run, step, worker, msg []string
	attrs                  []*string
	seq                    []int64
	idx, attempt, level    []int32
	size, dropped          []int32
	at                     []time.Time
}

func (c *logCols) add(r *store.LogRecord, seq int64) {
	c.run, c.seq, c.step = append(c.run, r.RunID), append(c.seq, seq), append(c.step, r.Step)
	c.idx, c.attempt, c.worker = append(c.idx, int32(r.Index)), append(c.attempt, int32(r.Attempt)), append(c.worker, r.Worker)
	c.at, c.level, c.msg = append(c.at, truncate(r.Time)), append(c.level, int32(r.Level)), append(c.msg, r.Message)
	c.attrs = append(c.attrs, jsonArg(r.Attrs))
	c.size, c.dropped = append(c.size, int32(r.Size())), append(c.dropped, int32(r.Dropped))
}

// AppendLogs stores records and applies the bounds, in one transaction.
func (s *Store) AppendLogs(ctx context.Context, p *store.AppendLogsParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("append logs: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("append logs: %w: %w", hephtype.ErrInvalidInput, err)
	}
	if len(p.Records) == 0 {
		return nil
	}
	var order []string
	byRun := map[string][]*store.LogRecord{}
	for i := range p.Records {
		r := &p.Records[i]
		if byRun[r.RunID] == nil {
			order = append(order, r.RunID)
		}
		byRun[r.RunID] = append(byRun[r.RunID], r)
	}
	err := s.once(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var cols logCols
			touched := map[string]map[store.LogAttempt]bool{}
			for _, run := range order {
				if _, err := tx.Exec(ctx, qLogLock, s.schema, run); err != nil {
					return err
				}
				var exists bool
				var seq int64
				if err := tx.QueryRow(ctx, s.logQ(qLogNext), run).Scan(&exists, &seq); err != nil {
					return err
				}
				if !exists {
					continue
				}
				touched[run] = map[store.LogAttempt]bool{}
				for _, r := range byRun[run] {
					seq++
					cols.add(r, seq)
					touched[run][store.LogAttempt{Step: r.Step, Index: r.Index, Attempt: r.Attempt}] = true
				}
			}
			if len(cols.run) == 0 {
				return nil
			}
			if _, err := tx.Exec(ctx, s.logQ(qLogPut), cols.run, cols.seq, cols.step, cols.idx, cols.attempt, cols.worker,
				cols.at, cols.level, cols.msg, cols.attrs, cols.size, cols.dropped); err != nil {
				return fmt.Errorf("insert log records: %w", err)
			}
			for _, run := range order {
				if touched[run] != nil {
					if err := s.boundLogs(ctx, tx, run, touched[run]); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return s.fail("append logs", err)
	}
	return nil
}

// boundLogs drops the records of a run over the bounds (store.PlanLogDrops).
func (s *Store) boundLogs(ctx context.Context, tx pgx.Tx, run string, touched map[store.LogAttempt]bool) error {
	total, sums := 0, []int{}
	for a := range touched {
		var n int
		if err := tx.QueryRow(ctx, s.logQ(qLogSums), run, a.Step, a.Index, a.Attempt).Scan(&total, &n); err != nil {
			return err
		}
		sums = append(sums, n)
	}
	if !store.LogSums(total, sums) {
		return nil
	}
	rows, err := tx.Query(ctx, s.logQ(qLogRows), run)
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LogRow, error) {
		var r store.LogRow
		err := row.Scan(&r.Seq, &r.Attempt.Step, &r.Attempt.Index, &r.Attempt.Attempt, &r.Size, &r.Dropped)
		return r, err
	})
	if err != nil {
		return err
	}
	for _, m := range store.PlanLogDrops(all, touched) {
		if len(m.Delete) > 0 {
			if _, err := tx.Exec(ctx, s.logQ(qLogDelete), run, m.Delete); err != nil {
				return fmt.Errorf("drop log records: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, s.logQ(qLogMark), run, m.Seq, int(slog.LevelWarn), store.MarkerMessage(m.Dropped), m.Dropped); err != nil {
			return fmt.Errorf("mark dropped log records: %w", err)
		}
	}
	return nil
}

// Logs returns a run's records.
func (s *Store) Logs(ctx context.Context, p *store.LogsParams) ([]store.LogRecord, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	var idx, level *int
	if p.Index != nil {
		idx = p.Index
	}
	if p.MinLevel != nil {
		l := int(*p.MinLevel)
		level = &l
	}
	var out []store.LogRecord
	var exists bool
	err := s.idempotent(ctx, func(ctx context.Context) error {
		if err := s.pool.QueryRow(ctx, s.logQ(qLogExists), p.RunID).Scan(&exists); err != nil || !exists {
			return err
		}
		rows, err := s.pool.Query(ctx, s.logQ(qLogList), p.RunID, p.Step, idx, p.Attempt, level, p.After, p.PageLimit())
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LogRecord, error) {
			r := store.LogRecord{RunID: p.RunID}
			var lvl int
			var attrs *string
			err := row.Scan(&r.Seq, &r.Step, &r.Index, &r.Attempt, &r.Worker, &r.Time, &lvl, &r.Message, &attrs, &r.Dropped)
			r.Time, r.Level = r.Time.UTC(), slog.Level(lvl)
			if attrs != nil && *attrs != "" {
				r.Attrs = json.RawMessage(*attrs)
			}
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, s.fail("logs", err)
	}
	if !exists {
		return nil, fmt.Errorf("logs of run %s: %w", p.RunID, store.ErrRunNotFound)
	}
	if out == nil {
		out = []store.LogRecord{}
	}
	return out, nil
}
