// Package maintenance runs the background services of a process with
// workers, beside the worker pool: the retention sweep (deleting finished
// runs older than Config.Retention), the process's record in the store's
// worker registry, and the check for tasks that no live worker can run
// (marked on their runs as ConditionUnserved). The schedulers that later
// issues add (cron, stalled-run reports) belong here too.
//
// It owns those loops and their timing. It may not run tasks, claim them,
// or decide runs: its only writes are the store's maintenance calls
// (PruneRuns, RegisterWorker, RemoveWorker), the idempotent condition
// marks, which go through the committer like every change of a run, and
// the timeouts of runs past their deadline, which the runtime decides
// (Config.TimeOut).
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Config configures a Service.
type Config struct {
	Store     store.Store
	Clock     clock.Clock
	Logger    *slog.Logger
	Telemetry *telemetry.Hub
	Committer *commit.Committer
	WorkerID  string
	// Queues this process serves (with their concurrency; 0: not served).
	Queues map[string]int
	// Handlers returns what this process can run.
	Handlers func() []string
	// MoreQueues, when set, returns further queues to look for stranded
	// tasks in (the queues of the deployment's catalog): a queue no live
	// worker serves at all is then marked too, by any process that
	// keeps the registry.
	MoreQueues    func(ctx context.Context) []string
	LeaseDuration time.Duration
	// BuildID is this process's build, recorded on its worker record.
	BuildID string
	// RecordInterval is how often the worker record is refreshed (at
	// most; a jitter makes refreshes up to a fifth sooner, and they come
	// at least every half lease): it counts as live for two intervals.
	// Defaults to LeaseDuration.
	RecordInterval time.Duration
	// Retention, when positive, deletes runs finished longer ago than
	// this, every RetentionInterval.
	Retention         time.Duration
	RetentionInterval time.Duration
	// EventRetention, when positive, deletes events stored longer ago
	// than this, every RetentionInterval (events.go).
	EventRetention time.Duration
	// Policies give some workflows their own retention (retention.go).
	Policies []Policy
	// OnQueue returns the workflows with work on a queue, for policies
	// that name one.
	OnQueue func(queue string) []string
	// TimeOut, when set, times out a run whose execution deadline passed
	// (deadlines.go): true when this call did, false (and no error) when
	// the run finished first or was timed out already. It goes through
	// the committer, as every change of a run.
	TimeOut func(ctx context.Context, runID string) (bool, error)
	// DeadlineInterval is how often the deadlines are looked at.
	// Defaults to 1 second.
	DeadlineInterval time.Duration
	// SweepBlobs, when set, is run every SweepInterval (the sweep of the
	// payload blob store: Client.SweepPayloadBlobs).
	SweepBlobs    func(ctx context.Context) error
	SweepInterval time.Duration
}

// Service runs the maintenance loops between Start and Stop.
type Service struct {
	cfg  Config
	mu   sync.Mutex
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a Service; it starts nothing until Start.
func New(cfg *Config) *Service {
	s := &Service{cfg: *cfg}
	telemetry.Defaults(&s.cfg.Clock, &s.cfg.Logger, &s.cfg.Telemetry)
	if s.cfg.Handlers == nil {
		s.cfg.Handlers = func() []string { return []string{} }
	}
	if s.cfg.RetentionInterval <= 0 {
		s.cfg.RetentionInterval = time.Hour
	}
	if s.cfg.DeadlineInterval <= 0 {
		s.cfg.DeadlineInterval = time.Second
	}
	if s.cfg.RecordInterval <= 0 {
		s.cfg.RecordInterval = s.cfg.LeaseDuration
	}
	return s
}

// Start starts the loops; they run until Stop. A second call is a no-op.
func (c *Service) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stop != nil {
		return
	}
	ctx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	c.wg.Go(func() { c.registry(ctx) })
	if c.cfg.TimeOut != nil {
		c.wg.Go(func() { c.deadlines(ctx) })
	}
	if c.cfg.Retention > 0 || len(c.cfg.Policies) > 0 {
		c.wg.Go(func() { c.retention(ctx) })
	}
	if c.cfg.EventRetention > 0 {
		c.wg.Go(func() { c.eventRetention(ctx) })
	}
	if c.cfg.SweepBlobs != nil && c.cfg.SweepInterval > 0 {
		c.wg.Go(func() { c.sweepBlobs(ctx) })
	}
}

// sweepBlobs runs SweepBlobs every SweepInterval, the first time one
// interval after Start.
func (c *Service) sweepBlobs(ctx context.Context) {
	for {
		select {
		case <-c.cfg.Clock.After(c.cfg.SweepInterval):
		case <-ctx.Done():
			return
		}
		if err := c.cfg.SweepBlobs(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Error("sweep payload blobs", slog.Any("err", err))
		}
	}
}

// Stop ends the loops and waits for them (the worker's record is removed).
func (c *Service) Stop() {
	c.mu.Lock()
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
		c.wg.Wait()
	}
}

// errNoChange refuses a change that would write nothing new.
var errNoChange = errors.New("nothing to change")

// retention prunes finished runs older than Retention.
func (c *Service) retention(ctx context.Context) {
	for {
		n, err := c.Prune(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Error("retention", slog.Any("err", err))
		}
		if n > 0 {
			c.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.RetentionSwept, Count: n})
		}
		select {
		case <-c.cfg.Clock.After(c.cfg.RetentionInterval):
		case <-ctx.Done():
			return
		}
	}
}

// The worker registry: a process with workers keeps a record of itself in
// the store (queues, handlers and build, refreshed every RecordInterval
// or half lease period, whichever is shorter, and live for two
// RecordIntervals: a process that dies stops counting as live within
// two intervals), and once per lease period it looks for tasks of its queues
// that no live worker can run (store.StrandedTasks) and marks their runs
// with ConditionUnserved, so that such a run is visible in GetRun and
// ListRuns, and through a RunCondition telemetry event, rather than
// silently waiting. The marks are idempotent: every process may make them.

// registry runs until ctx ends, then removes the worker's record.
func (c *Service) registry(ctx context.Context) {
	host, _ := os.Hostname()
	w := &store.Worker{ID: c.cfg.WorkerID, BuildID: c.cfg.BuildID, Host: host, PID: os.Getpid(), StartedAt: c.cfg.Clock.Now()}
	for q, n := range c.cfg.Queues {
		if n > 0 {
			w.Queues = append(w.Queues, q)
		}
	}
	slices.Sort(w.Queues)
	register := func() {
		now := c.cfg.Clock.Now()
		w.Handlers = slices.Clone(c.cfg.Handlers())
		w.SeenAt, w.ExpiresAt = now, now.Add(2*c.cfg.RecordInterval)
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
	nextCheck := c.cfg.Clock.Now().Add(worker.Jitter(c.cfg.LeaseDuration))
	for {
		select {
		case <-c.cfg.Clock.After(jitterDown(min(c.cfg.RecordInterval, c.cfg.LeaseDuration/2))):
		case <-ctx.Done():
			return
		}
		register()
		if now := c.cfg.Clock.Now(); !now.Before(nextCheck) {
			nextCheck = now.Add(worker.Jitter(c.cfg.LeaseDuration))
			if err := c.markStranded(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("look for tasks no worker can run", slog.Any("err", err))
			}
		}
	}
}

// jitterDown spreads d over 80% to 100% of it: a record refreshed
// every jitterDown(I) is never older than I.
func jitterDown(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.2*rand.Float64()))
}

// markStranded marks the runs of this worker's queues whose tasks have
// waited for over a lease period with no live worker able to run them.
func (c *Service) markStranded(ctx context.Context) error {
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
	queues := map[string]bool{}
	for q, n := range c.cfg.Queues {
		if n > 0 {
			queues[q] = true
		}
	}
	if c.cfg.MoreQueues != nil {
		for _, q := range c.cfg.MoreQueues(ctx) {
			queues[q] = true
		}
	}
	for q := range queues {
		ts, err := c.cfg.Store.StrandedTasks(ctx, &store.StrandedParams{
			Queue: q, Served: append([]string{}, served[q]...), ReadyBefore: now.Add(-c.cfg.LeaseDuration), Now: now, PerRun: true, Limit: 100,
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
				q, store.DescribeTask(t), store.DescribeHandler(t.Handler), t.ReadyAt.UTC().Format(time.RFC3339))
			changes = append(changes, store.Change{RunID: t.RunID, Decide: func(run *store.Run) (*store.Update, error) {
				if run.Status.Terminal() || (run.Condition.Code == hephtype.ConditionUnserved && run.Condition.Message == msg) {
					return nil, errNoChange
				}
				cond := &store.Condition{Code: hephtype.ConditionUnserved, Message: msg}
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
		rs, err := c.cfg.Committer.SubmitAll(ctx, changes)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, r := range rs {
			if r.Err != nil {
				continue
			}
			t := marks[i]
			cerr := errors.New(r.Res.Run.Condition.Message)
			c.cfg.Logger.Warn("a run waits for a worker that can run it", slog.String("run", t.RunID), slog.String("workflow", t.Workflow), slog.Any("err", cerr))
			c.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.RunCondition, RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index,
				Queue: t.Queue, TaskID: t.ID, Condition: hephtype.ConditionUnserved, Err: cerr, Tags: t.Tags, Metadata: t.Metadata})
		}
	}
	return errors.Join(errs...)
}
