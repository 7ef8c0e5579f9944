package sqlite

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.RunTasks = (*Store)(nil)

// qRunTasks reads the tasks of run ?1 (index tasks_run).
var qRunTasks = "SELECT " + taskCols + " FROM tasks WHERE run_id = ?1 ORDER BY ready_at, id LIMIT " + strconv.Itoa(store.MaxRunTasks)

// RunTasks returns the tasks of a run.
func (s *Store) RunTasks(ctx context.Context, runID string) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("run tasks: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, qRunTasks, runID)
	if err != nil {
		return nil, s.fail("run tasks", err)
	}
	ts, err := scanTasks(rows)
	if err != nil {
		return nil, s.fail("run tasks", err)
	}
	return ts, nil
}
