package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

// RegisterWorker records a live worker, or replaces its record. Records
// that expired by the worker's clock (w.SeenAt) are deleted on the way,
// so that the records of processes that died without RemoveWorker do not
// pile up.
func (s *Store) RegisterWorker(ctx context.Context, w *store.Worker) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	if err := w.Check(); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	queues, err := jsonList(w.Queues)
	if err != nil {
		return fmt.Errorf("register worker %s: queues: %w", w.ID, err)
	}
	handlers, err := jsonList(w.Handlers)
	if err != nil {
		return fmt.Errorf("register worker %s: handlers: %w", w.ID, err)
	}
	err = s.withWriter(ctx, func(c *wconn) error {
		return c.tx(func() error {
			if !w.SeenAt.IsZero() {
				c.arg(micros(w.SeenAt))
				if _, err := c.exec(qExpireWorkers); err != nil {
					return err
				}
			}
			c.arg(w.ID)
			c.arg(queues)
			c.arg(handlers)
			c.arg(w.Host)
			c.arg(int64(w.PID))
			c.arg(micros(w.StartedAt))
			c.arg(micros(w.SeenAt))
			c.arg(micros(w.ExpiresAt))
			c.arg(w.BuildID)
			_, err := c.exec(qRegisterWorker)
			return err
		})
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
	err := s.withWriter(ctx, func(c *wconn) error {
		c.arg(id)
		_, err := c.exec(qRemoveWorker)
		return err
	})
	if err != nil {
		return s.fail("remove worker", err)
	}
	return nil
}

// ListWorkers returns the workers live at p.Now, by id.
func (s *Store) ListWorkers(ctx context.Context, p *store.ListWorkersParams) ([]*store.Worker, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	if p.Now.IsZero() {
		return nil, errors.New("list workers: Now is zero")
	}
	rows, err := s.r.listWorkers.QueryContext(ctx, micros(p.Now))
	if err != nil {
		return nil, s.fail("list workers", err)
	}
	defer rows.Close()
	var out []*store.Worker
	for rows.Next() {
		w, err := scanWorker(rows)
		if err != nil {
			return nil, s.fail("list workers", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list workers", err)
	}
	return out, nil
}
