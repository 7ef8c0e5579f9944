package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

// RegisterWorker records a live worker, or refreshes its record.
func (s *Store) RegisterWorker(ctx context.Context, w *store.Worker) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	if err := w.Check(); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	// Writing the same record twice does no harm.
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.registerWorker, w.ID, nonNil(w.Queues), nonNil(w.Handlers), w.Host, int64(w.PID),
			truncate(w.StartedAt), truncate(w.SeenAt), truncate(w.ExpiresAt), w.BuildID)
		return err
	})
	if err != nil {
		return s.fail("register worker", err)
	}
	return nil
}

// RemoveWorker deletes a worker's record, if it has one.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("remove worker: %w", err)
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.removeWorker, id)
		return err
	})
	if err != nil {
		return s.fail("remove worker", err)
	}
	return nil
}

// ListWorkers returns the workers live at p.Now, by id, and deletes the
// records that expired an hour before it.
func (s *Store) ListWorkers(ctx context.Context, p *store.ListWorkersParams) ([]*store.Worker, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	if p.Now.IsZero() {
		return nil, errors.New("list workers: Now is zero")
	}
	var out []*store.Worker
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.q.listWorkers, truncate(p.Now))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Worker, error) { return scanWorker(row) })
		return err
	})
	if err != nil {
		return nil, s.fail("list workers", err)
	}
	return out, nil
}
