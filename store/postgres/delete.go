package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The statements of DeleteRun; § stands for the store's schema. The run
// is locked first: every write under its id takes that lock (Apply,
// CreateRequest), or the advisory lock of its step logs (AppendLogs),
// which DeleteRun takes too. A statement run after both sees every row
// written under the id, and nothing more can be written under it once the
// run is gone.
const (
	qDeleteLock  = "SELECT workflow, kind, status FROM §runs WHERE id = $1 FOR UPDATE"
	qDeleteTasks = "SELECT count(*) FROM §tasks WHERE run_id = $1"
	// Requests go by their foreign key; the records of remote claims of
	// the run's tasks, keyed by the task, with the tasks.
	// When leased tasks go, the run's id goes to the cancel channel ($2),
	// as when a commit cancels leased tasks: their holders stop now.
	qDeleteRun = `WITH t AS (DELETE FROM §tasks WHERE run_id = $1 RETURNING id, owner IS NOT NULL AS leased),
		c AS (DELETE FROM §remote_claims WHERE task_id IN (SELECT id FROM t)),
		h AS (DELETE FROM §history WHERE run_id = $1),
		l AS (DELETE FROM §step_logs WHERE run_id = $1),
		w AS (DELETE FROM §event_waits WHERE run_id = $1),
		r AS (DELETE FROM §runs WHERE id = $1)
		SELECT count(pg_notify($2, $1)) FROM (SELECT 1 FROM t WHERE leased LIMIT 1) AS x`
)

// DeleteRun deletes a run with everything kept under its id, in one
// transaction.
func (s *Store) DeleteRun(ctx context.Context, p *store.DeleteRunParams) (*store.DeletedRun, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("delete run: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("delete run: %w", err)
	}
	var out *store.DeletedRun
	errRefused := errors.New("refused")
	var refused error
	err := s.once(ctx, func(ctx context.Context) error {
		out, refused = nil, nil
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, applySettings); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, qLogLock, s.schema, p.ID); err != nil {
				return err
			}
			d := &store.DeletedRun{ID: p.ID}
			var kind, status string
			err := tx.QueryRow(ctx, s.logQ(qDeleteLock), p.ID).Scan(&d.Workflow, &kind, &status)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			d.Kind, d.Status = hephtype.RunKind(kind), hephtype.RunStatus(status)
			if err := tx.QueryRow(ctx, s.logQ(qDeleteTasks), p.ID).Scan(&d.Tasks); err != nil {
				return err
			}
			if !p.Force && (d.Status.Active() || d.Tasks > 0) {
				refused = store.RunActiveError(d)
				return errRefused // roll back: nothing was written
			}
			if _, err := tx.Exec(ctx, s.logQ(qDeleteRun), p.ID, s.cancels); err != nil {
				return err
			}
			out = d
			return nil
		})
		if errors.Is(err, errRefused) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, s.fail("delete run "+p.ID, err)
	}
	if refused != nil {
		return nil, refused
	}
	if out == nil {
		return nil, store.RunNotFound(p.ID)
	}
	return out, nil
}
