package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/store"
)

// workers is the set of goroutines that Start runs.
type workers struct {
	// stopClaim stops the claim loops; hardStop cancels running steps.
	stopClaim    context.CancelFunc
	claimCtx     context.Context
	hardStop     context.CancelCauseFunc
	stepCtx      context.Context
	claimLoops   sync.WaitGroup // one per queue
	loops        sync.WaitGroup // heartbeat, notifications, retention
	tasks        sync.WaitGroup // running tasks
	stopServices context.CancelFunc
}

// Start starts the workers of the configured queues, the heartbeat of
// their leases and the retention sweep. It returns at once; Stop ends
// them. Calling Start twice is a no-op.
func (c *Client) Start(ctx context.Context) error {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.stopped {
		return ErrClosed
	}
	if c.started {
		return nil
	}
	c.started = true
	w := &workers{}
	w.claimCtx, w.stopClaim = context.WithCancel(context.WithoutCancel(ctx))
	w.stepCtx, w.hardStop = context.WithCancelCause(context.WithoutCancel(ctx))
	svcCtx, stopSvc := context.WithCancel(context.WithoutCancel(ctx))
	w.stopServices = stopSvc
	c.workers = w
	for q, n := range c.cfg.Queues {
		if n == 0 {
			continue
		}
		w.claimLoops.Add(1)
		go func() {
			defer w.claimLoops.Done()
			c.claimLoop(w, q, n)
		}()
	}
	w.loops.Add(1)
	go func() {
		defer w.loops.Done()
		c.leases.run(svcCtx)
	}()
	w.loops.Add(1)
	go func() {
		defer w.loops.Done()
		c.maintain(svcCtx)
	}()
	if n, ok := c.cfg.Store.(store.Notifier); ok {
		w.loops.Add(1)
		go func() {
			defer w.loops.Done()
			// Hints from other processes: wake the queue's loop, which
			// claims at once; check the leases of a run whose tasks were
			// cancelled, so that its running code stops now.
			err := n.Listen(svcCtx, func(n store.Notification) {
				switch {
				case n.Queue != "":
					c.wake(n.Queue)
				case n.RunID != "":
					c.leases.hint(n.RunID)
				}
			})
			if err != nil && svcCtx.Err() == nil {
				c.cfg.Logger.Error("listen for task notifications", slog.Any("err", err))
			}
		}()
	}
	if c.cfg.Retention > 0 {
		w.loops.Add(1)
		go func() {
			defer w.loops.Done()
			c.retentionLoop(svcCtx)
		}()
	}
	return nil
}

// Stop shuts the client down gracefully: it stops claiming tasks, lets
// running steps finish for up to Config.ShutdownTimeout (or until ctx
// ends), then cancels the rest (their tasks run again elsewhere once their
// leases expire), commits what is pending and returns. Safe to call twice
// and before Start.
func (c *Client) Stop(ctx context.Context) error {
	c.lifeMu.Lock()
	if c.stopped {
		c.lifeMu.Unlock()
		return nil
	}
	c.stopped = true
	w := c.workers
	c.lifeMu.Unlock()
	if w != nil {
		w.stopClaim()
		// The claim loops start no task once they have returned.
		w.claimLoops.Wait()
		done := make(chan struct{})
		go func() { w.tasks.Wait(); close(done) }()
		select {
		case <-done:
		case <-c.cfg.Clock.After(c.cfg.ShutdownTimeout):
		case <-ctx.Done():
		}
		w.hardStop(errShutdown)
		<-done
		w.stopServices()
		w.loops.Wait()
	}
	c.commit.close()
	c.wf.sticky.close()
	return nil
}

// claimLoop keeps the slots of one queue busy. Claims go through the
// committer: an immediate claim when slots are free, and, once the queue
// is drained, a standing claim that the next transaction serves — so a
// task created by a local commit is leased in that same commit. The loop
// also wakes at the next known ready time (timers, retries), and at least
// every PollInterval for work of other processes.
func (c *Client) claimLoop(w *workers, queue string, concurrency int) {
	c.emit(Event{Kind: WorkerStarted, Queue: queue})
	defer c.emit(Event{Kind: WorkerStopped, Queue: queue})
	slots := make(chan struct{}, concurrency)
	free := make(chan struct{}, 1)
	c.wakeMu.Lock()
	wake := c.wakes[queue]
	c.wakeMu.Unlock()
	backoff := 10 * time.Millisecond
	dispatch := func(tasks []*store.Task) {
		for _, t := range tasks {
			slots <- struct{}{}
			w.tasks.Add(1)
			go func() {
				defer func() {
					<-slots
					select {
					case free <- struct{}{}:
					default:
					}
					w.tasks.Done()
				}()
				// A completion may hand the next task of the queue straight
				// back to this slot.
				for next := t; next != nil; {
					next = c.runTask(w, next)
				}
			}()
		}
	}
	// settle waits for a claim a transaction has taken, and dispatches (or,
	// when stopping, releases) what it leased.
	settle := func(cr *claimReq) ([]*store.Task, error) {
		<-cr.done
		if w.claimCtx.Err() != nil {
			c.release(cr.tasks)
			return nil, w.claimCtx.Err()
		}
		dispatch(cr.tasks)
		return cr.tasks, cr.err
	}
	claimNow, lookAhead := true, true
	poll := c.cfg.MinPollInterval
	for {
		if w.claimCtx.Err() != nil {
			return
		}
		n := min(concurrency-len(slots), c.cfg.ClaimBatch)
		if n == 0 {
			select {
			case <-free:
				continue
			case <-w.claimCtx.Done():
				return
			}
		}
		if claimNow {
			tasks, err := settle(c.commit.claim(queue, n, true))
			if w.claimCtx.Err() != nil {
				return
			}
			if err != nil {
				c.cfg.Logger.Error("claim tasks", slog.String("queue", queue), slog.Any("err", err))
				c.emit(Event{Kind: WorkerFailed, Queue: queue, Err: err})
				select {
				case <-c.cfg.Clock.After(backoff):
				case <-w.claimCtx.Done():
					return
				}
				backoff = min(backoff*2, c.cfg.PollInterval)
				continue
			}
			backoff = 10 * time.Millisecond
			if len(tasks) > 0 {
				poll = c.cfg.MinPollInterval
			}
			// A full batch means there may be more; otherwise the queue is
			// drained and the loop waits with a standing claim.
			if claimNow = len(tasks) == n; claimNow {
				continue
			}
		}
		now := c.cfg.Clock.Now()
		wakeAt := now.Add(jitter(poll))
		if lookAhead {
			// Tasks due later (timers, retries, other processes' work).
			if next, ok, err := c.cfg.Store.NextReady(w.claimCtx, &store.NextReadyParams{Queues: []string{queue}, Handlers: c.claimHandlers()}); err == nil && ok {
				c.noteReady(queue, next)
			}
			lookAhead = false
		}
		if next, ok := c.localReady(queue); ok {
			if !next.After(c.cfg.Clock.Now()) {
				// Due already (the clock moved while this loop was busy):
				// claim now rather than sleep; a fake clock would not wake
				// the loop again.
				c.clearReady(queue)
				claimNow = true
				continue
			}
			if next.Before(wakeAt) {
				wakeAt = next
			}
		}
		cr := c.commit.claim(queue, n, false)
		select {
		case <-cr.done:
			tasks, _ := settle(cr)
			claimNow = len(tasks) == n
			continue
		case <-wake:
			claimNow = true
		case <-clock.Until(c.cfg.Clock, wakeAt):
			claimNow, lookAhead = true, true
			c.clearReady(queue)
			poll = min(poll*2, c.cfg.PollInterval)
		case <-w.claimCtx.Done():
		}
		if !c.commit.withdraw(cr) {
			_, _ = settle(cr)
		}
	}
}

// jitter spreads d over ±20%, so that idle workers of many processes do
// not poll in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// noteReady records that a task of queue becomes ready at t, and wakes the
// queue's loop if that is sooner than it planned to look.
func (c *Client) noteReady(queue string, t time.Time) {
	c.wakeMu.Lock()
	old, ok := c.nextReady[queue]
	if !ok || t.Before(old) {
		c.nextReady[queue] = t
	}
	c.wakeMu.Unlock()
	if !ok || t.Before(old) {
		c.wake(queue)
	}
}

func (c *Client) localReady(queue string) (time.Time, bool) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	t, ok := c.nextReady[queue]
	return t, ok
}

func (c *Client) clearReady(queue string) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	if t, ok := c.nextReady[queue]; ok && !t.After(c.cfg.Clock.Now()) {
		delete(c.nextReady, queue)
	}
}

// release gives claimed tasks back unstarted.
func (c *Client) release(tasks []*store.Task) {
	if len(tasks) == 0 {
		return
	}
	leases := make([]store.Lease, len(tasks))
	for i, t := range tasks {
		leases[i] = t.Lease()
	}
	if err := c.cfg.Store.ReleaseTasks(context.Background(), leases); err != nil {
		c.cfg.Logger.Warn("release tasks", slog.Any("err", err))
	}
}

// runTask executes one claimed task and commits its outcome. It returns a
// task of the same queue claimed by that commit for this slot, if any.
// Whatever its kind, the task's lease is held (heartbeated) while it runs,
// and its context ends when the lease is lost or cannot be confirmed in
// time, when its run is cancelled, or at shutdown.
func (c *Client) runTask(w *workers, t *store.Task) *store.Task {
	ctx, cancel := context.WithCancelCause(w.stepCtx)
	defer cancel(nil)
	h := c.leases.hold(t, cancel)
	defer c.leases.release(h)
	if isWorkflowTask(t.Kind) {
		return c.runWorkflowTask(ctx, w, h)
	}
	start := c.cfg.Clock.Now()
	c.emit(Event{Kind: TaskStarted, RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt, Queue: t.Queue, TaskID: t.ID})
	var ev engine.Event
	var cause error
	switch t.Kind {
	case store.TaskTimer:
		ev = engine.TimerFired{Step: t.Step}
	case store.TaskStep:
		ev, cause = c.runStep(ctx, h)
	default:
		ev = nil
		cause = fmt.Errorf("task kind %q is not handled by this version", t.Kind)
	}
	if ev == nil {
		// Shutdown or lost lease: the result is dropped; the task runs
		// again once released or once its lease expires.
		if errors.Is(cause, errShutdown) {
			_ = c.cfg.Store.ReleaseTasks(context.Background(), []store.Lease{t.Lease()})
		}
		c.emit(Event{Kind: TaskFailed, RunID: t.RunID, Workflow: t.Workflow, Step: t.Step, Index: t.Index, Queue: t.Queue, TaskID: t.ID, Err: cause})
		return nil
	}
	lease := t.Lease()
	handoff := t.Queue
	if w.claimCtx.Err() != nil {
		handoff = "" // stopping: claim nothing more
	}
	decide := c.decideWith(ev, c.cfg.Clock.Now(), false)
	var started *store.NewEvent
	if t.Kind == store.TaskStep {
		// Indexed as the engine's step entries: 0 for a step, the element
		// for a map step.
		se := c.startedEvent(t, start, t.Step, max(t.Index, 0))
		started = &se
	}
	details := c.leases.lastDetails(h)
	r, err := c.commit.submitHandoff(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(run *store.Run) (*store.Update, error) {
		u, err := decide(run)
		if err != nil || len(u.History) == 0 {
			return u, err // stale: nothing to tell
		}
		if started != nil {
			u.History = append([]store.NewEvent{*started}, u.History...)
		}
		// A retry of the step reads the details this attempt recorded.
		for i := range u.Tasks {
			if n := &u.Tasks[i]; n.Kind == store.TaskStep && n.Step == t.Step && n.Index == t.Index && len(details) > 0 {
				n.Details = details
			}
		}
		return u, nil
	}}, handoff)
	var next *store.Task
	if r != nil && len(r.claimed) > 0 {
		next = r.claimed[0]
		if w.claimCtx.Err() != nil {
			c.release(r.claimed)
			next = nil
		}
	}
	if err != nil {
		level := slog.LevelError
		if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrRunNotFound) {
			level = slog.LevelWarn
		}
		c.cfg.Logger.Log(context.Background(), level, "complete task", slog.Int64("task", t.ID), slog.String("run", t.RunID), slog.String("step", t.Step), slog.Any("err", err))
		c.emit(Event{Kind: TaskFailed, RunID: t.RunID, Workflow: t.Workflow, Step: t.Step, Index: t.Index, Queue: t.Queue, TaskID: t.ID, Err: err})
		return next
	}
	c.emit(Event{Kind: TaskCompleted, RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt, Queue: t.Queue, TaskID: t.ID, Duration: c.cfg.Clock.Now().Sub(start)})
	return next
}

// startedData is the Data of a step_started history entry: which worker
// ran the attempt, when it started, and how often the task was claimed (a
// claim after the first is a re-execution: an earlier claim's lease was
// lost, or its worker gave the task back at shutdown).
type startedData struct {
	Worker    string    `json:"worker"`
	StartedAt time.Time `json:"started_at"`
	Claim     int       `json:"claim"`
	// Reexecution: an earlier claim of this attempt ran (or began) and
	// lost its lease or was given back; its result, if any, was dropped.
	Reexecution bool `json:"reexecution,omitempty"`
}

// startedEvent is the step_started entry of a task's attempt, written with
// the attempt's outcome in the same commit.
func (c *Client) startedEvent(t *store.Task, at time.Time, step string, index int) store.NewEvent {
	return store.NewEvent{Kind: hephtype.EventStepStarted, Step: step, Index: index, Attempt: t.Attempt,
		Data: mustJSON(startedData{Worker: c.cfg.WorkerID, StartedAt: at.UTC(), Claim: t.Claims, Reexecution: t.Claims > 1})}
}

// runStep runs step code for a task and returns the engine event it led
// to, or nil and the reason the result must be dropped.
func (c *Client) runStep(ctx context.Context, h *heldTask) (engine.Event, error) {
	t := h.task
	f, err := c.flows.get(t.Workflow, t.Version)
	if err != nil {
		// Claims ask only for the registered versions (Task.Handler), so
		// only a task enqueued without a handler gets here.
		return c.stepFailure(t, fmt.Errorf("this worker cannot run step %q: %w", t.Step, err), false), nil
	}
	spec, _ := f.Step(t.Step)
	tctx, tcancel := context.WithTimeout(ctx, spec.Timeout)
	defer tcancel()
	start := c.cfg.Clock.Now()
	info := Event{RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt, Queue: t.Queue, TaskID: t.ID}
	info.Kind = StepStarted
	c.emit(info)
	out, err := f.Invoke(tctx, flow.Call{
		RunID: t.RunID, Step: t.Step, Index: t.Index, Attempt: t.Attempt,
		IdempotencyKey: fmt.Sprintf("%s/%s/%d", t.RunID, t.Step, t.Index),
		Input:          t.Payload, Item: t.Item,
		Details: t.Details,
		Heartbeat: func(details any) error {
			b, err := json.Marshal(details)
			if err != nil {
				return fmt.Errorf("heartbeat details of step %q do not encode as JSON: %w", t.Step, err)
			}
			if err := c.checkPayload(b, "heartbeat details of step "+strconv.Quote(t.Step)); err != nil {
				return err
			}
			c.leases.record(h, b)
			return nil
		},
	})
	info.Duration = c.cfg.Clock.Now().Sub(start)
	if cause := context.Cause(ctx); cause != nil {
		info.Kind, info.Err = StepFailed, cause
		c.emit(info)
		return nil, cause
	}
	if err == nil && tctx.Err() != nil {
		err = tctx.Err()
	}
	if err == nil {
		if perr := c.checkPayload(out.Output, "output of step "+strconv.Quote(t.Step)); perr != nil {
			err = flow.NonRetryable(perr)
		}
	}
	if err != nil {
		retry := spec.Retry.Retryable(err)
		if errors.Is(tctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("step %q timed out after %s: %w", t.Step, spec.Timeout, err)
		}
		info.Kind, info.Err = StepFailed, err
		c.emit(info)
		return c.stepFailure(t, err, retry), nil
	}
	info.Kind = StepCompleted
	c.emit(info)
	switch {
	case t.Index >= 0:
		if out.Wait {
			return c.stepFailure(t, fmt.Errorf("element %d of map step %q returned Wait", t.Index, t.Step), false), nil
		}
		return engine.ItemCompleted{Step: t.Step, Index: t.Index, Attempt: t.Attempt, Output: out.Output}, nil
	case out.Wait:
		return engine.StepWaiting{Step: t.Step, Attempt: t.Attempt}, nil
	}
	return engine.StepCompleted{Step: t.Step, Attempt: t.Attempt, Event: out.Event, Output: out.Output}, nil
}

func (c *Client) stepFailure(t *store.Task, err error, retryable bool) engine.Event {
	if t.Index >= 0 {
		return engine.ItemFailed{Step: t.Step, Index: t.Index, Attempt: t.Attempt, Error: err.Error(), Retryable: retryable}
	}
	return engine.StepFailed{Step: t.Step, Attempt: t.Attempt, Error: err.Error(), Retryable: retryable}
}

// cancelLocal cancels code running here whose task a commit cancelled.
func (c *Client) cancelLocal(runID string, m store.TaskMatch) {
	if m.Kind == store.TaskTimer {
		return
	}
	c.leases.cancelMatching(runID, m)
}

// retentionLoop prunes finished runs older than Config.Retention.
func (c *Client) retentionLoop(ctx context.Context) {
	for {
		n, err := c.Prune(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Error("retention", slog.Any("err", err))
		}
		if n > 0 {
			c.emit(Event{Kind: RetentionSwept, Count: n})
		}
		select {
		case <-c.cfg.Clock.After(c.cfg.RetentionInterval):
		case <-ctx.Done():
			return
		}
	}
}

// Prune deletes the finished runs older than Config.Retention now, and
// returns how many it deleted. It does nothing when Retention is 0.
func (c *Client) Prune(ctx context.Context) (int, error) {
	if c.cfg.Retention <= 0 {
		return 0, nil
	}
	total := 0
	for {
		n, err := c.cfg.Store.PruneRuns(ctx, &store.PruneParams{FinishedBefore: c.cfg.Clock.Now().Add(-c.cfg.Retention), Limit: 1000})
		total += n
		if err != nil {
			return total, fmt.Errorf("prune runs: %w", err)
		}
		if n < 1000 {
			return total, nil
		}
	}
}
