package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.StepLogs = (*Store)(nil)

// The statements of store.StepLogs (migration 0018_step_logs).
const (
	qLogNext = "SELECT (SELECT 1 FROM runs WHERE id = ?1), (SELECT COALESCE(MAX(seq), 0) FROM step_logs WHERE run_id = ?1)"
	qLogPut  = "INSERT INTO step_logs (run_id, seq, step, idx, attempt, worker, at, level, message, attrs, size, dropped) " +
		"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
	qLogRunSum     = "SELECT COALESCE(SUM(size), 0) FROM step_logs WHERE run_id = ?1"
	qLogAttemptSum = "SELECT COALESCE(SUM(size), 0) FROM step_logs WHERE run_id = ?1 AND step = ?2 AND idx = ?3 AND attempt = ?4"
	qLogRows       = "SELECT seq, step, idx, attempt, size, dropped FROM step_logs WHERE run_id = ?1 ORDER BY seq"
	qLogDelete     = "DELETE FROM step_logs WHERE run_id = ?1 AND seq IN (SELECT value FROM json_each(?2))"
	qLogMark       = "UPDATE step_logs SET level = ?3, message = ?4, attrs = NULL, size = 0, dropped = ?5 WHERE run_id = ?1 AND seq = ?2"
	qLogList       = "SELECT seq, step, idx, attempt, worker, at, level, message, attrs, dropped FROM step_logs " +
		"WHERE run_id = ?1 AND (?2 = '' OR step = ?2) AND (?3 IS NULL OR idx = ?3) AND (?4 = 0 OR attempt = ?4) " +
		"AND (?5 IS NULL OR level >= ?5 OR dropped > 0) AND seq > ?6 ORDER BY seq LIMIT ?7"
)

// AppendLogs stores records and applies the bounds, in one write
// transaction.
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
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			next := map[string]int64{} // by run; -1: no such run
			touched := map[string]map[store.LogAttempt]bool{}
			var order []string
			for i := range p.Records {
				r := &p.Records[i]
				seq, ok := next[r.RunID]
				if !ok {
					w.arg(r.RunID)
					rows, err := w.queryText(qLogNext)
					if err != nil {
						return err
					}
					if _, err := w.row(rows, 2); err != nil {
						return err
					}
					seq = -1
					if w.dest[0] != nil {
						seq = vInt(w.dest[1])
						order = append(order, r.RunID)
						touched[r.RunID] = map[store.LogAttempt]bool{}
					}
				}
				if seq < 0 {
					next[r.RunID] = seq
					continue
				}
				seq++
				next[r.RunID] = seq
				for _, a := range []driver.Value{r.RunID, seq, r.Step, int64(r.Index), int64(r.Attempt), r.Worker,
					micros(r.Time), int64(r.Level), r.Message, jsonArg(r.Attrs), int64(r.Size()), int64(r.Dropped)} {
					w.arg(a)
				}
				if _, err := w.execText(qLogPut); err != nil {
					return fmt.Errorf("insert log record: %w", err)
				}
				touched[r.RunID][store.LogAttempt{Step: r.Step, Index: r.Index, Attempt: r.Attempt}] = true
			}
			for _, run := range order {
				if err := w.boundLogs(run, touched[run]); err != nil {
					return err
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

// sum runs a statement of one integer column.
func (w *wconn) sum(q string) (int, error) {
	rows, err := w.queryText(q)
	if err != nil {
		return 0, err
	}
	if _, err := w.row(rows, 1); err != nil {
		return 0, err
	}
	return int(vInt(w.dest[0])), nil
}

// boundLogs drops the records of a run over the bounds (store.PlanLogDrops).
func (w *wconn) boundLogs(run string, touched map[store.LogAttempt]bool) error {
	w.arg(run)
	total, err := w.sum(qLogRunSum)
	if err != nil {
		return err
	}
	var sums []int
	for a := range touched {
		for _, v := range []driver.Value{run, a.Step, int64(a.Index), int64(a.Attempt)} {
			w.arg(v)
		}
		n, err := w.sum(qLogAttemptSum)
		if err != nil {
			return err
		}
		sums = append(sums, n)
	}
	if !store.LogSums(total, sums) {
		return nil
	}
	w.arg(run)
	rows, err := w.queryText(qLogRows)
	if err != nil {
		return err
	}
	var all []store.LogRow
	dest := make([]driver.Value, 6)
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			rows.Close()
			return err
		}
		all = append(all, store.LogRow{Seq: vInt(dest[0]), Size: int(vInt(dest[4])), Dropped: int(vInt(dest[5])),
			Attempt: store.LogAttempt{Step: vString(dest[1]), Index: int(vInt(dest[2])), Attempt: int(vInt(dest[3]))}})
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, m := range store.PlanLogDrops(all, touched) {
		if len(m.Delete) > 0 {
			ids, _ := json.Marshal(m.Delete)
			w.arg(run)
			w.arg(string(ids))
			if _, err := w.execText(qLogDelete); err != nil {
				return fmt.Errorf("drop log records: %w", err)
			}
		}
		for _, v := range []driver.Value{run, m.Seq, int64(slog.LevelWarn), store.MarkerMessage(m.Dropped), int64(m.Dropped)} {
			w.arg(v)
		}
		if _, err := w.execText(qLogMark); err != nil {
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
	var found int
	if err := s.reader.QueryRowContext(ctx, "SELECT COUNT(*) FROM runs WHERE id = ?", p.RunID).Scan(&found); err != nil {
		return nil, s.fail("logs", err)
	}
	if found == 0 {
		return nil, fmt.Errorf("logs of run %s: %w", p.RunID, store.ErrRunNotFound)
	}
	var idx, level any
	if p.Index != nil {
		idx = int64(*p.Index)
	}
	if p.MinLevel != nil {
		level = int64(*p.MinLevel)
	}
	rows, err := s.reader.QueryContext(ctx, qLogList, p.RunID, p.Step, idx, int64(p.Attempt), level, p.After, p.PageLimit())
	if err != nil {
		return nil, s.fail("logs", err)
	}
	defer rows.Close()
	out := []store.LogRecord{}
	for rows.Next() {
		r := store.LogRecord{RunID: p.RunID}
		var at, lvl int64
		var attrs *string
		if err := rows.Scan(&r.Seq, &r.Step, &r.Index, &r.Attempt, &r.Worker, &at, &lvl, &r.Message, &attrs, &r.Dropped); err != nil {
			return nil, s.fail("logs", err)
		}
		r.Time, r.Level = fromMicros(at), slog.Level(lvl)
		if attrs != nil && *attrs != "" {
			r.Attrs = json.RawMessage(*attrs)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("logs", err)
	}
	return out, nil
}
