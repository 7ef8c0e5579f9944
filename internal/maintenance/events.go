package maintenance

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hephaestus-go/hephaestus/store"
)

// PruneEvents deletes, now, the events stored longer ago than
// EventRetention, one batch per transaction, and returns how many it
// deleted. Nothing when EventRetention is not positive.
func (c *Service) PruneEvents(ctx context.Context) (int, error) {
	if c.cfg.EventRetention <= 0 {
		return 0, nil
	}
	before := c.cfg.Clock.Now().Add(-c.cfg.EventRetention)
	total := 0
	for {
		n, err := c.cfg.Store.PruneEvents(ctx, &store.PruneEventsParams{Before: before, Limit: pruneBatch})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune events: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

// eventRetention prunes events every RetentionInterval.
func (c *Service) eventRetention(ctx context.Context) {
	for {
		n, err := c.PruneEvents(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Error("event retention", slog.Any("err", err))
		}
		if n > 0 {
			c.cfg.Logger.Info("event retention", slog.Int("deleted", n))
		}
		select {
		case <-c.cfg.Clock.After(c.cfg.RetentionInterval):
		case <-ctx.Done():
			return
		}
	}
}
