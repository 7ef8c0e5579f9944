package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Deadlines = (*Store)(nil)

// qExpiredRuns reads the active runs whose deadline is not after $1
// (index runs_deadline); § stands for the store's schema.
const qExpiredRuns = `SELECT id FROM §runs
	WHERE deadline IS NOT NULL AND deadline <= $1 AND status IN ('pending', 'running', 'waiting')
	ORDER BY deadline, id LIMIT $2`

// ExpiredRuns returns the active runs whose deadline has passed.
func (s *Store) ExpiredRuns(ctx context.Context, p *store.ExpiredRunsParams) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	var ids []string
	err := s.idempotent(ctx, func(ctx context.Context) error {
		ids = ids[:0]
		rows, err := s.pool.Query(ctx, s.secretQ(qExpiredRuns), p.Now.UTC().Truncate(time.Microsecond), p.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("expired runs", err)
	}
	return ids, nil
}
