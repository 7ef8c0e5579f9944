package sqlite

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The statements of DeleteRun. The run's history, tasks, requests and
// step logs go with it by their foreign keys (ON DELETE CASCADE); the
// records of remote claims of its tasks have none, and go first.
const (
	qDeleteRunRead = `SELECT workflow, kind, status, (SELECT count(*) FROM tasks WHERE run_id = ?1)
		FROM runs WHERE id = ?1`
	qDeleteRunClaims = "DELETE FROM remote_claims WHERE task_id IN (SELECT id FROM tasks WHERE run_id = ?1)"
	qDeleteRun       = "DELETE FROM runs WHERE id = ?1"
)

// DeleteRun deletes a run with everything kept under its id, in one write
// transaction.
func (s *Store) DeleteRun(ctx context.Context, p *store.DeleteRunParams) (*store.DeletedRun, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("delete run: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("delete run: %w", err)
	}
	var out *store.DeletedRun
	var refused error
	err := s.withWriter(ctx, func(w *wconn) error {
		// The run leaves the cache whatever happens: a failed transaction
		// may have committed.
		w.runs.clear()
		return w.tx(func() error {
			out, refused = nil, nil
			w.arg(p.ID)
			ok, err := w.adhocRow(qDeleteRunRead, 4)
			if err != nil || !ok {
				return err
			}
			d := &store.DeletedRun{ID: p.ID, Workflow: str(w.dest[0]), Kind: hephtype.RunKind(str(w.dest[1])),
				Status: hephtype.RunStatus(str(w.dest[2])), Tasks: int(w.dest[3].(int64))}
			if !p.Force && (d.Status.Active() || d.Tasks > 0) {
				refused = store.RunActiveError(d)
				return nil
			}
			w.arg(p.ID)
			if err := w.adhocExec(qDeleteRunClaims); err != nil {
				return err
			}
			w.arg(p.ID)
			if err := w.adhocExec(qDeleteRun); err != nil {
				return err
			}
			out = d
			return nil
		})
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

// str reads a TEXT column.
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}
