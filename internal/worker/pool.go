// Package worker is the runtime's worker pool: it claims the tasks of the
// queues this process serves and hands each to an Executor, keeping the
// task's lease while it runs.
//
// It owns the claim loops (immediate claims, standing claims served by the
// next commit, hand-offs), the wake-ups (local commits, store
// notifications, known ready times, the adaptive jittered poll), the lease
// keeper (heartbeats, heartbeat details, the watchdog that stops a task
// whose lease cannot be confirmed, cancellation of tasks a commit
// cancelled) and the graceful drain on Stop. It may not decide anything
// about a run nor write a change of its own: what a task does, and the
// fenced change that completes it, belong to the executor (the flow and
// workflow runtimes in process; a remote worker, through the same seam,
// through internal/remote, which claims with the store and waits with the
// pool's wake-ups: Subscribe and WaitReady). Its only writes are claims (through the committer), heartbeats
// and the release of tasks it gives back.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/store"
)

// Executor runs claimed tasks: the seam between the pool and what a task
// means. Execute runs the task h holds and commits its outcome with a
// change fenced by the task's lease (h.Task().Lease()); ctx ends when the
// lease is lost or cannot be confirmed in time, when the task is
// cancelled, or when the pool shuts down (context.Cause tells which:
// ErrLeaseLost, ErrLeaseExpiring, ErrRunCancelled, ErrShutdown). When
// handoff is not empty the completing commit may claim tasks of that
// queue for this slot: Execute returns them, and the pool runs the first
// and gives back the rest. An error means the outcome was not committed
// (the task runs again once its lease ends, or at once when ctx ended with
// ErrShutdown: the pool gives it back).
type Executor interface {
	Execute(ctx context.Context, h *Held, handoff string) (claimed []*store.Task, err error)
}

// Kinds routes tasks to executors by kind.
type Kinds map[store.TaskKind]Executor

// Execute implements Executor.
func (k Kinds) Execute(ctx context.Context, h *Held, handoff string) ([]*store.Task, error) {
	e, ok := k[h.Task().Kind]
	if !ok {
		return nil, fmt.Errorf("task kind %q is not handled by this version", h.Task().Kind)
	}
	return e.Execute(ctx, h, handoff)
}

// The defaults of the pool's settings, which hephaestus.Config documents
// and applies too: one source for both.
const (
	DefaultClaimBatch      = 64
	DefaultLeaseDuration   = 30 * time.Second
	DefaultPollInterval    = time.Second
	DefaultMinPollInterval = 50 * time.Millisecond // or PollInterval, if shorter
	DefaultShutdownTimeout = 10 * time.Second
)

// DefaultHeartbeatInterval is the default heartbeat for a lease.
func DefaultHeartbeatInterval(lease time.Duration) time.Duration { return lease / 3 }

// Config configures a Pool. Zero durations and sizes take the defaults
// above.
type Config struct {
	Store     store.Store
	Clock     clock.Clock
	Logger    *slog.Logger
	Telemetry *telemetry.Hub
	// Tracer makes the span of each task a worker runs (nil: none).
	Tracer    *tracing.Tracer
	Committer *commit.Committer
	Executor  Executor
	// Handlers returns what this process can run: claims and look-aheads
	// ask only for those tasks.
	Handlers          func() []string
	Queues            map[string]int
	ClaimBatch        int
	LeaseDuration     time.Duration
	HeartbeatInterval time.Duration
	MinPollInterval   time.Duration
	PollInterval      time.Duration
	ShutdownTimeout   time.Duration
}

// Pool runs the claim loops of the configured queues.
type Pool struct {
	cfg    Config
	leases *leaseKeeper
	// isStarted: Start was called (Started, without lifeMu).
	isStarted atomic.Bool

	wakeMu    sync.Mutex
	wakes     map[string]chan struct{}
	nextReady map[string]time.Time // earliest known future ready time by queue
	// waiters are claimers outside the claim loops (Subscribe); waiting
	// counts them, so that a wake-up without any skips the lock.
	waiters map[*Waiter]struct{}
	waiting atomic.Int32

	lifeMu  sync.Mutex
	started bool
	stopped bool
	run     *running
}

// running is the set of goroutines that Start runs.
type running struct {
	// stopClaim stops the claim loops; hardStop cancels running tasks.
	stopClaim    context.CancelFunc
	claimCtx     context.Context
	hardStop     context.CancelCauseFunc
	taskCtx      context.Context
	claimLoops   sync.WaitGroup // one per queue
	loops        sync.WaitGroup // leases, notifications
	tasks        sync.WaitGroup // running tasks
	stopServices context.CancelFunc
}

// New returns a Pool; it starts nothing until Start.
func New(cfg *Config) *Pool {
	p := &Pool{cfg: *cfg, wakes: map[string]chan struct{}{}, nextReady: map[string]time.Time{}}
	telemetry.Defaults(&p.cfg.Clock, &p.cfg.Logger, &p.cfg.Telemetry)
	if p.cfg.Handlers == nil {
		p.cfg.Handlers = func() []string { return []string{} }
	}
	if p.cfg.ClaimBatch <= 0 {
		p.cfg.ClaimBatch = DefaultClaimBatch
	}
	if p.cfg.LeaseDuration <= 0 {
		p.cfg.LeaseDuration = DefaultLeaseDuration
	}
	if p.cfg.HeartbeatInterval <= 0 {
		p.cfg.HeartbeatInterval = DefaultHeartbeatInterval(p.cfg.LeaseDuration)
	}
	if p.cfg.PollInterval <= 0 {
		p.cfg.PollInterval = DefaultPollInterval
	}
	if p.cfg.MinPollInterval <= 0 {
		p.cfg.MinPollInterval = min(DefaultMinPollInterval, p.cfg.PollInterval)
	}
	if p.cfg.ShutdownTimeout <= 0 {
		p.cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	for q := range p.cfg.Queues {
		p.wakes[q] = make(chan struct{}, 1)
	}
	p.leases = newLeaseKeeper(&p.cfg)
	return p
}

// Start starts the claim loops, the lease keeper and the listener of
// store notifications. It returns at once; Stop ends them. A second call
// is a no-op; a call after Stop fails with commit.ErrClosed.
func (p *Pool) Start(ctx context.Context) error {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.stopped {
		return commit.ErrClosed
	}
	if p.started {
		return nil
	}
	p.started = true
	p.isStarted.Store(true)
	w := &running{}
	w.claimCtx, w.stopClaim = context.WithCancel(context.WithoutCancel(ctx))
	w.taskCtx, w.hardStop = context.WithCancelCause(context.WithoutCancel(ctx))
	svcCtx, stopSvc := context.WithCancel(context.WithoutCancel(ctx))
	w.stopServices = stopSvc
	p.run = w
	for q, n := range p.cfg.Queues {
		if n == 0 {
			continue
		}
		w.claimLoops.Go(func() { p.claimLoop(w, q, n) })
	}
	w.loops.Go(func() { p.leases.run(svcCtx) })
	if n, ok := p.cfg.Store.(store.Notifier); ok {
		w.loops.Go(func() {
			// Hints from other processes: wake the queue's loop, which
			// claims at once; check the leases of a run whose tasks were
			// cancelled, so that its running code stops now.
			err := n.Listen(svcCtx, func(n store.Notification) {
				switch {
				case n.Resync:
					// What was notified before listening began is lost.
					p.leases.hintAll()
					for q := range p.cfg.Queues {
						p.wake(q)
					}
				case n.Queue != "":
					p.wake(n.Queue)
				case n.RunID != "":
					p.leases.hint(n.RunID)
				}
			})
			if err != nil && svcCtx.Err() == nil {
				p.cfg.Logger.Error("listen for task notifications", slog.Any("err", err))
			}
		})
	}
	return nil
}

// Stop drains the pool: it stops claiming, lets running tasks finish for
// up to ShutdownTimeout (or until ctx ends), then cancels the rest with
// ErrShutdown (they are given back) and stops the lease keeper. Safe to
// call twice and before Start.
func (p *Pool) Stop(ctx context.Context) {
	p.lifeMu.Lock()
	if p.stopped {
		p.lifeMu.Unlock()
		return
	}
	p.stopped = true
	w := p.run
	p.lifeMu.Unlock()
	if w == nil {
		return
	}
	w.stopClaim()
	// The claim loops start no task once they have returned.
	w.claimLoops.Wait()
	done := make(chan struct{})
	go func() { w.tasks.Wait(); close(done) }()
	select {
	case <-done:
	case <-p.cfg.Clock.After(p.cfg.ShutdownTimeout):
	case <-ctx.Done():
	}
	w.hardStop(ErrShutdown)
	<-done
	w.stopServices()
	w.loops.Wait()
}

// claimLoop keeps the slots of one queue busy. Claims go through the
// committer: an immediate claim when slots are free, and, once the queue
// is drained, a standing claim that the next transaction serves — so a
// task created by a local commit is leased in that same commit. The loop
// also wakes at the next known ready time (timers, retries), and at least
// every PollInterval for work of other processes.
func (p *Pool) claimLoop(w *running, queue string, concurrency int) {
	p.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.WorkerStarted, Queue: queue})
	defer p.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.WorkerStopped, Queue: queue})
	l := p.newQueueLoop(w, queue, concurrency)
	for {
		if w.claimCtx.Err() != nil {
			return
		}
		n := min(concurrency-len(l.slots), p.cfg.ClaimBatch)
		if n == 0 {
			if !l.waitForSlot() {
				return
			}
			continue
		}
		if l.claimNow {
			switch l.claimAtOnce(n) {
			case loopStop:
				return
			case loopAgain:
				continue
			}
		}
		wakeAt, due := l.nextWake()
		if due {
			l.claimNow = true
			continue
		}
		if !l.waitWithStandingClaim(n, wakeAt) {
			return
		}
	}
}

// queueLoop is the state of one queue's claim loop.
type queueLoop struct {
	p           *Pool
	w           *running
	queue       string
	concurrency int
	slots       chan struct{} // one token per running task
	free        chan struct{} // a slot was freed
	wake        chan struct{} // the queue's wake-ups
	backoff     time.Duration // the wait after a failed claim
	poll        time.Duration // the adaptive poll: MinPollInterval up to PollInterval
	// claimNow: claim at once rather than wait with a standing claim;
	// lookAhead: ask the store for the queue's next ready time.
	claimNow, lookAhead bool
}

// claimBackoff is the first wait after a failed claim; it doubles up to
// PollInterval and resets on success.
const claimBackoff = 10 * time.Millisecond

func (p *Pool) newQueueLoop(w *running, queue string, concurrency int) *queueLoop {
	p.wakeMu.Lock()
	wake := p.wakes[queue]
	p.wakeMu.Unlock()
	return &queueLoop{
		p: p, w: w, queue: queue, concurrency: concurrency,
		slots:    make(chan struct{}, concurrency),
		free:     make(chan struct{}, 1),
		wake:     wake,
		backoff:  claimBackoff,
		poll:     p.cfg.MinPollInterval,
		claimNow: true, lookAhead: true,
	}
}

// loopStep is what the claim loop does after a step.
type loopStep int

const (
	loopWait  loopStep = iota // go on to wait with a standing claim
	loopAgain                 // start the loop over
	loopStop                  // return
)

// waitForSlot waits until a running task frees its slot; false when the
// loop is stopping.
func (l *queueLoop) waitForSlot() bool {
	select {
	case <-l.free:
		return true
	case <-l.w.claimCtx.Done():
		return false
	}
}

// dispatch runs each task in a slot of its own, waiting for a free one.
func (l *queueLoop) dispatch(tasks []*store.Task) {
	for _, t := range tasks {
		l.slots <- struct{}{}
		l.w.tasks.Go(func() {
			defer func() {
				<-l.slots
				select {
				case l.free <- struct{}{}:
				default:
				}
			}()
			// A completion may hand the next task of the queue straight
			// back to this slot.
			for next := t; next != nil; {
				next = l.p.runTask(l.w, next)
			}
		})
	}
}

// settle waits for a claim a transaction has taken, and dispatches (or,
// when stopping, releases) what it leased.
func (l *queueLoop) settle(cr *commit.Claim) ([]*store.Task, error) {
	<-cr.Done()
	if l.w.claimCtx.Err() != nil {
		l.p.Release(cr.Tasks)
		return nil, l.w.claimCtx.Err()
	}
	l.dispatch(cr.Tasks)
	return cr.Tasks, cr.Err
}

// claimAtOnce claims up to n tasks in the committer's next transaction
// and runs them. A failed claim is logged and retried after a backoff
// that doubles up to PollInterval. A full batch means there may be more
// (loopAgain); a short one that the queue is drained, and the loop waits
// with a standing claim (loopWait).
func (l *queueLoop) claimAtOnce(n int) loopStep {
	p, ctx := l.p, l.w.claimCtx
	tasks, err := l.settle(p.cfg.Committer.Claim(l.queue, n, true))
	if ctx.Err() != nil {
		return loopStop
	}
	if errors.Is(err, commit.ErrClosed) {
		return loopStop // the committer was closed under the pool: nothing to claim with
	}
	if err != nil {
		p.cfg.Logger.Error("claim tasks", slog.String("queue", l.queue), slog.Any("err", err))
		p.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.WorkerFailed, Queue: l.queue, Err: err})
		select {
		case <-p.cfg.Clock.After(l.backoff):
		case <-ctx.Done():
			return loopStop
		}
		l.backoff = min(l.backoff*2, p.cfg.PollInterval)
		return loopAgain
	}
	l.backoff = claimBackoff
	p.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.WorkerPoll, Queue: l.queue, Count: len(tasks)})
	if len(tasks) > 0 {
		l.poll = p.cfg.MinPollInterval
	}
	if l.claimNow = len(tasks) == n; l.claimNow {
		return loopAgain
	}
	return loopWait
}

// nextWake returns when the loop wakes to claim again: after its jittered
// adaptive poll, or at the queue's earlier known ready time (asking the
// store for it once per poll). due reports a ready time already past,
// for which the loop claims now rather than sleep: a fake clock would not
// wake it again.
func (l *queueLoop) nextWake() (wakeAt time.Time, due bool) {
	p, ctx := l.p, l.w.claimCtx
	now := p.cfg.Clock.Now()
	wakeAt = now.Add(Jitter(l.poll))
	if l.lookAhead {
		// Tasks due later (timers, retries, other processes' work).
		if next, ok, err := p.cfg.Store.NextReady(ctx, &store.NextReadyParams{Queues: []string{l.queue}, Handlers: p.cfg.Handlers()}); err == nil && ok &&
			(next.After(now) || !p.heldBack(ctx, l.queue)) {
			p.noteReady(l.queue, next)
		}
		l.lookAhead = false
	}
	if next, ok := p.localReady(l.queue); ok {
		if !next.After(p.cfg.Clock.Now()) {
			// Due already (the clock moved while this loop was busy).
			p.clearReady(l.queue)
			return wakeAt, true
		}
		if next.Before(wakeAt) {
			wakeAt = next
		}
	}
	return wakeAt, false
}

// waitWithStandingClaim leaves a claim of up to n tasks for the next
// transaction to serve and waits for it, a wake-up of the queue, or
// wakeAt (which lengthens the poll). A claim not served is withdrawn, or
// settled if a transaction took it meanwhile. It returns false when the
// committer is closed.
func (l *queueLoop) waitWithStandingClaim(n int, wakeAt time.Time) bool {
	p := l.p
	cr := p.cfg.Committer.Claim(l.queue, n, false)
	select {
	case <-cr.Done():
		tasks, err := l.settle(cr)
		if errors.Is(err, commit.ErrClosed) {
			return false
		}
		l.claimNow = len(tasks) == n
		return true
	case <-l.wake:
		l.claimNow = true
	case <-clock.Until(p.cfg.Clock, wakeAt):
		l.claimNow, l.lookAhead = true, true
		p.clearReady(l.queue)
		l.poll = min(l.poll*2, p.cfg.PollInterval)
	case <-l.w.claimCtx.Done():
	}
	if !p.cfg.Committer.Withdraw(cr) {
		_, _ = l.settle(cr)
	}
	return true
}

// heldBack reports whether flow control may be what keeps the ready tasks
// of queue from a claim that just came back short: the queue is paused or
// limited (store.Queue.Controlled). The loop then does not claim again at
// once for a ready time in the past, which would spin; it waits for its
// adaptive poll, a wake-up (a local commit, a notification, a resume), or
// the next commit, whose standing claim takes a slot as soon as one frees.
func (p *Pool) heldBack(ctx context.Context, queue string) bool {
	q, err := p.cfg.Store.GetQueue(ctx, queue)
	return err == nil && q.Controlled()
}

// Jitter spreads d over ±20%, so that idle workers of many processes do
// not poll in step.
func Jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// AfterCommit is the committer's hook: it wakes the loops of queues that
// got ready tasks (or notes when timers and retries become due), and
// cancels the code running here of tasks the batch cancelled.
func (p *Pool) AfterCommit(batch []*commit.Request, claimed map[int64]bool, now time.Time) {
	for _, r := range batch {
		if r.Err != nil || r.Res.Run == nil {
			continue
		}
		for _, t := range r.Res.Tasks {
			switch {
			case claimed[t.ID]:
				// Leased by this very commit: nobody needs waking.
			case t.ReadyAt.After(now):
				p.noteReady(t.Queue, t.ReadyAt)
			default:
				p.wake(t.Queue)
			}
		}
		if r.Update != nil {
			for _, m := range r.Update.Cancel {
				if m.Kind != store.TaskTimer {
					p.leases.cancelMatching(r.Res.Run.ID, m)
				}
			}
		}
	}
}

// CheckRun checks the leases this pool holds on tasks of a run at once
// (as a notification from another process does): a run deleted with its
// tasks has its running code here cancelled now, not at the next
// heartbeat.
func (p *Pool) CheckRun(runID string) { p.leases.hint(runID) }

// Started reports whether Start was called (and worked).
func (p *Pool) Started() bool { return p.isStarted.Load() }

// Wake tells the loop of queue that a task is ready (one written outside
// the Committer, whose commits wake it by themselves).
func (p *Pool) Wake(queue string) { p.wake(queue) }

func (p *Pool) wake(queue string) {
	p.wakeMu.Lock()
	ch := p.wakes[queue]
	p.wakeMu.Unlock()
	signal(ch)
	if p.waiting.Load() == 0 {
		return
	}
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	for w := range p.waiters {
		if slices.Contains(w.queues, queue) {
			signal(w.ch)
		}
	}
}

func signal(ch chan struct{}) {
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Waiter is a claimer outside the pool's claim loops (a remote worker's
// long poll) waiting for tasks of some queues: the wake-ups of the pool's
// loops (commits of this process that make a task ready without claiming
// it, store notifications while the pool runs) wake it too.
type Waiter struct {
	queues []string
	ch     chan struct{}
}

// Subscribe registers a waiter for tasks of queues. Subscribe before
// claiming, so that a commit between the claim and WaitReady still wakes
// it; Unsubscribe when done.
func (p *Pool) Subscribe(queues []string) *Waiter {
	w := &Waiter{queues: slices.Clone(queues), ch: make(chan struct{}, 1)}
	p.wakeMu.Lock()
	if p.waiters == nil {
		p.waiters = map[*Waiter]struct{}{}
	}
	p.waiters[w] = struct{}{}
	p.wakeMu.Unlock()
	p.waiting.Add(1)
	return w
}

// Unsubscribe removes a waiter; a nil one or one removed already is
// ignored.
func (p *Pool) Unsubscribe(w *Waiter) {
	if w == nil {
		return
	}
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	if _, ok := p.waiters[w]; ok {
		delete(p.waiters, w)
		p.waiting.Add(-1)
	}
}

// WaitReady waits, as an idle claim loop does, until a task of w's queues
// (of handlers) may be ready: a wake-up, the earliest ready time the store
// knows (timers, retries, expiring leases), or the jittered poll, whichever
// comes first, and at the latest until deadline. poll is the waiter's
// adaptive poll interval: it returns the next one (doubled, up to
// PollInterval, when the poll ran out without a wake-up), or ctx's error.
func (p *Pool) WaitReady(ctx context.Context, w *Waiter, handlers []string, poll time.Duration, deadline time.Time) (time.Duration, error) {
	if poll <= 0 {
		poll = p.cfg.MinPollInterval
	}
	now := p.cfg.Clock.Now()
	wakeAt := now.Add(Jitter(poll))
	if deadline.Before(wakeAt) {
		wakeAt = deadline
	}
	if next, ok, err := p.cfg.Store.NextReady(ctx, &store.NextReadyParams{Queues: w.queues, Handlers: handlers}); err == nil && ok &&
		next.After(now) && next.Before(wakeAt) {
		wakeAt = next
	}
	select {
	case <-w.ch:
		return poll, nil
	case <-clock.Until(p.cfg.Clock, wakeAt):
		return min(poll*2, p.cfg.PollInterval), nil
	case <-ctx.Done():
		return poll, ctx.Err()
	}
}

// noteReady records that a task of queue becomes ready at t, and wakes the
// queue's loop if that is sooner than it planned to look.
func (p *Pool) noteReady(queue string, t time.Time) {
	p.wakeMu.Lock()
	old, ok := p.nextReady[queue]
	if !ok || t.Before(old) {
		p.nextReady[queue] = t
	}
	p.wakeMu.Unlock()
	if !ok || t.Before(old) {
		p.wake(queue)
	}
}

func (p *Pool) localReady(queue string) (time.Time, bool) {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	t, ok := p.nextReady[queue]
	return t, ok
}

func (p *Pool) clearReady(queue string) {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	if t, ok := p.nextReady[queue]; ok && !t.After(p.cfg.Clock.Now()) {
		delete(p.nextReady, queue)
	}
}

// Release gives claimed tasks back unstarted.
func (p *Pool) Release(tasks []*store.Task) {
	if len(tasks) == 0 {
		return
	}
	leases := make([]store.Lease, len(tasks))
	for i, t := range tasks {
		leases[i] = t.Lease()
	}
	if err := p.cfg.Store.ReleaseTasks(context.Background(), leases); err != nil {
		p.cfg.Logger.Warn("release tasks", slog.Any("err", err))
	}
}

// Expected reports errors that are part of normal operation for a task
// whose outcome was not committed: its lease went, its run was cancelled
// or is gone, the worker stops. They are logged as warnings, others as
// errors.
func Expected(err error) bool {
	for _, e := range expected {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

var expected = []error{store.ErrLeaseLost, store.ErrRunNotFound, ErrShutdown, ErrRunCancelled, ErrLeaseLost, ErrLeaseExpiring}

// ExpectErrors adds errors that Expected accepts (the runtimes' "run
// finished"). Call it at init only.
func ExpectErrors(errs ...error) { expected = append(expected, errs...) }

// runTask runs one claimed task through the executor. It returns a task
// of the same queue claimed by the task's completing commit for this slot,
// if any. Whatever its kind, the task's lease is held (heartbeated) while
// it runs, and its context ends when the lease is lost or cannot be
// confirmed in time, when its run is cancelled, or at shutdown.
func (p *Pool) runTask(w *running, t *store.Task) *store.Task {
	ctx, cancel := context.WithCancelCause(w.taskCtx)
	defer cancel(nil)
	h := p.leases.hold(t, cancel)
	defer p.leases.release(h)
	start := p.cfg.Clock.Now()
	info := telemetry.OfTask(t)
	// On task.started, Duration is how long the task waited in its queue
	// once ready.
	info.Kind, info.Duration = telemetry.TaskStarted, max(start.Sub(t.ReadyAt), 0)
	p.cfg.Telemetry.Emit(info)
	info.Duration = 0
	ctx, span := p.cfg.Tracer.StartTask(ctx, t, start)
	handoff := t.Queue
	if w.claimCtx.Err() != nil {
		handoff = "" // stopping: claim nothing more
	}
	claimed, err := p.cfg.Executor.Execute(ctx, h, handoff)
	var next *store.Task
	var back []*store.Task
	for _, ct := range claimed {
		if next == nil && ct.Queue == t.Queue && w.claimCtx.Err() == nil {
			next = ct
		} else {
			back = append(back, ct)
		}
	}
	p.Release(back)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		if errors.Is(err, ErrShutdown) {
			// Given back: it runs again at once elsewhere.
			p.Release([]*store.Task{t})
		}
		level := slog.LevelError
		if Expected(err) {
			level = slog.LevelWarn
		}
		p.cfg.Logger.Log(context.Background(), level, "task", slog.String("kind", string(t.Kind)), slog.Int64("task", t.ID),
			slog.String("run", t.RunID), slog.String("step", t.Step), slog.Any("err", err))
		end := p.cfg.Clock.Now()
		p.cfg.Tracer.EndTask(t, span, err, end)
		info.Kind, info.Err, info.Duration = telemetry.TaskFailed, err, end.Sub(start)
		p.cfg.Telemetry.Emit(info)
		return next
	}
	end := p.cfg.Clock.Now()
	p.cfg.Tracer.EndTask(t, span, nil, end)
	info.Kind, info.Duration = telemetry.TaskCompleted, end.Sub(start)
	p.cfg.Telemetry.Emit(info)
	return next
}
