// Package remote is the runtime of workers outside the process: the
// server's HTTP workers, in any language. It hands them tasks and takes
// their reports through the task seam the worker pool uses: claims are
// the store's (strict, within flow control), waiting is the pool's
// (worker.Pool.Subscribe and WaitReady: local commits, notifications,
// known ready times, the jittered poll), and every outcome is the same
// fenced change as an in-process step's or activity's, made by the flow
// and workflow runtimes (flowrt, wfrt).
//
// A claim handed out is a capability: its token carries a fresh random
// secret, and the store keeps the claim's facts (store.RemoteClaim: the
// fence, the secret's hash, the identity that claimed, the attempt's
// deadline and lease). A report is accepted only with the secret of the
// task's current claim, from the identity that claimed (Caller), and is
// held to the deadline the server recorded. The runtime starts no
// goroutine: each call runs on its caller's.
package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Errors of remote work; the root package exports them.
var (
	// ErrTaskLost: the task's lease is no longer held by the token's
	// claim (the lease expired and another worker claimed the task, the
	// run was cancelled or ended, or the attempt was completed already).
	// Nothing was written; the worker drops its result.
	ErrTaskLost = hephtype.ErrTaskLost
	// ErrInvalidToken: the token is not one that a claim handed out, not
	// the task's current claim's, or not the caller's.
	ErrInvalidToken = hephtype.ErrInvalidToken
	// ErrRefused (an ErrInvalidToken): the token is well-formed but does
	// not grant its caller the task's current claim: it was made up or
	// edited, or the caller is not the identity that claimed. One error
	// for all, so that a made-up token cannot be told from a stolen one.
	ErrRefused = hephtype.ErrTokenRefused
)

// MaxClaim bounds Claim.Max.
const MaxClaim = hephtype.MaxRemoteClaim

// Config configures a Runtime.
type Config struct {
	Store  store.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Pool is the process's worker pool, whose wake-ups long polls wait
	// with.
	Pool *worker.Pool
	// Flows and Workflows prepare and commit the attempts of remote steps
	// and of activities.
	Flows     *flowrt.Runtime
	Workflows *wfrt.Runtime
	// WorkerID is this process's worker id, which remote workers may not
	// take.
	WorkerID                      string
	LeaseDuration                 time.Duration
	MinPollInterval, PollInterval time.Duration
	MaxPayloadSize                int
}

// Runtime serves remote workers. Safe for concurrent use.
type Runtime struct {
	cfg Config

	mu      sync.Mutex
	seen    map[string]time.Time  // when each worker was first seen
	written map[string]registered // the registration each worker has in the store
}

// registered is the registry row a claim last wrote for a worker.
type registered struct {
	what    string // its queues and handlers
	expires time.Time
}

// New returns a Runtime.
func New(cfg *Config) *Runtime {
	r := &Runtime{cfg: *cfg}
	var hub *telemetry.Hub
	telemetry.Defaults(&r.cfg.Clock, &r.cfg.Logger, &hub)
	return r
}

// callerKey keys the caller's identity in a context.
type callerKey struct{}

// WithCaller returns ctx naming the identity that makes a report
// (Heartbeat, Complete, Fail): the principal of the credentials it came
// with. Without it the caller is "" (a caller in the process).
func WithCaller(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, callerKey{}, principal)
}

// Caller returns the identity WithCaller put in ctx ("" for none).
func Caller(ctx context.Context) string {
	p, _ := ctx.Value(callerKey{}).(string)
	return p
}

// Claim asks for tasks for a worker outside the process.
type Claim = hephtype.RemoteClaim

// Task is a task handed to a remote worker.
type Task = hephtype.RemoteTask

// The kinds of Task.
const (
	KindStep     = hephtype.RemoteStep
	KindActivity = hephtype.RemoteActivity
)

// claim is a checked Claim.
type claim struct {
	*Claim
	queues   []string
	handlers []string
	max      int
	lease    time.Duration
}

// Claim leases up to p.Max ready tasks that the worker p names can run,
// and returns them; with p.Wait it waits for some until p.Wait has passed
// (an empty list then) or ctx ends. It records the worker in the worker
// registry, live until its lease and wait are over. A task that cannot be
// handed out (its flow does not load here, or the step's RemotePrepare
// fails, which fails the attempt) is left out.
func (r *Runtime) Claim(ctx context.Context, p *Claim) ([]*Task, error) {
	cp, err := r.check(p)
	if err != nil {
		return nil, fmt.Errorf("claim remote tasks: %w", err)
	}
	start := r.cfg.Clock.Now()
	if err := r.register(ctx, cp, start); err != nil {
		return nil, fmt.Errorf("claim remote tasks: %w", err)
	}
	deadline := start.Add(p.Wait)
	poll := r.cfg.MinPollInterval
	for {
		var w *worker.Waiter
		if p.Wait > 0 {
			// Before the claim: a commit between the claim and the wait
			// still wakes it.
			w = r.cfg.Pool.Subscribe(cp.queues)
		}
		tasks, err := r.claimOnce(ctx, cp)
		if err != nil || len(tasks) > 0 || w == nil {
			r.cfg.Pool.Unsubscribe(w)
			return tasks, err
		}
		if !r.cfg.Clock.Now().Before(deadline) {
			r.cfg.Pool.Unsubscribe(w)
			return []*Task{}, nil
		}
		poll, err = r.cfg.Pool.WaitReady(ctx, w, cp.handlers, poll, deadline)
		r.cfg.Pool.Unsubscribe(w)
		if err != nil {
			return nil, fmt.Errorf("claim remote tasks: %w", err)
		}
	}
}

func (r *Runtime) check(p *Claim) (*claim, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil *RemoteClaim", hephtype.ErrInvalidInput)
	}
	cp := &claim{Claim: p, queues: p.Queues, max: p.Max, lease: p.Lease}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case p.WorkerID == "":
		bad("WorkerID is empty")
	case len(p.WorkerID) > hephtype.MaxNameLen:
		bad("WorkerID is %d bytes long; the limit is %d", len(p.WorkerID), hephtype.MaxNameLen)
	case p.WorkerID == r.cfg.WorkerID:
		bad("WorkerID %q is this client's own; give the remote worker an id of its own", p.WorkerID)
	}
	if len(p.Principal) > store.MaxPrincipal {
		bad("Principal is %d bytes long; the limit is %d", len(p.Principal), store.MaxPrincipal)
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
	case cp.max < 0 || cp.max > MaxClaim:
		bad("Max is %d; it must be 1 to %d (0 for 1)", cp.max, MaxClaim)
	}
	switch {
	case cp.lease == 0:
		cp.lease = r.cfg.LeaseDuration
	case cp.lease < time.Millisecond:
		bad("Lease is %s; it must be at least 1ms (0 for Config.LeaseDuration)", cp.lease)
	}
	if p.Wait < 0 {
		bad("Wait is %s; it must not be negative", p.Wait)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", hephtype.ErrInvalidInput, errors.Join(errs...))
	}
	slices.Sort(cp.handlers)
	cp.handlers = slices.Compact(cp.handlers)
	return cp, nil
}

// maxSeen bounds the first-seen times kept; the map is emptied when full.
const maxSeen = 4096

// register records the worker in the registry: live while it may hold
// leases or wait for tasks. A claim whose worker this process registered
// with the same queues and handlers, live for at least half a lease more
// than this claim needs, writes nothing (a worker polling in a loop would
// otherwise write its row at every poll); its "seen at" is then up to half
// a lease old.
func (r *Runtime) register(ctx context.Context, cp *claim, now time.Time) error {
	expires := now.Add(cp.Wait + 2*cp.lease)
	what := strings.Join(cp.queues, ",") + "|" + strings.Join(cp.handlers, ",")
	r.mu.Lock()
	started, ok := r.seen[cp.WorkerID]
	if !ok {
		if r.seen == nil || len(r.seen) >= maxSeen {
			r.seen, r.written = map[string]time.Time{}, map[string]registered{}
		}
		started = now
		r.seen[cp.WorkerID] = now
	}
	last, wrote := r.written[cp.WorkerID]
	r.mu.Unlock()
	if wrote && last.what == what && !last.expires.Before(expires.Add(-cp.lease/2)) {
		return nil
	}
	err := r.cfg.Store.RegisterWorker(ctx, &store.Worker{
		ID: cp.WorkerID, Queues: cp.queues, Handlers: cp.handlers, Host: "remote",
		StartedAt: started, SeenAt: now, ExpiresAt: expires,
	})
	if err == nil {
		r.mu.Lock()
		if r.written != nil {
			r.written[cp.WorkerID] = registered{what: what, expires: expires}
		}
		r.mu.Unlock()
	}
	return err
}

// claimOnce claims what is ready, strictly and within flow control, and
// hands each task out.
func (r *Runtime) claimOnce(ctx context.Context, cp *claim) ([]*Task, error) {
	// At the stores' precision, as the claim's record keeps it.
	now := r.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	ts, err := r.cfg.Store.ClaimTasks(ctx, &store.ClaimParams{
		Queues: cp.queues, Handlers: cp.handlers, Strict: true,
		Owner: cp.WorkerID, Limit: cp.max, LeaseFor: cp.lease, Now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("claim remote tasks: %w", err)
	}
	out := make([]*Task, 0, len(ts))
	for _, t := range ts {
		rt, err := r.handOut(ctx, t, cp, now)
		if err != nil {
			r.cfg.Logger.Warn("a claimed remote task was not handed out", slog.String("worker", cp.WorkerID),
				slog.String("run", t.RunID), slog.String("task", store.DescribeTask(t)), slog.Any("err", err))
			continue
		}
		out = append(out, rt)
	}
	return out, nil
}

// handOut readies a claimed task for the remote worker and records the
// claim. The record is written after the claim and before the task is
// handed out: if the process dies in between, the task was never handed
// out, and its lease expires as any lost worker's does.
func (r *Runtime) handOut(ctx context.Context, t *store.Task, cp *claim, now time.Time) (*Task, error) {
	rt := &Task{
		RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Step: t.Step, Index: t.Index, Attempt: t.Attempt,
		Details: t.Details, LeaseUntil: t.LeaseUntil, Lease: cp.lease, Queue: t.Queue, TraceParent: t.TraceContext,
	}
	var timeout time.Duration
	switch t.Kind {
	case store.TaskStep:
		a, err := r.cfg.Flows.PrepareRemote(ctx, t, cp.WorkerID, now)
		if err != nil {
			return nil, err
		}
		rt.Kind, rt.Name, rt.Input, timeout = KindStep, strings.TrimPrefix(t.Handler, "action:"), a.Input, a.Timeout
	case store.TaskActivity:
		a, err := r.cfg.Workflows.PrepareRemote(t, cp.WorkerID, now)
		if err != nil {
			return nil, err
		}
		rt.Kind, rt.Name, rt.Input, timeout = KindActivity, t.Step, a.Input, a.Timeout
	default:
		// A strict claim returns only the listed handlers, which only
		// steps and activities carry.
		return nil, fmt.Errorf("a %s task has handler %q", t.Kind, t.Handler)
	}
	rt.Deadline = now.Add(timeout)
	k := newToken(t.ID, t.Token)
	err := r.cfg.Store.PutRemoteClaim(ctx, &store.RemoteClaim{
		TaskID: t.ID, Token: t.Token, RunID: t.RunID, SecretHash: k.hash(), Principal: cp.Principal, WorkerID: cp.WorkerID,
		ClaimedAt: now, Deadline: rt.Deadline, Lease: cp.lease,
	})
	if err != nil {
		// Given back: it is claimable again at once.
		r.cfg.Pool.Release([]*store.Task{t})
		return nil, fmt.Errorf("record the claim: %w", err)
	}
	rt.Token = k.encode()
	return rt, nil
}
