package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/internal/steplog"
	"github.com/hephaestus-go/hephaestus/store"
)

// Causes of a task context's cancellation, told apart when the task ends.
var (
	// ErrRunCancelled: a commit cancelled the task (its run was cancelled
	// or ended).
	ErrRunCancelled = errors.New("the run was cancelled or finished")
	// ErrLeaseLost: the store no longer holds the task's lease for this
	// worker.
	ErrLeaseLost = errors.New("the task's lease was lost")
	// ErrShutdown: the pool stops; the task is given back.
	ErrShutdown = errors.New("the worker is shutting down")
	// ErrLeaseExpiring: the worker could not confirm the task's lease in
	// time, and stops the task before another worker may claim it.
	ErrLeaseExpiring = errors.New("the task's lease could not be extended in time; the task was stopped before it expires so that no other worker runs it at the same time")
)

// leaseKeeper holds the leases of every task this process runs, whatever
// its kind (steps, activities, decisions, timers, operations): it extends
// them (heartbeats), records heartbeat details, and cancels a task's
// context when its lease is lost, when a commit elsewhere cancelled it, or
// when the lease could not be confirmed and is about to expire. So in
// normal operation two workers never run one task at once: a worker that
// cannot reach the store stops its tasks a margin before their leases
// end, and only then may another claim them.
type leaseKeeper struct {
	cfg *Config

	mu    sync.Mutex
	tasks map[int64]*Held // by task id
	// hints are runs whose tasks a commit elsewhere cancelled: their
	// leases are checked at once.
	hints map[string]bool
	poke  chan struct{}
	// wakeAt is when the loop next wakes by itself: a task whose deadline
	// comes sooner pokes it.
	wakeAt time.Time
}

// Held is a task this process runs, and its lease: what an executor gets.
type Held struct {
	keeper *leaseKeeper
	task   *store.Task
	cancel context.CancelCauseFunc
	// until is the end of the lease as the store last confirmed it.
	until time.Time
	// details: the last heartbeat details the task recorded; pending:
	// they have not reached the store yet.
	details json.RawMessage
	pending bool
	// stopped: the context was cancelled for the lease.
	stopped bool
	// logs buffers what the task's code logs, until a heartbeat or the
	// end of the attempt stores it.
	logs *steplog.Buffer
}

func newLeaseKeeper(cfg *Config) *leaseKeeper {
	return &leaseKeeper{cfg: cfg, tasks: map[int64]*Held{}, hints: map[string]bool{}, poke: make(chan struct{}, 1)}
}

// margin is how long before its lease ends a task that could not extend it
// is stopped.
func (k *leaseKeeper) margin() time.Duration { return k.cfg.LeaseDuration / 5 }

// hold registers a task that starts running; cancel cancels its context.
// The previous attempt's heartbeat details come with the task.
func (k *leaseKeeper) hold(t *store.Task, cancel context.CancelCauseFunc) *Held {
	h := &Held{keeper: k, task: t, cancel: cancel, until: t.LeaseUntil, details: t.Details,
		logs: steplog.NewBuffer(steplog.Attempt{RunID: t.RunID, Step: t.Step, Index: t.Index, Attempt: t.Attempt, Worker: t.Owner})}
	if h.until.IsZero() {
		h.until = k.cfg.Clock.Now().Add(k.cfg.LeaseDuration)
	}
	k.mu.Lock()
	k.tasks[t.ID] = h
	soon := k.wakeAt.IsZero() || h.until.Add(-k.margin()).Before(k.wakeAt)
	k.mu.Unlock()
	if soon {
		k.wake()
	}
	return h
}

// release forgets a task that ended.
func (k *leaseKeeper) release(h *Held) {
	k.mu.Lock()
	if k.tasks[h.task.ID] == h {
		delete(k.tasks, h.task.ID)
	}
	k.mu.Unlock()
}

// Task is the task, as claimed: its Lease() is the fencing token of
// every change that completes it.
func (h *Held) Task() *store.Task { return h.task }

// RecordDetails keeps heartbeat details of the running task; the next
// heartbeat writes them, and a retry of the task reads them
// (store.Task.Details).
func (h *Held) RecordDetails(details json.RawMessage) {
	h.keeper.mu.Lock()
	h.details, h.pending = details, true
	h.keeper.mu.Unlock()
}

// Logs is the buffer of what the task's code logs: its Logger is the
// attempt's. Heartbeats store what it holds, and FlushLogs the rest.
func (h *Held) Logs() *steplog.Buffer { return h.logs }

// FlushLogs stores what the task's code logged since the last heartbeat:
// executors call it before they commit the attempt's outcome, so that
// the log is complete when the outcome shows. A failure is logged and the
// records are kept for a later flush.
func (h *Held) FlushLogs(ctx context.Context) {
	h.keeper.storeLogs(ctx, []*Held{h})
}

// storeLogs stores the buffered records of held tasks, in calls of at
// most store.MaxLogsPerAppend records.
func (k *leaseKeeper) storeLogs(ctx context.Context, held []*Held) {
	for _, h := range held {
		if h.logs.Empty() {
			continue
		}
		recs := h.logs.Drain()
		for len(recs) > 0 {
			chunk := recs[:min(len(recs), store.MaxLogsPerAppend)]
			if err := k.cfg.Store.AppendLogs(ctx, &store.AppendLogsParams{Records: chunk}); err != nil {
				if !errors.Is(err, context.Canceled) {
					k.cfg.Logger.Warn("cannot store a step's log records; they are kept for the next try", slog.String("run", h.task.RunID),
						slog.String("step", h.task.Step), slog.Int("records", len(recs)), slog.Any("err", err))
				}
				h.logs.Requeue(recs)
				break
			}
			recs = recs[len(chunk):]
		}
	}
}

// Details returns the task's last heartbeat details: recorded by this
// attempt, or else those the task was claimed with.
func (h *Held) Details() json.RawMessage {
	h.keeper.mu.Lock()
	defer h.keeper.mu.Unlock()
	return h.details
}

// cancelMatching cancels the tasks of a run running here that m matches
// (a commit of this process cancelled them).
func (k *leaseKeeper) cancelMatching(runID string, m store.TaskMatch) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range k.tasks {
		t := h.task
		if t.RunID == runID && (m.Kind == "" || m.Kind == t.Kind) && (m.Step == "" || m.Step == t.Step) && (m.Index < 0 || m.Index == t.Index) {
			h.cancel(ErrRunCancelled)
		}
	}
}

// hint asks for the leases of a run's tasks to be checked now: a commit of
// another process cancelled some of them.
func (k *leaseKeeper) hint(runID string) {
	k.mu.Lock()
	held := false
	for _, h := range k.tasks {
		if h.task.RunID == runID {
			held = true
			break
		}
	}
	if held {
		k.hints[runID] = true
	}
	k.mu.Unlock()
	if held {
		k.wake()
	}
}

// hintAll asks for every lease held to be checked now: notifications of
// cancellations may have been lost (the listener was not listening).
func (k *leaseKeeper) hintAll() {
	k.mu.Lock()
	for _, h := range k.tasks {
		k.hints[h.task.RunID] = true
	}
	n := len(k.hints)
	k.mu.Unlock()
	if n > 0 {
		k.wake()
	}
}

func (k *leaseKeeper) wake() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// beat is one heartbeat call and what it covered.
type beat struct {
	until   time.Time
	held    []*Held
	details map[*Held]json.RawMessage
	lost    []int64
	err     error
}

// run extends leases every HeartbeatInterval, checks the runs it is hinted
// at, and stops tasks whose lease it could not confirm in time, until ctx
// ends. One heartbeat call is in flight at a time; the watchdog does not
// wait for it (a call that hangs must not let a lease lapse unnoticed).
func (k *leaseKeeper) run(ctx context.Context) {
	cfg := k.cfg
	nextBeat := cfg.Clock.Now().Add(cfg.HeartbeatInterval)
	var inflight chan *beat
	for {
		wakeAt := nextBeat
		if inflight != nil && !nextBeat.After(cfg.Clock.Now()) {
			// A beat is due but the last one is still in flight: wait for
			// it (or a deadline), not for a time that has passed.
			wakeAt = time.Time{}
		}
		k.mu.Lock()
		if d, ok := k.nextDeadlineLocked(); ok && (wakeAt.IsZero() || d.Before(wakeAt)) {
			wakeAt = d
		}
		// Set under the lock that hold takes: a task held from now on sees
		// this wake time and pokes the loop if its deadline is sooner.
		k.wakeAt = wakeAt
		k.mu.Unlock()
		var timer <-chan time.Time // nil: no time to wake at
		if !wakeAt.IsZero() {
			timer = clock.Until(cfg.Clock, wakeAt) // at once when due already
		}
		select {
		case <-timer:
		case <-k.poke:
		case b := <-inflight:
			inflight = nil
			k.settle(b)
		case <-ctx.Done():
			if inflight != nil {
				<-inflight
			}
			return
		}
		now := cfg.Clock.Now()
		k.expire(now)
		if inflight != nil {
			continue
		}
		var runs map[string]bool
		if !now.Before(nextBeat) {
			nextBeat = now.Add(cfg.HeartbeatInterval)
			k.mu.Lock()
			clear(k.hints) // every lease is checked now
			k.mu.Unlock()
		} else {
			k.mu.Lock()
			if len(k.hints) == 0 {
				k.mu.Unlock()
				continue
			}
			runs, k.hints = k.hints, map[string]bool{}
			k.mu.Unlock()
		}
		if b := k.collect(now, runs); b != nil {
			inflight = make(chan *beat, 1)
			go func(ch chan *beat) {
				k.send(ctx, b)
				ch <- b
			}(inflight)
		}
	}
}

// collect gathers the leases to extend: all, or those of runs.
func (k *leaseKeeper) collect(now time.Time, runs map[string]bool) *beat {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := &beat{until: now.Add(k.cfg.LeaseDuration)}
	for _, h := range k.tasks {
		if h.stopped || (runs != nil && !runs[h.task.RunID]) {
			continue
		}
		b.held = append(b.held, h)
		if h.pending {
			if b.details == nil {
				b.details = map[*Held]json.RawMessage{}
			}
			b.details[h] = h.details
		}
	}
	if len(b.held) == 0 {
		return nil
	}
	return b
}

func (k *leaseKeeper) send(ctx context.Context, b *beat) {
	p := &store.HeartbeatParams{Leases: make([]store.Lease, len(b.held)), Until: b.until}
	for i, h := range b.held {
		p.Leases[i] = h.task.Lease()
	}
	for h, d := range b.details {
		if p.Details == nil {
			p.Details = map[int64]json.RawMessage{}
		}
		p.Details[h.task.ID] = d
	}
	// A call may not outlast the leases it extends.
	bctx, cancel := context.WithTimeout(ctx, k.cfg.LeaseDuration)
	defer cancel()
	b.lost, b.err = k.cfg.Store.Heartbeat(bctx, p)
	if b.err == nil {
		// What the tasks logged so far survives a crash of this process.
		k.storeLogs(bctx, b.held)
	}
}

// settle applies the outcome of a heartbeat.
func (k *leaseKeeper) settle(b *beat) {
	if b.err != nil {
		if !errors.Is(b.err, context.Canceled) {
			k.cfg.Logger.Warn("heartbeat failed; tasks whose lease cannot be confirmed are stopped before it ends", slog.Int("tasks", len(b.held)), slog.Any("err", b.err))
		}
		return
	}
	gone := map[int64]bool{}
	for _, id := range b.lost {
		gone[id] = true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range b.held {
		if gone[h.task.ID] {
			h.stopped = true
			h.cancel(ErrLeaseLost)
			continue
		}
		if b.until.After(h.until) {
			h.until = b.until
		}
		if d, ok := b.details[h]; ok && h.pending && string(h.details) == string(d) {
			h.pending = false
		}
	}
}

// nextDeadlineLocked returns the earliest time a held task must be stopped if its
// lease is not confirmed before.
func (k *leaseKeeper) nextDeadlineLocked() (time.Time, bool) {
	var first time.Time
	for _, h := range k.tasks {
		if h.stopped {
			continue
		}
		if d := h.until.Add(-k.margin()); first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first, !first.IsZero()
}

// expire stops the tasks whose lease ends within the margin.
func (k *leaseKeeper) expire(now time.Time) {
	k.mu.Lock()
	var stopped []*Held
	for _, h := range k.tasks {
		if !h.stopped && !now.Before(h.until.Add(-k.margin())) {
			h.stopped = true
			h.cancel(ErrLeaseExpiring)
			stopped = append(stopped, h)
		}
	}
	k.mu.Unlock()
	for _, h := range stopped {
		t := h.task
		k.cfg.Logger.Warn("stopping a task whose lease could not be extended", slog.Int64("task", t.ID), slog.String("run", t.RunID),
			slog.String("kind", string(t.Kind)), slog.String("step", t.Step), slog.Time("lease_until", h.until))
	}
}
