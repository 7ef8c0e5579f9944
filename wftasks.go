package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/store"
)

// runWorkflowTask executes a task of a code-first workflow run and commits
// its outcome. Like runTask, it returns a task of the same queue claimed by
// that commit for this slot, if any.
func (c *Client) runWorkflowTask(w *workers, t *store.Task) *store.Task {
	start := c.cfg.Clock.Now()
	info := Event{RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt, Queue: t.Queue, TaskID: t.ID}
	info.Kind = TaskStarted
	c.emit(info)
	handoff := t.Queue
	if w.claimCtx.Err() != nil {
		handoff = "" // stopping: claim nothing more
	}
	ctx := context.Background()
	var claimed []*store.Task
	var err error
	switch t.Kind {
	case store.TaskDecision:
		claimed, err = c.runDecision(ctx, t, handoff)
	case taskActivity:
		claimed, err = c.runActivity(w, t, handoff)
	case taskWorkflowTimer:
		lease := t.Lease()
		claimed, err = c.deliver(ctx, &delivery{runID: t.RunID, workflow: t.Workflow, fence: &lease, handoff: handoff,
			events: []replay.Event{replay.TimerFired(t.Index)}, replay: true})
	case taskWorkflowOp:
		err = c.runOp(ctx, t)
	}
	var next *store.Task
	for _, ct := range claimed {
		if next == nil && ct.Queue == t.Queue && w.claimCtx.Err() == nil {
			next = ct
		} else {
			c.release([]*store.Task{ct})
		}
	}
	if err != nil {
		if errors.Is(err, errShutdown) {
			_ = c.cfg.Store.ReleaseTasks(context.Background(), []store.Lease{t.Lease()})
		}
		level := slog.LevelWarn
		if !errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, store.ErrRunNotFound) && !errors.Is(err, ErrRunFinished) && !errors.Is(err, errShutdown) && !errors.Is(err, errRunCancelled) {
			level = slog.LevelError
		}
		c.cfg.Logger.Log(ctx, level, "workflow task", slog.String("kind", string(t.Kind)), slog.Int64("task", t.ID), slog.String("run", t.RunID), slog.String("step", t.Step), slog.Any("err", err))
		info.Kind, info.Err = TaskFailed, err
		c.emit(info)
		return next
	}
	info.Kind, info.Duration = TaskCompleted, c.cfg.Clock.Now().Sub(start)
	c.emit(info)
	return next
}

var errHeartbeatTimeout = errors.New("heartbeat timeout")

// runActivity runs one attempt of an activity. Its outcome goes to the
// workflow with the decision it causes (deliver), or, when the attempt
// failed and may be retried, becomes a new attempt after a backoff.
func (c *Client) runActivity(w *workers, t *store.Task, handoff string) ([]*store.Task, error) {
	var p activityPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return c.activityOutcome(t, p, handoff, nil, flow.NonRetryable(fmt.Errorf("activity %q: bad task payload: %w", t.Step, err)), flow.RetryPolicy{})
	}
	policy := flow.RetryPolicy{MaxAttempts: p.MaxAttempts, InitialBackoff: p.Initial, MaxBackoff: p.MaxBackoff, Multiplier: p.Multiplier, Jitter: p.Jitter}
	act, ok := c.wf.reg.activity(t.Step)
	if !ok {
		// Another process serving the queue may have it: a retryable failure.
		return c.activityOutcome(t, p, handoff, nil, fmt.Errorf("activity %q is not registered in this process (worker %s)", t.Step, c.cfg.WorkerID), policy)
	}
	policy.NonRetryable = act.Options().RetryPolicy.NonRetryable

	ctx, cancel := context.WithCancelCause(w.stepCtx)
	defer cancel(nil)
	key := taskKey(t.RunID, t.Step, t.Index)
	c.runMu.Lock()
	c.running[key] = &runningTask{task: t, cancel: cancel}
	c.runMu.Unlock()
	defer func() {
		c.runMu.Lock()
		if rt := c.running[key]; rt != nil && rt.task == t {
			delete(c.running, key)
		}
		c.runMu.Unlock()
	}()
	timeout := p.StartToClose
	if timeout <= 0 {
		timeout = flow.DefaultTimeout
	}
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	defer tcancel()
	actx, hbcancel := context.WithCancelCause(tctx)
	defer hbcancel(nil)
	var lastBeat atomic.Int64
	lastBeat.Store(c.cfg.Clock.Now().UnixNano())
	var watch sync.WaitGroup
	stopWatch := make(chan struct{})
	if p.Heartbeat > 0 {
		watch.Go(func() {
			for {
				wait := time.Duration(lastBeat.Load()+int64(p.Heartbeat)) - time.Duration(c.cfg.Clock.Now().UnixNano())
				if wait <= 0 {
					hbcancel(errHeartbeatTimeout)
					return
				}
				select {
				case <-c.cfg.Clock.After(wait):
				case <-stopWatch:
					return
				}
			}
		})
	}
	info := &replay.ActivityInfo{
		RunID: t.RunID, Workflow: t.Workflow, Seq: t.Index, Name: t.Step, Attempt: t.Attempt,
		IdempotencyKey: fmt.Sprintf("%s/%d", t.RunID, t.Index),
		Heartbeat:      func(any) { lastBeat.Store(c.cfg.Clock.Now().UnixNano()) },
	}
	ev := Event{RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt, Queue: t.Queue, TaskID: t.ID}
	ev.Kind = StepStarted
	c.emit(ev)
	begin := c.cfg.Clock.Now()
	out, err := act.Invoke(replay.WithActivityInfo(actx, info), p.Input)
	close(stopWatch)
	watch.Wait()
	ev.Duration = c.cfg.Clock.Now().Sub(begin)
	if cause := context.Cause(ctx); cause != nil {
		// Cancelled run, lost lease or shutdown: drop the result.
		ev.Kind, ev.Err = StepFailed, cause
		c.emit(ev)
		return nil, cause
	}
	switch {
	case errors.Is(context.Cause(actx), errHeartbeatTimeout):
		err = fmt.Errorf("activity %q sent no heartbeat for %s", t.Step, p.Heartbeat)
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("activity %q timed out after %s: %w", t.Step, timeout, context.DeadlineExceeded)
	}
	if err != nil {
		ev.Kind, ev.Err = StepFailed, err
	} else {
		ev.Kind = StepCompleted
	}
	c.emit(ev)
	return c.activityOutcome(t, p, handoff, out, err, policy)
}

// activityOutcome commits the outcome of an activity attempt.
func (c *Client) activityOutcome(t *store.Task, p activityPayload, handoff string, out json.RawMessage, err error, policy flow.RetryPolicy) ([]*store.Task, error) {
	lease := t.Lease()
	d := &delivery{runID: t.RunID, workflow: t.Workflow, fence: &lease, handoff: handoff, replay: true}
	if err == nil {
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		d.events = []replay.Event{replay.ActivityCompleted(t.Index, t.Step, out)}
		return c.deliver(context.Background(), d)
	}
	attempts := policy.MaxAttempts
	if attempts == 0 {
		attempts = flow.DefaultRetryPolicy.MaxAttempts
	}
	if t.Attempt < attempts && policy.Retryable(err) {
		return nil, c.retryActivity(t, p, err, policy)
	}
	d.events = []replay.Event{replay.ActivityFailed(t.Index, t.Step, t.Attempt, err.Error())}
	return c.deliver(context.Background(), d)
}

// retryActivity replaces a failed attempt by the next one, after the
// policy's backoff, and records the failure (step_retrying, which replay
// skips). A cached instance of the run is told of the event, so that the
// next decision need not read the history.
func (c *Client) retryActivity(t *store.Task, p activityPayload, cause error, policy flow.RetryPolicy) error {
	now := c.cfg.Clock.Now()
	ev := replay.Event{Kind: hephtype.EventStepRetrying, ID: t.Index, Name: t.Step, Attempt: t.Attempt + 1, Error: cause.Error()}
	next := store.NewTask{
		Queue: t.Queue, Kind: taskActivity, Step: t.Step, Index: t.Index, Attempt: t.Attempt + 1,
		Payload: t.Payload, Priority: t.Priority, ReadyAt: now.Add(policy.Backoff(t.Attempt+1, rand.Float64())),
	}
	e := c.wf.sticky.lock(t.RunID)
	defer c.wf.sticky.unlock(e)
	base := int64(-1)
	if e.inst != nil {
		base = int64(e.inst.Len())
	}
	var seen atomic.Int64
	lease := t.Lease()
	_, err := c.commit.submit(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(run *store.Run) (*store.Update, error) {
		seen.Store(run.Seq)
		if run.Status.Terminal() {
			return &store.Update{}, nil
		}
		return &store.Update{History: []store.NewEvent{toStored(ev)}, Tasks: []store.NewTask{next}}, nil
	}})
	if e.inst != nil {
		if err == nil && seen.Load() == base {
			if rerr := e.inst.Replay([]replay.Event{ev}); rerr != nil {
				e.drop()
			}
		} else {
			e.drop()
		}
	}
	return err
}

// runOp carries out a workflow operation task, then deletes it. Operations
// are idempotent: a task that runs again (its worker died) does no harm.
func (c *Client) runOp(ctx context.Context, t *store.Task) error {
	var err error
	switch t.Step {
	case opStartChild:
		err = c.opStartChild(ctx, t)
	case opCancelChild:
		err = c.cancelChain(ctx, childID(t.RunID, t.Index), "the parent run ended")
	case opReportParent:
		err = c.opReportParent(ctx, t)
	case opContinue:
		err = c.opContinue(ctx, t)
	case opCancelChildren:
		err = c.opCancelChildren(ctx, t)
	default:
		err = fmt.Errorf("unknown workflow operation %q", t.Step)
	}
	lease := t.Lease()
	if err != nil {
		// Try again after a backoff.
		ready := c.cfg.Clock.Now().Add(min(time.Second<<min(t.Attempt, 8), time.Minute))
		_, cerr := c.commit.submit(ctx, store.Change{RunID: t.RunID, Fence: &lease, Decide: func(*store.Run) (*store.Update, error) {
			n := opTask(t.Queue, t.Step, t.Index, nil)
			n.Payload, n.Attempt, n.ReadyAt = t.Payload, t.Attempt+1, ready
			return &store.Update{Tasks: []store.NewTask{n}}, nil
		}})
		return errors.Join(err, cerr)
	}
	_, err = c.commit.submit(ctx, store.Change{RunID: t.RunID, Fence: &lease, Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{}, nil
	}})
	if errors.Is(err, store.ErrLeaseLost) && t.Step == opStartChild {
		// The parent ended (and cancelled this task) while the child was
		// being created: the child must not outlive it.
		return c.cancelChain(ctx, childID(t.RunID, t.Index), "the parent run ended")
	}
	return err
}

func (c *Client) opStartChild(ctx context.Context, t *store.Task) error {
	var p childPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return fmt.Errorf("start child: bad payload: %w", err)
	}
	id := childID(t.RunID, t.Index)
	_, err := c.createWorkflowRun(ctx, &runSpec{id: id, workflow: p.Workflow, input: p.Input, parent: t.RunID, parentSeq: t.Index})
	if err != nil {
		if _, gerr := c.cfg.Store.GetRun(ctx, id); gerr == nil {
			return nil // created by an earlier attempt
		}
		return fmt.Errorf("start child %q: %w", p.Workflow, err)
	}
	return nil
}

func (c *Client) opReportParent(ctx context.Context, t *store.Task) error {
	var p reportPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return fmt.Errorf("report to parent: bad payload: %w", err)
	}
	parent, err := c.cfg.Store.GetRun(ctx, p.Parent)
	if errors.Is(err, store.ErrRunNotFound) {
		return nil // pruned
	}
	if err != nil {
		return err
	}
	ev := replay.ChildCompleted(p.Seq, p.Workflow, p.Output)
	if p.Status != hephtype.StatusCompleted {
		msg := p.Error
		if p.Status == hephtype.StatusCancelled {
			msg = "cancelled: " + msg
		}
		ev = replay.ChildFailed(p.Seq, p.Workflow, msg)
	}
	_, err = c.deliver(ctx, &delivery{runID: parent.ID, workflow: parent.Workflow, events: []replay.Event{ev}, replay: true})
	if errors.Is(err, store.ErrRunNotFound) {
		return nil
	}
	return err
}

func (c *Client) opContinue(ctx context.Context, t *store.Task) error {
	old, err := c.cfg.Store.GetRun(ctx, t.RunID)
	if err != nil {
		return err
	}
	st, err := loadWfState(old)
	if err != nil {
		return err
	}
	id := continuedID(old.ID)
	spec := &runSpec{
		id: id, workflow: old.Workflow, input: old.Output, businessID: old.BusinessID, scope: old.KeyScope,
		tags: old.Tags, metadata: old.Metadata, parent: st.Parent, parentSeq: st.ParentSeq,
	}
	if _, err := c.createWorkflowRun(ctx, spec); err != nil {
		if _, gerr := c.cfg.Store.GetRun(ctx, id); gerr == nil {
			return nil
		}
		if errors.Is(err, ErrDuplicateRun) {
			// Another run took the workflow id meanwhile: the chain ends.
			c.cfg.Logger.Warn("continue as new: the workflow id is taken", slog.String("run", old.ID), slog.Any("err", err))
			return nil
		}
		return fmt.Errorf("continue run %s as new: %w", old.ID, err)
	}
	return nil
}

func (c *Client) opCancelChildren(ctx context.Context, t *store.Task) error {
	h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: t.RunID})
	if err != nil {
		return err
	}
	open := map[int]bool{}
	for _, e := range h {
		switch e.Kind {
		case hephtype.EventChildStarted:
			open[e.Index] = true
		case hephtype.EventChildCompleted, hephtype.EventChildFailed, hephtype.EventChildCancelled:
			delete(open, e.Index)
		}
	}
	var errs []error
	for seq := range open {
		errs = append(errs, c.cancelChain(ctx, childID(t.RunID, seq), "the parent run was cancelled"))
	}
	return errors.Join(errs...)
}

// cancelChain cancels a workflow run, or the run that carries it on if it
// continued as new. A run that does not exist or has ended is left alone.
func (c *Client) cancelChain(ctx context.Context, runID, reason string) error {
	for successor := false; ; successor = true {
		err := c.CancelRun(ctx, runID, reason)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, store.ErrRunNotFound):
			if !successor {
				return nil
			}
			// The run that continues a cancelled one is being created:
			// wait for it (its creation is a task of its own).
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, werr := c.waitForRun(wctx, runID)
			cancel()
			if werr != nil {
				return fmt.Errorf("cancel the run that continues as new: %w", werr)
			}
		case errors.Is(err, ErrRunFinished):
			r, gerr := c.cfg.Store.GetRun(ctx, runID)
			if gerr != nil || r.Status != hephtype.StatusContinued {
				return nil
			}
			runID = continuedID(runID)
		default:
			return err
		}
	}
}
