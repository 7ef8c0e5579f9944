package sqlite

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Deadlines = (*Store)(nil)

// qExpiredRuns reads the active runs whose deadline is not after ?1
// (index runs_deadline).
const qExpiredRuns = `SELECT id FROM runs
	WHERE deadline IS NOT NULL AND deadline <= ?1 AND status IN ('pending', 'running', 'waiting')
	ORDER BY deadline, id LIMIT ?2`

// ExpiredRuns returns the active runs whose deadline has passed.
func (s *Store) ExpiredRuns(ctx context.Context, p *store.ExpiredRunsParams) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("expired runs: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, qExpiredRuns, micros(p.Now), p.Limit)
	if err != nil {
		return nil, s.fail("expired runs", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.fail("expired runs", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("expired runs", err)
	}
	return ids, nil
}
