package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Due = (*Store)(nil)

// qEarliestReady reads the earliest ready time of the tasks of the runs
// in the JSON array ?1, by run (index tasks_run).
const qEarliestReady = "SELECT run_id, min(ready_at) FROM tasks WHERE run_id IN (SELECT value FROM json_each(?1)) GROUP BY run_id"

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
	ids, err := jsonList(p.RunIDs)
	if err != nil {
		return nil, fmt.Errorf("earliest ready: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, qEarliestReady, ids)
	if err != nil {
		return nil, s.fail("earliest ready", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			return nil, s.fail("earliest ready", err)
		}
		out[id] = fromMicros(at)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("earliest ready", err)
	}
	return out, nil
}
