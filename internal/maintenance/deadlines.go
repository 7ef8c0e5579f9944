package maintenance

import (
	"context"
	"log/slog"

	"github.com/hephaestus-go/hephaestus/store"
)

// expiredBatch bounds the runs one look at the deadlines times out
// before it looks again.
const expiredBatch = 100

// The deadline sweep: every DeadlineInterval a process with workers looks
// for active runs whose execution deadline passed (store.ExpiredRuns) and
// times each out through Config.TimeOut, a keyed change of the run like a
// cancel. Every process may do it: the change is de-duplicated by its key
// and refused for a run that finished first, so a run is timed out once.

// deadlines runs the sweep until ctx ends.
func (c *Service) deadlines(ctx context.Context) {
	for {
		if _, err := c.TimeOutExpired(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("time out runs past their deadline", slog.Any("err", err))
		}
		select {
		case <-c.cfg.Clock.After(c.cfg.DeadlineInterval):
		case <-ctx.Done():
			return
		}
	}
}

// TimeOutExpired times out now the active runs whose deadline passed and
// returns how many this call timed out. A run that another process timed
// out, or that finished meanwhile, is not counted; the error of one run
// does not stop the others (the last one is returned).
func (c *Service) TimeOutExpired(ctx context.Context) (int, error) {
	if c.cfg.TimeOut == nil {
		return 0, nil
	}
	n := 0
	var last error
	for {
		ids, err := c.cfg.Store.ExpiredRuns(ctx, &store.ExpiredRunsParams{Now: c.cfg.Clock.Now(), Limit: expiredBatch})
		if err != nil {
			return n, err
		}
		progress := false
		for _, id := range ids {
			done, err := c.cfg.TimeOut(ctx, id)
			if err != nil {
				if ctx.Err() != nil {
					return n, ctx.Err()
				}
				last = err
				continue
			}
			progress = true
			if done {
				n++
			}
		}
		if len(ids) < expiredBatch || !progress {
			return n, last
		}
	}
}
