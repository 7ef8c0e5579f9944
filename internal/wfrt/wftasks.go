package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Execute runs a task of a code-first workflow run and commits its
// outcome: the worker pool's in-process executor of workflow tasks. ctx
// ends when the task's lease is lost, cannot be confirmed in time, or the
// worker shuts down.
func (c *Runtime) Execute(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
	t := h.Task()
	switch t.Kind {
	case store.TaskDecision:
		return c.runDecision(ctx, t, handoff)
	case store.TaskActivity:
		return c.runActivity(ctx, h, handoff)
	case store.TaskWorkflowTimer:
		lease := t.Lease()
		return c.deliver(ctx, &delivery{runID: t.RunID, workflow: t.Workflow, fence: &lease, handoff: handoff,
			events: []replay.Event{replay.TimerFired(t.Index)}, replay: true, pin: timerPin(t)})
	case store.TaskWorkflowOp:
		return nil, c.runOp(ctx, t)
	}
	return nil, fmt.Errorf("task kind %q is not a workflow task", t.Kind)
}

var errHeartbeatTimeout = errors.New("heartbeat timeout")

// runActivity runs one attempt of an activity. Its outcome goes to the
// workflow with the decision it causes (deliver), or, when the attempt
// failed and may be retried, becomes a new attempt after a backoff.
func (c *Runtime) runActivity(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
	t := h.Task()
	start := c.cfg.Clock.Now()
	var p activityPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return c.activityOutcome(&attempt{task: t, details: h.Details(), start: start}, p, handoff, nil, flow.NonRetryable(fmt.Errorf("activity %q: bad task payload: %w", t.Step, err)), flow.RetryPolicy{})
	}
	policy := p.policy()
	act, ok := c.reg.activity(t.Step)
	if !ok {
		// Claims ask only for registered activities (Task.Handler): only
		// a task enqueued without a handler gets here. Another process
		// serving the queue may have it: a retryable failure.
		return c.activityOutcome(&attempt{task: t, details: h.Details(), start: start}, p, handoff, nil, fmt.Errorf("activity %q is not registered in this process (worker %s)", t.Step, c.cfg.WorkerID), policy)
	}
	policy.NonRetryable = act.Options().RetryPolicy.NonRetryable

	timeout := p.timeout()
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
				due := time.Unix(0, lastBeat.Load()).Add(p.Heartbeat)
				if !due.After(c.cfg.Clock.Now()) {
					hbcancel(errHeartbeatTimeout)
					return
				}
				select {
				case <-clock.Until(c.cfg.Clock, due):
				case <-stopWatch:
					return
				}
			}
		})
	}
	info := &replay.ActivityInfo{
		RunID: t.RunID, Workflow: t.Workflow, Seq: t.Index, Name: t.Step, Attempt: t.Attempt,
		IdempotencyKey: fmt.Sprintf("%s/%d", t.RunID, t.Index),
		Details:        t.Details,
		Heartbeat: func(details any) {
			lastBeat.Store(c.cfg.Clock.Now().UnixNano())
			if details == nil {
				return
			}
			b, err := json.Marshal(details)
			if err != nil || limits.Payload(b, c.cfg.MaxPayloadSize, "heartbeat details") != nil {
				c.cfg.Logger.Warn("activity heartbeat details dropped: they do not encode as JSON or are too large",
					slog.String("run", t.RunID), slog.String("activity", t.Step), slog.Any("err", err))
				return
			}
			h.RecordDetails(b)
		},
	}
	ev := telemetry.OfTask(t)
	ev.Kind = telemetry.StepStarted
	c.cfg.Telemetry.Emit(ev)
	// The attempt's end (step.completed, step.failed) is emitted by the
	// committer once its outcome commits.
	info.Logger = h.Logs().Logger(c.cfg.Logger)
	var upserted map[string]store.Attr
	var upsertMu sync.Mutex
	info.Upsert = func(values map[string]any) error {
		decl, err := c.AttrDecl(ctx, t.Workflow)
		if err != nil {
			return err
		}
		m, err := store.AttrsOf(decl, values)
		if err != nil {
			return fmt.Errorf("activity %q of workflow %q: %w", t.Step, t.Workflow, err)
		}
		upsertMu.Lock()
		defer upsertMu.Unlock()
		merged := store.MergeAttrs(upserted, m)
		if err := store.CheckAttrs(merged); err != nil {
			return fmt.Errorf("activity %q: %w", t.Step, err)
		}
		upserted = merged
		return nil
	}
	out, err := act.Invoke(replay.WithActivityInfo(secrets.Observe(actx, h.Logs().AddSecret), info), p.Input)
	close(stopWatch)
	watch.Wait()
	// The attempt's log is stored before its outcome commits (or is
	// dropped), whatever becomes of it.
	h.FlushLogs(context.WithoutCancel(ctx))
	if cause := context.Cause(ctx); cause != nil {
		// Cancelled run, lost lease or shutdown: drop the result.
		return nil, cause
	}
	switch {
	case errors.Is(context.Cause(actx), errHeartbeatTimeout):
		err = fmt.Errorf("activity %q sent no heartbeat for %s", t.Step, p.Heartbeat)
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("activity %q timed out after %s: %w", t.Step, timeout, context.DeadlineExceeded)
	}
	if err == nil {
		if perr := limits.Payload(out, c.cfg.MaxPayloadSize, "output of activity "+strconv.Quote(t.Step)); perr != nil {
			err = flow.NonRetryable(perr)
		}
	}
	upsertMu.Lock()
	attrs := upserted
	upsertMu.Unlock()
	return c.activityOutcome(&attempt{task: t, details: h.Details(), start: start, attrs: attrs}, p, handoff, out, err, policy)
}

// policy is the retry policy of the activity, as its command recorded it
// (without NonRetryable, a function: the registered activity's).
func (p *activityPayload) policy() flow.RetryPolicy {
	return flow.RetryPolicy{MaxAttempts: p.MaxAttempts, InitialBackoff: p.Initial, MaxBackoff: p.MaxBackoff, Multiplier: p.Multiplier, Jitter: p.Jitter}
}

// closes reports whether the activity's schedule-to-close timeout has
// passed at (an attempt that would start then could not finish in time).
func (p *activityPayload) closes(t *store.Task, at time.Time) bool {
	if p.ScheduleToClose <= 0 {
		return false
	}
	from := p.ScheduledAt
	if from.IsZero() {
		from = t.CreatedAt // the first attempt
	}
	return !at.Before(from.Add(p.ScheduleToClose))
}

// attempt is an attempt of an activity whose outcome is committed: run in
// this process, or by a worker outside it (remote.go).
type attempt struct {
	task *store.Task
	// details are the attempt's last heartbeat details, which a retry
	// reads.
	details json.RawMessage
	// start is when the attempt started; worker who ran it ("": this
	// process).
	start  time.Time
	worker string
	// attrs are the search attributes the attempt upserted: written with
	// its result, not with a failure.
	attrs map[string]store.Attr
}

// activityOutcome commits the outcome of an activity attempt, after the
// attempt's step_started entry: the one commit of an activity's outcome,
// whoever ran it.
func (c *Runtime) activityOutcome(a *attempt, p activityPayload, handoff string, out json.RawMessage, err error, policy flow.RetryPolicy) ([]*store.Task, error) {
	t := a.task
	lease := t.Lease()
	by := a.worker
	if by == "" {
		by = c.cfg.WorkerID
	}
	started := fromStoredNew(worker.Started(by, t, a.start, "", t.Index))
	started.Name = t.Step
	d := &delivery{runID: t.RunID, workflow: t.Workflow, fence: &lease, handoff: handoff, replay: true, pin: p.Build}
	if err == nil {
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		done := replay.ActivityCompleted(t.Index, t.Step, out)
		done.Attempt = t.Attempt
		d.events = []replay.Event{started, done}
		d.attrs = a.attrs
		return c.deliver(commit.ForTask(c.cfg.Tracer.WithTask(context.Background(), t), t), d)
	}
	attempts := policy.MaxAttempts
	if attempts == 0 {
		attempts = flow.DefaultRetryPolicy.MaxAttempts
	}
	var backoff time.Duration
	if t.Attempt < attempts && policy.Retryable(err) {
		backoff = policy.Backoff(t.Attempt+1, rand.Float64())
		if !p.closes(t, c.cfg.Clock.Now().Add(backoff)) {
			return nil, c.retryActivity(a, started, err, policy, backoff, p)
		}
	}
	if p.closes(t, c.cfg.Clock.Now().Add(backoff)) {
		err = workflow.NewApplicationError(workflow.TimeoutType, fmt.Sprintf("schedule-to-close timeout of %v passed (last attempt: %v)", p.ScheduleToClose, err), nil, true)
	}
	failed := replay.ActivityFailed(t.Index, t.Step, t.Attempt, err.Error())
	if app := workflow.ApplicationErrorOf(err, nil); app != nil {
		failed.Data = app.FailureData() // its type and details reach the workflow
	}
	d.events = []replay.Event{started, failed}
	return c.deliver(commit.ForTask(c.cfg.Tracer.WithTask(context.Background(), t), t), d)
}

// fromStoredNew is fromStored for an entry not yet stored.
func fromStoredNew(e store.NewEvent) replay.Event {
	return fromStored(store.Event{Kind: e.Kind, Step: e.Step, Index: e.Index, Attempt: e.Attempt, Name: e.Name, Data: e.Data, Error: e.Error})
}

// retryActivity replaces a failed attempt by the next one, after the
// policy's backoff, and records the failure (step_retrying, which replay
// skips, with the backoff chosen) after the attempt's step_started. The
// next attempt carries the heartbeat details this one recorded last. A
// cached instance of the run is told of the events, so that the next
// decision need not read the history.
func (c *Runtime) retryActivity(a *attempt, started replay.Event, cause error, policy flow.RetryPolicy, backoff time.Duration, p activityPayload) error {
	t := a.task
	now := c.cfg.Clock.Now()
	ready := now.Add(backoff)
	payload := t.Payload
	if p.ScheduleToClose > 0 && p.ScheduledAt.IsZero() {
		p.ScheduledAt = t.CreatedAt // the first attempt's: when it was scheduled
		payload = worker.MustJSON(p)
	}
	ev := replay.Event{Kind: hephtype.EventStepRetrying, ID: t.Index, Name: t.Step, Attempt: t.Attempt + 1, Error: cause.Error(),
		Data: worker.MustJSON(worker.RetryData{Backoff: backoff, ReadyAt: ready.UTC()})}
	next := store.NewTask{
		Queue: t.Queue, Kind: store.TaskActivity, Step: t.Step, Index: t.Index, Attempt: t.Attempt + 1,
		Payload: payload, Priority: t.Priority, ReadyAt: ready, Handler: store.ActivityHandler(t.Step),
		Details: a.details,
	}
	e := c.sticky.lock(t.RunID)
	defer c.sticky.unlock(e)
	base := int64(-1)
	if e.inst != nil {
		base = int64(e.inst.Len())
	}
	var seen atomic.Int64
	lease := t.Lease()
	_, err := c.cfg.Committer.Submit(commit.ForTask(context.Background(), t), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(run *store.Run) (*store.Update, error) {
		seen.Store(run.Seq)
		if run.Status.Terminal() {
			return &store.Update{}, nil
		}
		return &store.Update{History: []store.NewEvent{toStored(started), toStored(ev)}, Tasks: []store.NewTask{next}}, nil
	}})
	if e.inst != nil {
		if err == nil && seen.Load() == base {
			if rerr := e.inst.Replay([]replay.Event{started, ev}); rerr != nil {
				e.drop()
			}
		} else {
			e.drop()
		}
	}
	return err
}

// runOp carries out a workflow operation task. Each is exactly once: the
// change it makes is fenced by the task's lease (creating a child or the
// run that continues this one, reporting to the parent), or is idempotent
// and followed by the task's fenced completion (cancelling children). A
// lost lease only means that someone else does the work, or did it: it
// never leads to a compensating action.
func (c *Runtime) runOp(ctx context.Context, t *store.Task) error {
	var err error
	done := false // the operation's own change deleted the task
	switch t.Step {
	case opStartChild:
		done, err = c.opStartChild(ctx, t)
	case opCancelChild:
		err = c.cancelChain(ctx, childID(t.RunID, t.Index), "the parent run ended")
	case opReportParent:
		done, err = c.opReportParent(ctx, t)
	case opContinue:
		done, err = c.opContinue(ctx, t)
	case opCancelChildren:
		err = c.opCancelChildren(ctx, t)
	default:
		err = fmt.Errorf("unknown workflow operation %q", t.Step)
	}
	lease := t.Lease()
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		// Cancelled with its run, done by another worker after this one's
		// lease lapsed, or done by this very attempt (a commit whose
		// outcome was lost, then retried): nothing to do.
		c.cfg.Logger.Debug("workflow operation: lease lost", slog.String("op", t.Step), slog.String("run", t.RunID), slog.Any("err", err))
		return nil
	case err != nil:
		if ctx.Err() != nil {
			return err // the lease is going: another worker takes over
		}
		// Try again after a backoff.
		ready := c.cfg.Clock.Now().Add(min(time.Second<<min(t.Attempt, 8), time.Minute))
		_, cerr := c.cfg.Committer.Submit(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(*store.Run) (*store.Update, error) {
			n := opTask(t.Queue, t.Step, t.Index, nil)
			n.Payload, n.Attempt, n.ReadyAt = t.Payload, t.Attempt+1, ready
			return &store.Update{Tasks: []store.NewTask{n}}, nil
		}})
		if errors.Is(cerr, store.ErrLeaseLost) {
			cerr = nil
		}
		return errors.Join(err, cerr)
	case done:
		return nil
	}
	_, err = c.cfg.Committer.Submit(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{}, nil
	}})
	if errors.Is(err, store.ErrLeaseLost) {
		return nil // the work is idempotent: whoever holds the task now finishes it
	}
	return err
}

// opStartChild creates the child run, fenced by the task: the child exists
// if and only if the task was completed by its creation, so a parent that
// ended meanwhile (its tasks cancelled) gets no child, and a child is
// never created twice. done tells that the creation deleted the task.
func (c *Runtime) opStartChild(ctx context.Context, t *store.Task) (done bool, err error) {
	var p childPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return false, fmt.Errorf("start child: bad payload: %w", err)
	}
	id := childID(t.RunID, t.Index)
	lease := t.Lease()
	// A child's concurrency key is its own workflow's (computed from its
	// input when the workflow declares one): it does not inherit its
	// parent's.
	ckey, err := c.concurrencyKey(p.Workflow, p.Input)
	if err != nil {
		return false, fmt.Errorf("start child: %w", err)
	}
	// The child's root span joins the parent's trace, under this task's.
	spec := &runSpec{id: id, workflow: p.Workflow, input: p.Input, parent: t.RunID, parentSeq: t.Index, fence: &lease, concurrencyKey: ckey}
	spec.pin, spec.build = c.childBuild(ctx, p.Workflow, p.Build)
	_, err = c.createWorkflowRun(tracing.ChildRun(ctx), spec)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrRunExists):
		return false, nil // created before the task had a fence: complete it
	case errors.Is(err, store.ErrLeaseLost):
		return false, err
	}
	return false, fmt.Errorf("start child %q: %w", p.Workflow, err)
}

// opReportParent tells the parent how its child ended, in a change of the
// parent fenced by the child's task and keyed by the child: reported once.
func (c *Runtime) opReportParent(ctx context.Context, t *store.Task) (done bool, err error) {
	var p reportPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return false, fmt.Errorf("report to parent: bad payload: %w", err)
	}
	parent, err := c.cfg.Store.GetRun(ctx, p.Parent)
	if errors.Is(err, store.ErrRunNotFound) {
		return false, nil // pruned
	}
	if err != nil {
		return false, err
	}
	ev := replay.ChildCompleted(p.Seq, p.Workflow, p.Output)
	if p.Status != hephtype.StatusCompleted {
		msg := p.Error
		if p.Status == hephtype.StatusCancelled {
			msg = "cancelled: " + msg
		}
		ev = replay.ChildFailed(p.Seq, p.Workflow, msg)
	}
	lease := t.Lease()
	_, err = c.deliver(ctx, &delivery{runID: parent.ID, workflow: parent.Workflow, fence: &lease, key: "child:" + strconv.Itoa(p.Seq),
		events: []replay.Event{ev}, replay: true, pin: pinOf(parent)})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrRunNotFound), errors.Is(err, store.ErrDuplicateChange):
		return false, nil // the parent is gone, or knows already: complete the task
	}
	return false, err
}

// opContinue creates the run that continues this one, fenced by the task.
func (c *Runtime) opContinue(ctx context.Context, t *store.Task) (done bool, err error) {
	old, err := c.cfg.Store.GetRun(ctx, t.RunID)
	if err != nil {
		return false, err
	}
	st, err := loadWfState(old)
	if err != nil {
		return false, err
	}
	lease := t.Lease()
	spec := &runSpec{
		id: continuedID(old.ID), workflow: old.Workflow, input: old.Output, businessID: old.BusinessID, scope: old.KeyScope,
		tags: old.Tags, metadata: old.Metadata, parent: st.Parent, parentSeq: st.ParentSeq, fence: &lease,
		concurrencyKey: old.ConcurrencyKey, // the same work goes on under the same key
		deadline:       old.Deadline,       // and within the same time limit
		attrs:          old.SearchAttributes,
		// A pinned run continues on its build (the one that decided to
		// continue); one that auto-upgrades goes on doing so.
		pin: st.Build, build: old.BuildID,
	}
	_, err = c.createWorkflowRun(ctx, spec)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrLeaseLost):
		return false, err
	case errors.Is(err, store.ErrRunExists):
		return false, nil
	case errors.Is(err, store.ErrDuplicateRun):
		// Another run took the workflow id meanwhile: the chain ends.
		c.cfg.Logger.Warn("continue as new: the workflow id is taken", slog.String("run", old.ID), slog.Any("err", err))
		return false, nil
	}
	return false, fmt.Errorf("continue run %s as new: %w", old.ID, err)
}

func (c *Runtime) opCancelChildren(ctx context.Context, t *store.Task) error {
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
func (c *Runtime) cancelChain(ctx context.Context, runID, reason string) error {
	for successor := false; ; successor = true {
		err := c.cfg.CancelRun(ctx, runID, reason)
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
			_, werr := c.WaitForRun(wctx, runID)
			cancel()
			if werr != nil {
				return fmt.Errorf("cancel the run that continues as new: %w", werr)
			}
		case errors.Is(err, engine.ErrRunFinished):
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
