package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Remote work: the steps of flows declared with flow.Remote (and
// flow.RemoteMap), the actions of documents that are remote
// (flowdoc.RemoteAction), and the activities of code-first workflows, run
// by workers outside this process: the server's HTTP workers, in any
// language. A worker claims tasks by the names it handles (ClaimRemote),
// heartbeats while it works (HeartbeatRemote), and completes or fails
// each (CompleteRemote, FailRemote) with the task's token.
//
// Everything goes through the task seam that in-process workers use:
// claims are the store's, strict (only the listed handlers; never a
// workflow timer or an operation) and within the queues' flow control;
// every outcome is the same fenced change as an in-process step's or
// activity's, so retries, timeouts, the decision that follows and
// exactly-once hold alike. A token is fenced: once its lease is lost (it
// expired and another worker claimed the task, or the run was cancelled),
// completing with it writes nothing and fails with ErrTaskLost.

// Errors of remote work.
var (
	// ErrTaskLost: the task's lease is no longer held by the token's
	// claim (the lease expired and another worker claimed the task, the
	// run was cancelled or ended, or the attempt was completed already).
	// Nothing was written; the worker drops its result.
	ErrTaskLost = errors.New("task lost: the token's claim no longer holds the task")
	// ErrInvalidToken: the token is not one that ClaimRemote hands out.
	ErrInvalidToken = errors.New("invalid task token")
)

// Limits of a remote claim.
const (
	// MaxRemoteClaim bounds RemoteClaim.Max.
	MaxRemoteClaim = 100
)

// RemoteClaim asks for tasks for a worker outside the process.
type RemoteClaim struct {
	// WorkerID names the worker: it holds the leases and appears in the
	// worker registry (ListWorkers) and in the history's step_started
	// entries. Required; it must differ from this client's WorkerID.
	WorkerID string
	// Actions are the remote steps and document actions the worker runs
	// (tasks of handler "action:<name>").
	Actions []string
	// Activities are the workflow activities the worker runs (tasks of
	// handler "activity:<name>"). At least one action or activity is
	// required.
	Activities []string
	// Queues to claim from. Defaults to ["default"].
	Queues []string
	// Max bounds the tasks claimed. Defaults to 1; at most MaxRemoteClaim.
	Max int
	// Lease is how long a task stays leased without a heartbeat: the
	// heartbeat timeout of the worker. Defaults to Config.LeaseDuration.
	Lease time.Duration
	// Wait, when positive, long-polls: ClaimRemote waits up to Wait for a
	// task when none is ready. Defaults to 0: answer at once.
	Wait time.Duration
}

// RemoteTask is a task handed to a worker outside the process.
type RemoteTask struct {
	// Token identifies the claim: pass it to HeartbeatRemote,
	// CompleteRemote and FailRemote. Opaque (base64url).
	Token string
	RunID string
	// Kind is "step" (a remote step or document action; for a map step,
	// one element) or "activity".
	Kind string
	// Name is the action or activity: what the worker registered.
	Name string
	// Workflow and Version name the flow, document or workflow of the run.
	Workflow string
	Version  int
	// Step is the step (the activity, for an activity); Index the element
	// of a map step (-1 otherwise), or an activity's sequence number in
	// its workflow.
	Step    string
	Index   int
	Attempt int
	// Input is what the worker works on: a document action's resolved
	// arguments, a remote step's input (flow.RemotePrepare), a map
	// element, or an activity's input.
	Input json.RawMessage
	// Details are the heartbeat details recorded last for the task (by an
	// earlier attempt, or a worker that lost its lease), to resume from.
	Details json.RawMessage
	// Deadline is when the attempt must be done: a completion after it is
	// recorded as a timeout failure.
	Deadline time.Time
	// LeaseUntil is when the lease ends unless a heartbeat extends it;
	// Lease is how far each heartbeat extends it.
	LeaseUntil time.Time
	Lease      time.Duration
	Queue      string
	// TraceParent is the W3C traceparent of the run's root span ("" when
	// the run is not traced): a worker parents its own spans with it to
	// put them in the run's trace. The attempt's span is made when its
	// outcome commits (docs/observability.md#traces).
	TraceParent string
}

// The kinds of RemoteTask.
const (
	RemoteStep     = "step"
	RemoteActivity = "activity"
)

// ClaimRemote leases up to p.Max ready tasks that the worker p names can
// run, and returns them; with p.Wait it waits for some until p.Wait has
// passed (an empty list then) or ctx ends. It records the worker in the
// worker registry, live until its lease and wait are over. A task that
// cannot be handed out (its flow does not load here, or the step's
// RemotePrepare fails, which fails the attempt) is left out.
func (c *Client) ClaimRemote(ctx context.Context, p *RemoteClaim) ([]*RemoteTask, error) {
	cp, err := c.remoteClaim(p)
	if err != nil {
		return nil, fmt.Errorf("claim remote tasks: %w", err)
	}
	start := c.cfg.Clock.Now()
	if err := c.registerRemote(ctx, cp, start); err != nil {
		return nil, fmt.Errorf("claim remote tasks: %w", err)
	}
	deadline := start.Add(p.Wait)
	poll := c.cfg.MinPollInterval
	for {
		var w *remoteWaiter
		if p.Wait > 0 {
			// Before the claim: a commit between the claim and the wait
			// still wakes it.
			w = c.remote.subscribe(cp.queues)
		}
		tasks, err := c.claimRemoteOnce(ctx, cp)
		if err != nil || len(tasks) > 0 || w == nil {
			c.remote.unsubscribe(w)
			return tasks, err
		}
		now := c.cfg.Clock.Now()
		if !now.Before(deadline) {
			c.remote.unsubscribe(w)
			return []*RemoteTask{}, nil
		}
		wakeAt := now.Add(worker.Jitter(poll))
		if deadline.Before(wakeAt) {
			wakeAt = deadline
		}
		// Retries and timers due before then.
		if next, ok, err := c.cfg.Store.NextReady(ctx, &store.NextReadyParams{Queues: cp.queues, Handlers: cp.handlers}); err == nil && ok &&
			next.After(now) && next.Before(wakeAt) {
			wakeAt = next
		}
		select {
		case <-w.ch:
		case <-clock.Until(c.cfg.Clock, wakeAt):
			poll = min(poll*2, c.cfg.PollInterval)
		case <-ctx.Done():
			c.remote.unsubscribe(w)
			return nil, fmt.Errorf("claim remote tasks: %w", ctx.Err())
		}
		c.remote.unsubscribe(w)
	}
}

// remoteClaimParams is a checked RemoteClaim.
type remoteClaimParams struct {
	*RemoteClaim
	queues   []string
	handlers []string
	max      int
	lease    time.Duration
}

func (c *Client) remoteClaim(p *RemoteClaim) (*remoteClaimParams, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil *RemoteClaim", ErrInvalidInput)
	}
	cp := &remoteClaimParams{RemoteClaim: p, queues: p.Queues, max: p.Max, lease: p.Lease}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case p.WorkerID == "":
		bad("WorkerID is empty")
	case len(p.WorkerID) > hephtype.MaxNameLen:
		bad("WorkerID is %d bytes long; the limit is %d", len(p.WorkerID), hephtype.MaxNameLen)
	case p.WorkerID == c.cfg.WorkerID:
		bad("WorkerID %q is this client's own; give the remote worker an id of its own", p.WorkerID)
	}
	name := func(field string, i int, n string) bool {
		if n == "" || len(n) > hephtype.MaxNameLen {
			bad("%s[%d] %.20q must be 1 to %d bytes long", field, i, n, hephtype.MaxNameLen)
			return false
		}
		return true
	}
	for i, a := range p.Actions {
		if name("Actions", i, a) {
			cp.handlers = append(cp.handlers, store.ActionHandler(a))
		}
	}
	for i, a := range p.Activities {
		if name("Activities", i, a) {
			cp.handlers = append(cp.handlers, store.ActivityHandler(a))
		}
	}
	if len(p.Actions)+len(p.Activities) == 0 {
		bad("name at least one action or activity the worker runs")
	}
	if len(cp.queues) == 0 {
		cp.queues = []string{"default"}
	}
	for i, q := range cp.queues {
		name("Queues", i, q)
	}
	switch {
	case cp.max == 0:
		cp.max = 1
	case cp.max < 0 || cp.max > MaxRemoteClaim:
		bad("Max is %d; it must be 1 to %d (0 for 1)", cp.max, MaxRemoteClaim)
	}
	switch {
	case cp.lease == 0:
		cp.lease = c.cfg.LeaseDuration
	case cp.lease < time.Millisecond:
		bad("Lease is %s; it must be at least 1ms (0 for Config.LeaseDuration)", cp.lease)
	}
	if p.Wait < 0 {
		bad("Wait is %s; it must not be negative", p.Wait)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInput, errors.Join(errs...))
	}
	slices.Sort(cp.handlers)
	cp.handlers = slices.Compact(cp.handlers)
	return cp, nil
}

// registerRemote records the worker in the registry: live while it may
// hold leases or wait for tasks.
func (c *Client) registerRemote(ctx context.Context, cp *remoteClaimParams, now time.Time) error {
	started := c.remote.firstSeen(cp.WorkerID, now)
	return c.cfg.Store.RegisterWorker(ctx, &store.Worker{
		ID: cp.WorkerID, Queues: cp.queues, Handlers: cp.handlers, Host: "remote",
		StartedAt: started, SeenAt: now, ExpiresAt: now.Add(cp.Wait + 2*cp.lease),
	})
}

// claimRemoteOnce claims what is ready, strictly and within flow control,
// and readies each task for the worker.
func (c *Client) claimRemoteOnce(ctx context.Context, cp *remoteClaimParams) ([]*RemoteTask, error) {
	// At the stores' precision, as the token keeps it.
	now := c.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	ts, err := c.cfg.Store.ClaimTasks(ctx, &store.ClaimParams{
		Queues: cp.queues, Handlers: cp.handlers, Strict: true,
		Owner: cp.WorkerID, Limit: cp.max, LeaseFor: cp.lease, Now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("claim remote tasks: %w", err)
	}
	out := make([]*RemoteTask, 0, len(ts))
	for _, t := range ts {
		rt, err := c.handOut(ctx, t, cp, now)
		if err != nil {
			c.cfg.Logger.Warn("a claimed remote task was not handed out", slog.String("worker", cp.WorkerID),
				slog.String("run", t.RunID), slog.String("task", store.DescribeTask(t)), slog.Any("err", err))
			continue
		}
		out = append(out, rt)
	}
	return out, nil
}

// handOut readies a claimed task for the remote worker.
func (c *Client) handOut(ctx context.Context, t *store.Task, cp *remoteClaimParams, now time.Time) (*RemoteTask, error) {
	rt := &RemoteTask{
		RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt,
		Details: t.Details, LeaseUntil: t.LeaseUntil, Lease: cp.lease, Queue: t.Queue, TraceParent: t.TraceContext,
	}
	var timeout time.Duration
	switch t.Kind {
	case store.TaskStep:
		a, err := c.flows.PrepareRemote(ctx, t, cp.WorkerID, now)
		if err != nil {
			return nil, err
		}
		rt.Kind, rt.Name, rt.Input, timeout = RemoteStep, strings.TrimPrefix(t.Handler, "action:"), a.Input, a.Timeout
	case store.TaskActivity:
		a, err := c.wf.PrepareRemote(t, cp.WorkerID, now)
		if err != nil {
			return nil, err
		}
		rt.Kind, rt.Name, rt.Input, timeout = RemoteActivity, t.Step, a.Input, a.Timeout
	default:
		// A strict claim returns only the listed handlers, which only
		// steps and activities carry.
		return nil, fmt.Errorf("a %s task has handler %q", t.Kind, t.Handler)
	}
	rt.Deadline = now.Add(timeout)
	rt.Token = (&remoteToken{lease: t.Lease(), runID: t.RunID, claimedAt: now, deadline: rt.Deadline, leaseFor: cp.lease}).encode()
	return rt, nil
}

// HeartbeatRemote extends the lease of a remote task by the claim's
// Lease and records details (when not nil: a JSON value, at most
// Config.MaxPayloadSize) for a retry to resume from. cancelled is true
// when the run was cancelled: the task is gone, and the worker stops.
// A lease lost for another reason is ErrTaskLost. A heartbeat after the
// attempt's deadline records the attempt's timeout (retried per the
// policy) and is ErrTaskLost.
func (c *Client) HeartbeatRemote(ctx context.Context, token string, details json.RawMessage) (cancelled bool, err error) {
	k, err := decodeToken(token)
	if err != nil {
		return false, err
	}
	if err := c.checkDetails(details); err != nil {
		return false, fmt.Errorf("heartbeat task %d: %w", k.lease.TaskID, err)
	}
	now := c.cfg.Clock.Now()
	if now.After(k.deadline) {
		return c.timedOut(ctx, k, details)
	}
	p := &store.HeartbeatParams{Leases: []store.Lease{k.lease}, Until: now.Add(k.leaseFor)}
	if details != nil {
		p.Details = map[int64]json.RawMessage{k.lease.TaskID: details}
	}
	lost, err := c.cfg.Store.Heartbeat(ctx, p)
	if err != nil {
		return false, fmt.Errorf("heartbeat task %d: %w", k.lease.TaskID, err)
	}
	if len(lost) == 0 {
		return false, nil
	}
	return c.lostOrCancelled(ctx, k, "")
}

// timedOut records the timeout of an attempt that ran past its deadline,
// as a step whose code runs past its timeout is stopped and failed (and
// retried per its policy), and reports the lease as lost.
func (c *Client) timedOut(ctx context.Context, k *remoteToken, details json.RawMessage) (bool, error) {
	const why = "the attempt ran past its deadline"
	err := c.remoteOutcome(ctx, k, func(t *store.Task) error {
		return c.failTask(ctx, t, k, why, true, details)
	})
	switch {
	case err == nil:
		return false, errTokenLost(k, why+"; its timeout was recorded")
	case errors.Is(err, ErrTaskLost):
		return c.lostOrCancelled(ctx, k, "")
	}
	return false, err
}

// lostOrCancelled tells why a token's lease is gone: its run was
// cancelled (true), or ErrTaskLost.
func (c *Client) lostOrCancelled(ctx context.Context, k *remoteToken, why string) (bool, error) {
	if _, err := c.cfg.Store.GetTask(ctx, k.lease.TaskID); errors.Is(err, store.ErrTaskNotFound) {
		run, err := c.cfg.Store.GetRun(ctx, k.runID)
		if err == nil && run.Status == hephtype.StatusCancelled {
			return true, nil
		}
	}
	return false, errTokenLost(k, why)
}

// CompleteRemote commits the output (a JSON value; empty is null) of a
// remote task: the step's output (through its RemoteFinish hook: a
// document's branch conditions) or the activity's result, and the
// decision that follows, in one change fenced by the token's claim. A
// stale token fails with ErrTaskLost and writes nothing; output that is
// not JSON fails with ErrInvalidInput. After the attempt's deadline the
// attempt is recorded as timed out instead (retried per the policy), and
// the output dropped: ErrTaskLost.
func (c *Client) CompleteRemote(ctx context.Context, token string, output json.RawMessage) error {
	k, err := decodeToken(token)
	if err != nil {
		return err
	}
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	if !json.Valid(output) {
		return fmt.Errorf("complete task %d: %w: the output is not a JSON value", k.lease.TaskID, ErrInvalidInput)
	}
	if c.cfg.Clock.Now().After(k.deadline) {
		cancelled, err := c.timedOut(ctx, k, nil)
		if cancelled {
			return errTokenLost(k, "the run was cancelled")
		}
		return err
	}
	return c.remoteOutcome(ctx, k, func(t *store.Task) error {
		switch t.Kind {
		case store.TaskStep:
			return c.flows.CompleteRemote(ctx, t, t.Owner, k.claimedAt, output)
		case store.TaskActivity:
			return c.wf.CompleteRemote(ctx, t, t.Owner, k.claimedAt, output)
		}
		return fmt.Errorf("%w: a %s task is not remote work", ErrInvalidToken, t.Kind)
	})
}

// FailRemote commits the failure of a remote task's attempt: retried per
// the step's or activity's policy when retryable, failed for good (and
// the run with it, unless a flow routes the step's failure) otherwise.
// details (when not nil) are recorded for the retry to resume from.
// Fenced as CompleteRemote.
func (c *Client) FailRemote(ctx context.Context, token, msg string, retryable bool, details json.RawMessage) error {
	k, err := decodeToken(token)
	if err != nil {
		return err
	}
	if err := c.checkDetails(details); err != nil {
		return fmt.Errorf("fail task %d: %w", k.lease.TaskID, err)
	}
	if msg == "" {
		msg = "the remote worker reported a failure"
	}
	return c.remoteOutcome(ctx, k, func(t *store.Task) error {
		return c.failTask(ctx, t, k, msg, retryable, details)
	})
}

func (c *Client) failTask(ctx context.Context, t *store.Task, k *remoteToken, msg string, retryable bool, details json.RawMessage) error {
	switch t.Kind {
	case store.TaskStep:
		return c.flows.FailRemote(ctx, t, t.Owner, k.claimedAt, msg, retryable, details)
	case store.TaskActivity:
		return c.wf.FailRemote(ctx, t, t.Owner, k.claimedAt, msg, retryable, details)
	}
	return fmt.Errorf("%w: a %s task is not remote work", ErrInvalidToken, t.Kind)
}

// remoteOutcome reads the token's task back and, while the token's claim
// holds it, commits an outcome with commit: the change is fenced by the
// token's lease, so a claim lost between the read and the commit writes
// nothing either. Lost leases are ErrTaskLost.
func (c *Client) remoteOutcome(ctx context.Context, k *remoteToken, commit func(t *store.Task) error) error {
	t, err := c.cfg.Store.GetTask(ctx, k.lease.TaskID)
	switch {
	case errors.Is(err, store.ErrTaskNotFound):
		return errTokenLost(k, "the task is gone (completed, or its run ended)")
	case err != nil:
		return fmt.Errorf("read task %d: %w", k.lease.TaskID, err)
	case t.RunID != k.runID:
		return fmt.Errorf("%w: the task is not of the token's run", ErrInvalidToken)
	case t.Token != k.lease.Token || t.Owner == "":
		return errTokenLost(k, "the task was claimed again or given back")
	}
	if err := commit(t); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			return errTokenLost(k, "")
		}
		return err
	}
	return nil
}

// checkDetails checks heartbeat details from a remote worker.
func (c *Client) checkDetails(details json.RawMessage) error {
	if details == nil {
		return nil
	}
	if !json.Valid(details) {
		return fmt.Errorf("%w: the details are not a JSON value", ErrInvalidInput)
	}
	return limits.Input(details, c.cfg.MaxPayloadSize, "the heartbeat details")
}

// remoteWork is the client's state for remote workers: who waits for
// tasks of which queues, and when each worker was first seen.
type remoteWork struct {
	waiting atomic.Int32

	mu      sync.Mutex
	waiters map[*remoteWaiter]struct{}
	seen    map[string]time.Time
}

// remoteWaiter is a long-polling ClaimRemote: ch receives when a local
// commit makes a task of one of its queues ready.
type remoteWaiter struct {
	queues []string
	ch     chan struct{}
}

// maxSeen bounds the first-seen times kept; the map is emptied when full.
const maxSeen = 4096

func (r *remoteWork) firstSeen(id string, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.seen[id]; ok {
		return t
	}
	if r.seen == nil || len(r.seen) >= maxSeen {
		r.seen = map[string]time.Time{}
	}
	r.seen[id] = now
	return now
}

func (r *remoteWork) subscribe(queues []string) *remoteWaiter {
	w := &remoteWaiter{queues: queues, ch: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.waiters == nil {
		r.waiters = map[*remoteWaiter]struct{}{}
	}
	r.waiters[w] = struct{}{}
	r.mu.Unlock()
	r.waiting.Add(1)
	return w
}

func (r *remoteWork) unsubscribe(w *remoteWaiter) {
	if w == nil {
		return
	}
	r.mu.Lock()
	if _, ok := r.waiters[w]; ok {
		delete(r.waiters, w)
		r.waiting.Add(-1)
	}
	r.mu.Unlock()
}

// afterCommit wakes the long polls of queues in which a commit of this
// process made tasks ready that it did not claim itself.
func (r *remoteWork) afterCommit(batch []*commit.Request, claimed map[int64]bool, now time.Time) {
	if r.waiting.Load() == 0 {
		return
	}
	var queues []string
	for _, req := range batch {
		if req.Err != nil || req.Res.Run == nil {
			continue
		}
		for _, t := range req.Res.Tasks {
			if !claimed[t.ID] && !t.ReadyAt.After(now) && !slices.Contains(queues, t.Queue) {
				queues = append(queues, t.Queue)
			}
		}
	}
	if len(queues) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.waiters {
		for _, q := range queues {
			if slices.Contains(w.queues, q) {
				select {
				case w.ch <- struct{}{}:
				default:
				}
				break
			}
		}
	}
}
