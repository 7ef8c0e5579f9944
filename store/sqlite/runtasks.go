package sqlite

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.RunTasks = (*Store)(nil)

// qTasksOfRun reads a run's tasks (index tasks_run).
const qTasksOfRun = "SELECT " + taskCols + " FROM tasks WHERE run_id = ? ORDER BY id"

// TasksOfRun returns a run's open tasks, oldest first.
func (s *Store) TasksOfRun(ctx context.Context, runID string) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	rows, err := s.reader.QueryContext(ctx, qTasksOfRun, runID)
	if err != nil {
		return nil, s.fail("tasks of run "+runID, err)
	}
	ts, err := scanTasks(rows)
	if err != nil {
		return nil, s.fail("tasks of run "+runID, err)
	}
	return ts, nil
}
