package maintenance

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Policy keeps the finished runs of some workflows for times of their own.
// It covers the workflows it names and those OnQueue gives for its Queue;
// a workflow covered by an earlier policy is not covered by a later one.
type Policy struct {
	Workflows []string
	Queue     string
	// Completed is how long completed (and continued) runs are kept,
	// Failed how long failed and cancelled ones are: 0 means
	// Config.Retention, a negative duration forever.
	Completed, Failed time.Duration
}

// pruneBatch bounds the runs one transaction deletes: a sweep holds no
// lock for long, and other sweeps skip the runs it holds.
const pruneBatch = 500

var (
	completedStatuses = []hephtype.RunStatus{hephtype.StatusCompleted, hephtype.StatusContinued}
	failedStatuses    = []hephtype.RunStatus{hephtype.StatusFailed, hephtype.StatusCancelled}
)

// Prune deletes, now, the finished runs that the policies and Retention
// no longer keep, and returns how many it deleted: each policy's runs by
// their status and age, then every other workflow's runs older than
// Retention (when positive). Runs still active, and finished runs with
// tasks left, are never deleted (store.PruneRuns).
func (c *Service) Prune(ctx context.Context) (int, error) {
	now := c.cfg.Clock.Now()
	total := 0
	var covered []string
	for i, p := range c.cfg.Policies {
		names := slices.Clone(p.Workflows)
		if p.Queue != "" && c.cfg.OnQueue != nil {
			names = append(names, c.cfg.OnQueue(p.Queue)...)
		}
		names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(covered, n) })
		slices.Sort(names)
		names = slices.Compact(names)
		covered = append(covered, names...)
		if len(names) == 0 {
			continue
		}
		for _, g := range []struct {
			keep     time.Duration
			statuses []hephtype.RunStatus
		}{{p.Completed, completedStatuses}, {p.Failed, failedStatuses}} {
			keep := g.keep
			if keep == 0 {
				keep = c.cfg.Retention
			}
			if keep <= 0 {
				continue
			}
			n, err := c.prune(ctx, &store.PruneParams{FinishedBefore: now.Add(-keep), Workflows: names, Statuses: g.statuses})
			total += n
			if err != nil {
				return total, fmt.Errorf("retention policy %d: %w", i, err)
			}
		}
	}
	if c.cfg.Retention > 0 {
		n, err := c.prune(ctx, &store.PruneParams{FinishedBefore: now.Add(-c.cfg.Retention), ExceptWorkflows: covered})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// prune deletes what p selects, one batch per transaction.
func (c *Service) prune(ctx context.Context, p *store.PruneParams) (int, error) {
	p.Limit = pruneBatch
	total := 0
	for {
		n, err := c.cfg.Store.PruneRuns(ctx, p)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune runs: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}
