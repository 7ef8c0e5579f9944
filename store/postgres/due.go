package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Due = (*Store)(nil)

// qEarliestReady reads the earliest ready time of the tasks of the runs
// $1, by run; § stands for the store's schema.
const qEarliestReady = "SELECT run_id, min(ready_at) FROM §tasks WHERE run_id = ANY($1::text[]) GROUP BY run_id"

// EarliestReady returns the earliest ready time of each run's tasks.
func (s *Store) EarliestReady(ctx context.Context, p *store.EarliestReadyParams) (map[string]time.Time, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("earliest ready: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("earliest ready: %w", err)
	}
	out := map[string]time.Time{}
	if len(p.RunIDs) == 0 {
		return out, nil
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		clear(out)
		rows, err := s.pool.Query(ctx, s.secretQ(qEarliestReady), p.RunIDs)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				return err
			}
			out[id] = at.UTC()
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("earliest ready", err)
	}
	return out, nil
}
