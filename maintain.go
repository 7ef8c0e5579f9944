package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Maintenance of a Client with workers: it keeps a record of itself in the
// store's worker registry (queues and handlers, refreshed every half lease
// period, live for two), and once per lease period it looks for tasks of
// its queues that no live worker can run (store.StrandedTasks) and marks
// their runs with ConditionUnserved, so that such a run is visible in
// GetRun and ListRuns, and through a RunCondition telemetry event, rather
// than silently waiting. The marks are idempotent: every process may make
// them.

// maintain runs until ctx ends, then removes the worker's record.
func (c *Client) maintain(ctx context.Context) {
	host, _ := os.Hostname()
	w := &store.Worker{ID: c.cfg.WorkerID, Host: host, PID: os.Getpid(), StartedAt: c.cfg.Clock.Now()}
	for q, n := range c.cfg.Queues {
		if n > 0 {
			w.Queues = append(w.Queues, q)
		}
	}
	slices.Sort(w.Queues)
	register := func() {
		now := c.cfg.Clock.Now()
		w.Handlers = slices.Clone(c.claimHandlers())
		w.SeenAt, w.ExpiresAt = now, now.Add(2*c.cfg.LeaseDuration)
		if err := c.cfg.Store.RegisterWorker(ctx, w); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("register worker", slog.Any("err", err))
		}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.cfg.Store.RemoveWorker(rctx, w.ID); err != nil && !errors.Is(err, store.ErrClosed) {
			c.cfg.Logger.Warn("remove worker record", slog.Any("err", err))
		}
	}()
	register()
	nextCheck := c.cfg.Clock.Now().Add(jitter(c.cfg.LeaseDuration))
	for {
		select {
		case <-c.cfg.Clock.After(jitter(c.cfg.LeaseDuration / 2)):
		case <-ctx.Done():
			return
		}
		register()
		if now := c.cfg.Clock.Now(); !now.Before(nextCheck) {
			nextCheck = now.Add(jitter(c.cfg.LeaseDuration))
			if err := c.markStranded(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("look for tasks no worker can run", slog.Any("err", err))
			}
		}
	}
}

// markStranded marks the runs of this worker's queues whose tasks have
// waited for over a lease period with no live worker able to run them.
func (c *Client) markStranded(ctx context.Context) error {
	now := c.cfg.Clock.Now()
	ws, err := c.cfg.Store.ListWorkers(ctx, &store.ListWorkersParams{Now: now})
	if err != nil {
		return err
	}
	served := map[string][]string{}
	for _, w := range ws {
		for _, q := range w.Queues {
			served[q] = append(served[q], w.Handlers...)
		}
	}
	var errs []error
	for q, n := range c.cfg.Queues {
		if n == 0 {
			continue
		}
		ts, err := c.cfg.Store.StrandedTasks(ctx, &store.StrandedParams{
			Queue: q, Served: append([]string{}, served[q]...), ReadyBefore: now.Add(-c.cfg.LeaseDuration), Now: now, Limit: 100,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen := map[string]bool{}
		var changes []store.Change
		var marks []*store.Task
		for _, t := range ts {
			if seen[t.RunID] {
				continue
			}
			seen[t.RunID] = true
			msg := fmt.Sprintf("no live worker of queue %q can run its %s: none has %s registered (ready since %s)",
				q, describeTask(t), describeHandler(t.Handler), t.ReadyAt.UTC().Format(time.RFC3339))
			changes = append(changes, store.Change{RunID: t.RunID, Decide: func(run *store.Run) (*store.Update, error) {
				if run.Status.Terminal() || (run.Condition.Code == ConditionUnserved && run.Condition.Message == msg) {
					return nil, errNoChange
				}
				cond := &store.Condition{Code: ConditionUnserved, Message: msg}
				if run.Condition.Code == cond.Code {
					cond.Since = run.Condition.Since
				}
				return &store.Update{Condition: cond}, nil
			}})
			marks = append(marks, t)
		}
		if len(changes) == 0 {
			continue
		}
		rs, err := c.commit.submitAll(ctx, changes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, r := range rs {
			if r.err != nil {
				continue
			}
			t := marks[i]
			cerr := errors.New(r.res.Run.Condition.Message)
			c.cfg.Logger.Warn("a run waits for a worker that can run it", slog.String("run", t.RunID), slog.String("workflow", t.Workflow), slog.Any("err", cerr))
			c.emit(Event{Kind: RunCondition, RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index,
				Queue: t.Queue, TaskID: t.ID, Condition: ConditionUnserved, Err: cerr})
		}
	}
	return errors.Join(errs...)
}

// describeTask names a task for people.
func describeTask(t *store.Task) string {
	switch t.Kind {
	case store.TaskDecision:
		return "decision"
	case taskActivity:
		return "activity " + strconv.Quote(t.Step)
	case store.TaskTimer, taskWorkflowTimer:
		return "timer"
	}
	if t.Index >= 0 {
		return fmt.Sprintf("step %q (element %d)", t.Step, t.Index)
	}
	return "step " + strconv.Quote(t.Step)
}
