package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/flowctl"
)

// ErrQueueNotFound: no queue of this name has a configuration.
var ErrQueueNotFound = errors.New("queue not found")

// Queues keeps the flow control of task queues (docs/flow-control.md): a
// queue's configuration, its pause, and the figures that show how it is
// used. Claims enforce it: ClaimTasks and the claims of Apply lease work
// tasks (kinds step and activity) of a controlled queue only within its
// limits, and none while it is paused; other kinds (decisions, timers,
// operations) are never held back. A queue without a configuration, or
// whose configuration controls nothing, is claimed as before.
type Queues interface {
	// PutQueue creates or replaces a queue's limits (every field but
	// Paused, which it keeps: PauseQueue sets it).
	PutQueue(ctx context.Context, p *PutQueueParams) error
	// PauseQueue pauses a queue (Paused true) or resumes it, creating its
	// configuration when it has none. Paused, a queue's work tasks stay
	// queued and no claim takes them; resumed, they are claimable at once.
	PauseQueue(ctx context.Context, p *PauseQueueParams) error
	// GetQueue returns a queue's configuration, or ErrQueueNotFound.
	GetQueue(ctx context.Context, name string) (*Queue, error)
	// QueueStats returns the figures of the named queues (all queues that
	// have a configuration or tasks when Names is empty), by name.
	QueueStats(ctx context.Context, p *QueueStatsParams) ([]*QueueStats, error)
}

// Queue is the flow-control configuration of a task queue. Zero limits do
// not limit.
type Queue struct {
	Name string
	// Paused: claims take no work task of the queue.
	Paused bool
	// MaxRunning bounds the work tasks of the queue that hold a live lease
	// at once, across all processes.
	MaxRunning int
	// MaxRunningPerKey bounds them per concurrency key (tasks of runs
	// without a key share the key "").
	MaxRunningPerKey int
	// Rate bounds the starts (claims) of the queue's work tasks per fixed
	// window of time; KeyRate bounds them per concurrency key.
	Rate    Rate
	KeyRate Rate
	// Fair rotates claims between the concurrency keys with ready work even
	// when no limit is set (any limit implies it).
	Fair bool
	// Weights gives keys a larger share of the starts under rotation: a
	// key of weight 3 starts three tasks for another's one. Keys not named
	// weigh 1.
	Weights map[string]int
	// UpdatedAt is when the configuration last changed (read only).
	UpdatedAt time.Time
}

// Rate is a rate limit: at most Limit starts in each window of Period,
// windows aligned to the Unix epoch (a window starts at every multiple of
// Period since 1970-01-01 UTC). Limit 0 means no limit.
type Rate struct {
	Limit  int
	Period time.Duration
}

// Window returns the start of the window that holds t (the picker's
// rule: flowctl.Rate.Window).
func (r Rate) Window(t time.Time) time.Time {
	return flowctl.Rate{Limit: r.Limit, Period: r.Period}.Window(t)
}

// Limits on a queue's configuration, the same on every backend.
const (
	// MaxQueueWeight is the largest weight of a key.
	MaxQueueWeight = 1000
	// MaxQueueWeights is the largest number of keys with a weight.
	MaxQueueWeights = 1000
	// MaxConcurrencyKey is the largest concurrency key, in bytes.
	MaxConcurrencyKey = 200
	// MaxTraceContext is the largest trace context of a run
	// (Run.TraceContext), in bytes.
	MaxTraceContext = 256
	// MaxTags is the largest number of tags of a run, MaxTagSize the
	// longest tag in bytes, and MaxMetadataSize the largest metadata of a
	// run: its keys and JSON values, in bytes. Every task of a run holds a
	// copy of both (Task.Tags, Task.Metadata).
	MaxTags         = 64
	MaxTagSize      = 200
	MaxMetadataSize = 64 << 10
	// MinRatePeriod and MaxRatePeriod bound a rate limit's period.
	MinRatePeriod = time.Millisecond
	MaxRatePeriod = 366 * 24 * time.Hour
)

// CheckLabels validates a run's tags and metadata: at most MaxTags tags
// of at most MaxTagSize bytes each, and metadata of at most
// MaxMetadataSize bytes (keys and values).
func CheckLabels(tags []string, metadata map[string]json.RawMessage) error {
	if len(tags) > MaxTags {
		return fmt.Errorf("%d tags, at most %d: %w", len(tags), MaxTags, hephtype.ErrInvalidInput)
	}
	for i, t := range tags {
		if len(t) > MaxTagSize {
			return fmt.Errorf("tag %d is %d bytes, at most %d: %w", i, len(t), MaxTagSize, hephtype.ErrInvalidInput)
		}
	}
	n := 0
	for k, v := range metadata {
		n += len(k) + len(v)
	}
	if n > MaxMetadataSize {
		return fmt.Errorf("metadata is %d bytes (keys and values), at most %d: %w", n, MaxMetadataSize, hephtype.ErrInvalidInput)
	}
	return nil
}

// Controlled reports whether q holds anything back: a pause, a limit, or
// rotation between keys. Claims of a queue that is not controlled take the
// fast path, as if it had no configuration.
func (q *Queue) Controlled() bool {
	return q.Paused || q.MaxRunning > 0 || q.MaxRunningPerKey > 0 || q.Rate.Limit > 0 || q.KeyRate.Limit > 0 ||
		q.Fair || len(q.Weights) > 0
}

// Check validates q, naming the field at fault.
func (q *Queue) Check() error {
	if err := CheckQueueName(q.Name); err != nil {
		return err
	}
	switch {
	case q.MaxRunning < 0:
		return fmt.Errorf("queue %s: MaxRunning is negative (%d)", q.Name, q.MaxRunning)
	case q.MaxRunningPerKey < 0:
		return fmt.Errorf("queue %s: MaxRunningPerKey is negative (%d)", q.Name, q.MaxRunningPerKey)
	}
	if err := q.Rate.check(); err != nil {
		return fmt.Errorf("queue %s: Rate: %w", q.Name, err)
	}
	if err := q.KeyRate.check(); err != nil {
		return fmt.Errorf("queue %s: KeyRate: %w", q.Name, err)
	}
	if len(q.Weights) > MaxQueueWeights {
		return fmt.Errorf("queue %s: %d Weights, at most %d", q.Name, len(q.Weights), MaxQueueWeights)
	}
	for k, w := range q.Weights {
		if err := CheckConcurrencyKey(k); err != nil {
			return fmt.Errorf("queue %s: Weights: %w", q.Name, err)
		}
		if w < 1 || w > MaxQueueWeight {
			return fmt.Errorf("queue %s: Weights[%q] is %d, want 1 to %d", q.Name, k, w, MaxQueueWeight)
		}
	}
	return nil
}

func (r Rate) check() error {
	switch {
	case r.Limit < 0:
		return fmt.Errorf("Limit is negative (%d)", r.Limit)
	case r.Limit == 0 && r.Period == 0:
		return nil
	case r.Limit == 0:
		return fmt.Errorf("Period %v without a Limit", r.Period)
	case r.Period < MinRatePeriod || r.Period > MaxRatePeriod:
		return fmt.Errorf("Period %v, want %v to %v", r.Period, MinRatePeriod, MaxRatePeriod)
	case r.Period%time.Microsecond != 0:
		return fmt.Errorf("Period %v is not a whole number of microseconds", r.Period)
	}
	return nil
}

// CheckQueueName validates a queue's name: 1 to hephtype.MaxNameLen bytes.
func CheckQueueName(name string) error {
	if name == "" {
		return fmt.Errorf("queue name is empty: %w", hephtype.ErrInvalidInput)
	}
	if len(name) > hephtype.MaxNameLen {
		return fmt.Errorf("queue name is %d bytes, at most %d: %w", len(name), hephtype.MaxNameLen, hephtype.ErrInvalidInput)
	}
	return nil
}

// CheckConcurrencyKey validates a concurrency key: at most
// MaxConcurrencyKey bytes of UTF-8 without control characters ("" is no
// key). Every backend checks it when a run is created.
func CheckConcurrencyKey(key string) error {
	if len(key) > MaxConcurrencyKey {
		return fmt.Errorf("concurrency key is %d bytes, at most %d: %w", len(key), MaxConcurrencyKey, hephtype.ErrInvalidInput)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("concurrency key %q is not UTF-8: %w", key, hephtype.ErrInvalidInput)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("concurrency key %q holds a control character: %w", key, hephtype.ErrInvalidInput)
		}
	}
	return nil
}

// CheckTraceContext validates a run's trace context (Run.TraceContext): at
// most MaxTraceContext bytes of printable ASCII, which a W3C traceparent
// is ("" is none). Every backend checks it when a run is created.
func CheckTraceContext(tc string) error {
	if len(tc) > MaxTraceContext {
		return fmt.Errorf("trace context is %d bytes, at most %d: %w", len(tc), MaxTraceContext, hephtype.ErrInvalidInput)
	}
	for i := range len(tc) {
		if c := tc[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("trace context %q holds a byte that is not printable ASCII: %w", tc, hephtype.ErrInvalidInput)
		}
	}
	return nil
}

// Controlled reports whether flow control applies to tasks of kind k:
// work (steps and activities, and so jobs). Engine bookkeeping (decisions,
// timers, workflow operations) is never held back.
func (k TaskKind) Controlled() bool { return k == TaskStep || k == TaskActivity }

// PutQueueParams carries a queue's configuration for PutQueue.
type PutQueueParams struct {
	Queue Queue
	Now   time.Time
}

// PauseQueueParams pauses or resumes a queue.
type PauseQueueParams struct {
	Name   string
	Paused bool
	Now    time.Time
}

// Check reports what is wrong with p, naming the field.
func (p *PauseQueueParams) Check() error {
	if err := CheckQueueName(p.Name); err != nil {
		return err
	}
	if p.Now.IsZero() {
		return errors.New("Now is zero")
	}
	return nil
}

// QueueStatsParams selects the queues QueueStats describes.
type QueueStatsParams struct {
	// Names, or all queues with a configuration or tasks when empty.
	Names []string
	Now   time.Time
	// TopKeys is how many keys RunningByKey lists, most running first;
	// defaults to 10, at most 100.
	TopKeys int
}

// QueueStats is what a queue holds and how its limits are used at Now.
// Counts are of every kind of task, except Running, RunningByKey and
// the rate windows, which count the work that flow control governs.
type QueueStats struct {
	// Queue is the configuration (only the name, when there is none).
	Queue Queue
	// Configured: the queue has a configuration.
	Configured bool
	// Ready tasks are claimable now; Scheduled ones become ready later.
	Ready     int
	Scheduled int
	// Leased tasks hold a live lease (every kind).
	Leased int
	// Running counts the work tasks holding a live lease that a
	// controlled claim leased (the count its limits compare with).
	Running int
	// OldestReady is the ready time of the oldest ready task (zero when
	// none is).
	OldestReady time.Time
	// RunningByKey lists the keys with running work, most first.
	RunningByKey []KeyCount
	// Window and WindowStarts: the current window of Rate and the starts
	// counted in it (zero without a rate limit).
	Window       time.Time
	WindowStarts int
}

// KeyCount is a count of a concurrency key.
type KeyCount struct {
	Key   string
	Count int
}

// Check validates p and returns its TopKeys with the default applied.
func (p *QueueStatsParams) Check() (int, error) {
	for _, n := range p.Names {
		if err := CheckQueueName(n); err != nil {
			return 0, err
		}
	}
	if p.Now.IsZero() {
		return 0, errors.New("Now is zero")
	}
	switch {
	case p.TopKeys < 0:
		return 0, fmt.Errorf("TopKeys is negative (%d)", p.TopKeys)
	case p.TopKeys == 0:
		return 10, nil
	case p.TopKeys > 100:
		return 100, nil
	}
	return p.TopKeys, nil
}
