package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The tests run on a fake clock that starts at t0 and moves only when a
// test advances it; nothing waits for wall-clock time except the generous
// deadline of a wait for an event (patience), which only bounds a failure.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	patience  = 30 * time.Second
	leaseFor  = 30 * time.Second // LeaseDuration: the watchdog's margin is 6 s
	beatEvery = 10 * time.Second // HeartbeatInterval, unless a test says otherwise
	owner     = "w1"             // the pool's worker id
	queue     = "q"
	handler   = "h" // the handler the pool serves
)

// spyClock is a fake clock that records the waits registered on it, so
// that a test knows a goroutine waits for a given time before it advances
// the clock (a relative wait registered after the Advance would otherwise
// be pushed one step later).
type spyClock struct {
	*clock.Fake
	mu      sync.Mutex
	changed chan struct{}
	untils  []time.Time
	afters  []time.Duration
}

func newSpyClock() *spyClock { return &spyClock{Fake: clock.NewFake(t0), changed: make(chan struct{})} }

func (c *spyClock) note(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Until registers the wait, then records it.
func (c *spyClock) Until(t time.Time) <-chan time.Time {
	ch := c.Fake.Until(t)
	c.note(func() { c.untils = append(c.untils, t) })
	return ch
}

// After registers the wait, then records it.
func (c *spyClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	c.note(func() { c.afters = append(c.afters, d) })
	return ch
}

// waitRecorded waits until a wait matching ok has been registered.
func (c *spyClock) waitRecorded(t *testing.T, what string, ok func(untils []time.Time, afters []time.Duration) bool) {
	t.Helper()
	deadline := time.After(patience)
	for {
		c.mu.Lock()
		found, ch := ok(c.untils, c.afters), c.changed
		c.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("nothing waited for %s on the clock", what)
		}
	}
}

// waitUntil waits until some goroutine waits for the clock to reach at.
func (c *spyClock) waitUntil(t *testing.T, at time.Time) {
	t.Helper()
	c.waitRecorded(t, at.Sub(t0).String()+" after t0", func(untils []time.Time, _ []time.Duration) bool {
		return slices.ContainsFunc(untils, at.Equal)
	})
}

// waitAfter waits until some goroutine waits for d to pass.
func (c *spyClock) waitAfter(t *testing.T, d time.Duration) {
	t.Helper()
	c.waitRecorded(t, d.String(), func(_ []time.Time, afters []time.Duration) bool { return slices.Contains(afters, d) })
}

// events records the telemetry events of a hub.
type events struct {
	mu      sync.Mutex
	list    []telemetry.Event
	changed chan struct{}
}

func (e *events) add(ev telemetry.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// matching returns the events recorded so far that ok accepts.
func (e *events) matching(ok func(telemetry.Event) bool) []telemetry.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []telemetry.Event
	for _, ev := range e.list {
		if ok(ev) {
			out = append(out, ev)
		}
	}
	return out
}

// wait returns the first event ok accepts, waiting for it.
func (e *events) wait(t *testing.T, what string, ok func(telemetry.Event) bool) telemetry.Event {
	t.Helper()
	deadline := time.After(patience)
	for {
		e.mu.Lock()
		ch := e.changed
		e.mu.Unlock()
		if m := e.matching(ok); len(m) > 0 {
			return m[0]
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s event", what)
		}
	}
}

func ofKind(k telemetry.Kind) func(telemetry.Event) bool {
	return func(e telemetry.Event) bool { return e.Kind == k }
}

func ofTask(k telemetry.Kind, id int64) func(telemetry.Event) bool {
	return func(e telemetry.Event) bool { return e.Kind == k && e.TaskID == id }
}

// execFunc is an Executor.
type execFunc func(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error)

func (f execFunc) Execute(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
	return f(ctx, h, handoff)
}

// rig is a worker pool on a real (in-memory) SQLite store and a fake
// clock, with the committer it claims through.
type rig struct {
	t        *testing.T
	clk      *spyClock
	db       *sqlite.Store
	st       store.Store // what the pool and the committer use: db, or a wrapper of it
	hub      *telemetry.Hub
	ev       *events
	commit   *commit.Committer
	pool     *worker.Pool
	handlers atomic.Pointer[[]string]
}

type rigOptions struct {
	queues    map[string]int
	batch     int
	heartbeat time.Duration
	shutdown  time.Duration
	// wrap, when set, wraps the store the pool and committer use.
	wrap func(store.Store) store.Store
}

// newRig builds the rig; exec receives it, to complete tasks through its
// committer. The pool is not started.
func newRig(t *testing.T, o rigOptions, exec func(r *rig) worker.Executor) *rig {
	t.Helper()
	db, err := sqlite.Open(context.Background(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, clk: newSpyClock(), db: db, st: db, ev: &events{changed: make(chan struct{})}}
	if o.wrap != nil {
		r.st = o.wrap(db)
	}
	if o.queues == nil {
		o.queues = map[string]int{queue: 4}
	}
	if o.batch == 0 {
		o.batch = 4
	}
	if o.heartbeat == 0 {
		o.heartbeat = beatEvery
	}
	if o.shutdown == 0 {
		o.shutdown = time.Minute
	}
	r.setHandlers(handler)
	r.hub = telemetry.New(r.clk)
	r.hub.Subscribe(r.ev.add)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.commit = commit.New(&commit.Config{
		Store: r.st, Clock: r.clk, Logger: logger, Telemetry: r.hub, WorkerID: owner, LeaseDuration: leaseFor,
		Handlers: r.claimHandlers,
		AfterCommit: func(b []*commit.Request, claimed map[int64]bool, now time.Time) {
			r.pool.AfterCommit(b, claimed, now)
		},
	})
	r.pool = worker.New(&worker.Config{
		Store: r.st, Clock: r.clk, Logger: logger, Telemetry: r.hub, Committer: r.commit, Executor: exec(r),
		Handlers: r.claimHandlers, Queues: o.queues, ClaimBatch: o.batch, LeaseDuration: leaseFor,
		HeartbeatInterval: o.heartbeat, MinPollInterval: 100 * time.Millisecond, PollInterval: time.Second,
		ShutdownTimeout: o.shutdown,
	})
	t.Cleanup(func() {
		// Whatever still runs is cancelled at once.
		r.pool.Stop(doneContext())
		r.commit.Close()
		_ = db.Close()
	})
	return r
}

func doneContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func (r *rig) setHandlers(hs ...string) { r.handlers.Store(&hs) }

func (r *rig) claimHandlers() []string { return *r.handlers.Load() }

func (r *rig) start() {
	r.t.Helper()
	if err := r.pool.Start(context.Background()); err != nil {
		r.t.Fatalf("Start: %v", err)
	}
}

// waitIdle waits until a claim loop waits for its first poll (at
// MinPollInterval, jittered): after its first claim and look-ahead, only a
// commit of this process, the clock or a notification wakes it.
func (r *rig) waitIdle() {
	r.t.Helper()
	r.clk.waitRecorded(r.t, "the claim loop's poll", func(untils []time.Time, _ []time.Duration) bool {
		return slices.ContainsFunc(untils, func(u time.Time) bool { return u.After(t0) && u.Before(t0.Add(time.Second)) })
	})
}

// stopAsync calls Stop(ctx) in a goroutine; the channel closes when it
// returns.
func (r *rig) stopAsync(ctx context.Context) chan struct{} {
	done := make(chan struct{})
	go func() {
		r.pool.Stop(ctx)
		close(done)
	}()
	return done
}

// createRun creates a running run with tasks through the committer, and
// returns its tasks as stored.
func (r *rig) createRun(id string, tasks ...store.NewTask) []*store.Task {
	r.t.Helper()
	req, err := r.commit.Submit(context.Background(), store.Change{Create: &store.NewRun{
		ID: id, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, Tasks: tasks,
	}})
	if err != nil {
		r.t.Fatalf("create run %s: %v", id, err)
	}
	if len(req.Res.Tasks) != len(tasks) {
		r.t.Fatalf("create run %s: %d tasks stored, want %d", id, len(req.Res.Tasks), len(tasks))
	}
	return req.Res.Tasks
}

// complete commits the outcome of a held task: a change fenced by its
// lease, which deletes the task.
func (r *rig) complete(ctx context.Context, h *worker.Held) error {
	lease := h.Task().Lease()
	_, err := r.commit.Submit(ctx, store.Change{RunID: h.Task().RunID, Fence: &lease, Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{}, nil
	}})
	return err
}

// peek reads a task from the store without touching its lease, or returns
// nil when it is gone. (StrandedTasks, asked at a far time for tasks no
// handler is served, lists every task with a handler.)
func (r *rig) peek(q string, id int64) *store.Task {
	r.t.Helper()
	far := t0.Add(24 * time.Hour)
	ts, err := r.db.StrandedTasks(context.Background(), &store.StrandedParams{Queue: q, Served: []string{}, ReadyBefore: far, Now: far, Limit: 1000})
	if err != nil {
		r.t.Fatalf("read tasks: %v", err)
	}
	for _, t := range ts {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// steal claims every claimable task of the queues for another worker, at
// the clock's time.
func (r *rig) steal(queues ...string) []*store.Task {
	r.t.Helper()
	ts, err := r.db.ClaimTasks(context.Background(), &store.ClaimParams{Queues: queues, Owner: "thief", Limit: 100, LeaseFor: time.Hour, Now: r.clk.Now()})
	if err != nil {
		r.t.Fatalf("claim as another worker: %v", err)
	}
	return ts
}

func stepTask(q, step string) store.NewTask {
	return store.NewTask{Queue: q, Kind: store.TaskStep, Step: step, Index: -1, Attempt: 1, Handler: handler}
}

func ids(ts []*store.Task) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	slices.Sort(out)
	return out
}

// call is one Execute of a blocking executor.
type call struct {
	ctx     context.Context
	h       *worker.Held
	handoff string
	// proceed lets the call complete its task (through the committer)
	// and return the tasks sent, as claimed for a hand-off.
	proceed chan []*store.Task
	// result receives the error the call returns.
	result chan error
}

// blocking returns an executor that announces each call on calls and
// waits until the test lets it complete the task (it then returns the
// tasks sent on proceed), or until its context ends (it then returns
// ctx.Err(), which the pool joins with the cause).
func blocking(calls chan<- *call) func(r *rig) worker.Executor {
	return func(r *rig) worker.Executor {
		return execFunc(func(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
			c := &call{ctx: ctx, h: h, handoff: handoff, proceed: make(chan []*store.Task, 1), result: make(chan error, 1)}
			calls <- c
			select {
			case back := <-c.proceed:
				err := r.complete(ctx, h)
				c.result <- err
				return back, err
			case <-ctx.Done():
				c.result <- ctx.Err()
				return nil, ctx.Err()
			}
		})
	}
}

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func closed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	recv(t, what, ch)
}

// eventually polls cond (for state in the store, which tells nobody when
// it changes) until it holds.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// causeOf waits for the call's context to end and returns its cause.
func causeOf(t *testing.T, c *call) error {
	t.Helper()
	closed(t, fmt.Sprintf("the context of task %d to end", c.h.Task().ID), c.ctx.Done())
	return context.Cause(c.ctx)
}

func wantCause(t *testing.T, c *call, want error) {
	t.Helper()
	if got := causeOf(t, c); !errors.Is(got, want) {
		t.Fatalf("task %d: context ended with cause %v, want %v", c.h.Task().ID, got, want)
	}
}
