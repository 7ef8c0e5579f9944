package postgres

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.RunTasks = (*Store)(nil)

// qTasksOfRun reads a run's tasks; § stands for the store's schema.
const qTasksOfRun = "SELECT " + taskCols + " FROM §tasks WHERE run_id = $1 ORDER BY id"

// TasksOfRun returns a run's open tasks, oldest first.
func (s *Store) TasksOfRun(ctx context.Context, runID string) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", runID, err)
	}
	var out []*store.Task
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.secretQ(qTasksOfRun), runID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("tasks of run "+runID, err)
	}
	return out, nil
}
