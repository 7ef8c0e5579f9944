package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.RunTasks = (*Store)(nil)

// qRunTasks reads the tasks of run $1; § stands for the store's schema.
var qRunTasks = "SELECT " + taskCols + " FROM §tasks WHERE run_id = $1 ORDER BY ready_at, id LIMIT " + strconv.Itoa(store.MaxRunTasks)

// RunTasks returns the tasks of a run.
func (s *Store) RunTasks(ctx context.Context, runID string) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("run tasks: %w", err)
	}
	var out []*store.Task
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, s.secretQ(qRunTasks), runID)
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
		return nil, s.fail("run tasks", err)
	}
	return out, nil
}
