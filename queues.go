package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// ErrQueueNotFound: the queue has no configuration (GetQueue of a queue
// that was never configured nor paused, and has no tasks).
var ErrQueueNotFound = store.ErrQueueNotFound

// QueueOptions are a queue's flow-control limits (docs/flow-control.md).
// They govern work — steps, activities and jobs — across every process
// that shares the store; decisions, timers and workflow operations are
// never held back. Zero values do not limit: a queue whose options are
// all zero is claimed exactly as one never configured.
type QueueOptions struct {
	// MaxRunning bounds the queue's work running at once (holding a live
	// lease), across all processes.
	MaxRunning int
	// MaxRunningPerKey bounds it per concurrency key (StartOptions.
	// ConcurrencyKey, or the key a flow or workflow computes from its
	// input); runs without a key share the key "".
	MaxRunningPerKey int
	// Rate bounds the queue's starts: at most Rate.Limit in each window of
	// Rate.Period, windows aligned to the Unix epoch. KeyRate bounds them
	// per key.
	Rate    RateLimit
	KeyRate RateLimit
	// Fair rotates starts between the keys with ready work, even without a
	// limit (any limit implies it): one key's backlog does not hold back
	// another's work.
	Fair bool
	// Weights give keys a larger share under rotation (1 to 1000; keys not
	// named weigh 1): a key of weight 3 starts three tasks for another's
	// one.
	Weights map[string]int
}

// RateLimit is at most Limit starts in each window of Period. The windows
// are fixed and aligned to the Unix epoch, so any span of one Period holds
// at most 2×Limit starts (the end of one window and the start of the
// next). Period is 1ms to 366 days, in whole microseconds.
type RateLimit struct {
	Limit  int
	Period time.Duration
}

// QueueInfo is a queue's configuration and its figures at the time it was
// read.
type QueueInfo struct {
	Name string
	// Configured: SetQueue, PauseQueue or ResumeQueue stored a
	// configuration for the queue.
	Configured bool
	Paused     bool
	Options    QueueOptions
	// Ready tasks are claimable now (the queue's depth); Scheduled ones
	// become ready later (timers, retries, delayed starts).
	Ready     int
	Scheduled int
	// Leased counts the tasks of every kind that hold a live lease.
	Leased int
	// Running counts the work that holds a live lease under flow control:
	// what MaxRunning compares with.
	Running int
	// OldestReadyAge is how long the oldest ready task has been ready.
	OldestReadyAge time.Duration
	// RunningByKey lists the keys with the most running work (up to 10).
	RunningByKey []KeyCount
	// RateWindow is the start of the current window of Options.Rate, and
	// RateWindowStarts the starts counted in it.
	RateWindow       time.Time
	RateWindowStarts int
	// UpdatedAt is when the configuration last changed.
	UpdatedAt time.Time
}

// KeyCount is a count for a concurrency key.
type KeyCount struct {
	Key   string
	Count int
}

// SetQueue creates or replaces the limits of a queue, in the store: every
// process's claims obey them at once. It leaves the queue's pause as it
// is.
func (c *Client) SetQueue(ctx context.Context, name string, opts QueueOptions) error {
	q := store.Queue{Name: name, MaxRunning: opts.MaxRunning, MaxRunningPerKey: opts.MaxRunningPerKey,
		Rate:    store.Rate{Limit: opts.Rate.Limit, Period: opts.Rate.Period},
		KeyRate: store.Rate{Limit: opts.KeyRate.Limit, Period: opts.KeyRate.Period},
		Fair:    opts.Fair, Weights: opts.Weights}
	if err := q.Check(); err != nil {
		return fmt.Errorf("set queue: %w: %w", ErrInvalidInput, err)
	}
	if err := c.cfg.Store.PutQueue(ctx, &store.PutQueueParams{Queue: q, Now: c.cfg.Clock.Now()}); err != nil {
		return fmt.Errorf("set queue %s: %w", name, err)
	}
	c.pool.Wake(name) // a raised limit frees slots
	return nil
}

// PauseQueue pauses a queue: no process claims its work until ResumeQueue;
// the work stays queued. Decisions, timers and workflow operations of the
// queue still run.
func (c *Client) PauseQueue(ctx context.Context, name string) error {
	return c.pauseQueue(ctx, name, true)
}

// ResumeQueue resumes a paused queue: its work is claimable at once (this
// process's workers are woken; on PostgreSQL, other processes' too).
func (c *Client) ResumeQueue(ctx context.Context, name string) error {
	return c.pauseQueue(ctx, name, false)
}

func (c *Client) pauseQueue(ctx context.Context, name string, paused bool) error {
	op := "resume queue"
	if paused {
		op = "pause queue"
	}
	if err := store.CheckQueueName(name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := c.cfg.Store.PauseQueue(ctx, &store.PauseQueueParams{Name: name, Paused: paused, Now: c.cfg.Clock.Now()}); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	if !paused {
		c.pool.Wake(name)
	}
	return nil
}

// GetQueue returns a queue's configuration and figures. A queue without a
// configuration is described too (Configured false) when it has tasks;
// otherwise GetQueue fails with ErrQueueNotFound.
func (c *Client) GetQueue(ctx context.Context, name string) (*QueueInfo, error) {
	if err := store.CheckQueueName(name); err != nil {
		return nil, fmt.Errorf("get queue: %w", err)
	}
	qs, err := c.queueStats(ctx, []string{name})
	if err != nil {
		return nil, fmt.Errorf("get queue %s: %w", name, err)
	}
	q := qs[0]
	if !q.Configured && q.Ready+q.Scheduled+q.Leased == 0 {
		return nil, fmt.Errorf("get queue %s: %w", name, ErrQueueNotFound)
	}
	return q, nil
}

// ListQueues returns every queue that has a configuration or tasks, by
// name, with its figures.
func (c *Client) ListQueues(ctx context.Context) ([]*QueueInfo, error) {
	qs, err := c.queueStats(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return qs, nil
}

func (c *Client) queueStats(ctx context.Context, names []string) ([]*QueueInfo, error) {
	now := c.cfg.Clock.Now()
	sts, err := c.cfg.Store.QueueStats(ctx, &store.QueueStatsParams{Names: names, Now: now})
	if err != nil {
		return nil, err
	}
	if len(names) > 0 && len(sts) != len(names) {
		return nil, errors.New("the store described another number of queues")
	}
	out := make([]*QueueInfo, len(sts))
	for i, st := range sts {
		q := &st.Queue
		info := &QueueInfo{Name: q.Name, Configured: st.Configured, Paused: q.Paused,
			Options: QueueOptions{MaxRunning: q.MaxRunning, MaxRunningPerKey: q.MaxRunningPerKey,
				Rate:    RateLimit{Limit: q.Rate.Limit, Period: q.Rate.Period},
				KeyRate: RateLimit{Limit: q.KeyRate.Limit, Period: q.KeyRate.Period}, Fair: q.Fair, Weights: q.Weights},
			Ready: st.Ready, Scheduled: st.Scheduled, Leased: st.Leased, Running: st.Running,
			RateWindow: st.Window, RateWindowStarts: st.WindowStarts, UpdatedAt: q.UpdatedAt}
		if !st.OldestReady.IsZero() {
			info.OldestReadyAge = max(0, now.Sub(st.OldestReady))
		}
		for _, k := range st.RunningByKey {
			info.RunningByKey = append(info.RunningByKey, KeyCount{Key: k.Key, Count: k.Count})
		}
		out[i] = info
	}
	return out, nil
}
