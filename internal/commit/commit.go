// Package commit is the runtime's group commit: every state change of a
// run (a start, a step's outcome, a decision, a signal, a cancellation)
// and every claim of tasks goes through one Committer, which applies all
// that is queued while the previous transaction commits in the next one.
//
// It owns the commit loops, the retry of a batch whose transaction failed
// (safe for every kind of change: see docs/architecture.md, "Exactly
// once"), the standing and hand-off claims that ride in those
// transactions, and the callers waiting for a run to end (WaitRun). It may
// not decide anything about a run: the Decide functions of the changes do,
// inside the transaction. It knows nothing of flows, workflows or workers;
// after each commit it tells the AfterCommit hook (the worker pool) which
// tasks were created, cancelled and claimed.
package commit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrClosed: the committer was closed (re-exported as
// hephaestus.ErrClosed).
var ErrClosed = hephtype.ErrClosed

// Config configures a Committer.
type Config struct {
	Store     store.Store
	Clock     clock.Clock
	Logger    *slog.Logger
	Telemetry *telemetry.Hub
	// Tracer makes the spans of the runs this committer creates and of
	// the attempt outcomes, decisions and run ends it commits (nil: none).
	Tracer         *tracing.Tracer
	WorkerID       string
	LeaseDuration  time.Duration
	MaxCommitBatch int
	// Handlers returns what this process can run (store.Task.Handler):
	// claims ask only for those tasks.
	Handlers func() []string
	// AfterCommit, when set, is called after each committed batch with
	// the tasks that batch claimed (by id), before the batch's callers
	// are told.
	AfterCommit func(batch []*Request, claimed map[int64]bool, now time.Time)
}

// Committer applies state changes in groups: while one transaction
// commits, the next changes queue up and go together in the following one.
// With a single writer (SQLite) this turns a commit per change into a
// commit per batch, at no added latency when the system is idle.
//
// Claims go through the committer too. A queue whose worker has free slots
// leaves a standing claim; the next transaction leases ready tasks for it
// after applying its changes, so a step's successor is claimed in the very
// transaction that completes the step.
type Committer struct {
	cfg   Config
	reqs  chan []*Request // a group is never split between transactions
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	start sync.Once
	// sending is held (read) by submitters while they queue changes, and
	// taken by close before it stops the loops: a change is queued before
	// the loops stop (and applied by them), or refused with ErrClosed.
	sending sync.RWMutex
	closed  bool

	mu     sync.Mutex
	claims map[string]*Claim // standing claims by queue

	waitMu  sync.Mutex
	waiters map[string][]chan *store.Run // callers of WaitRun, by run
	// ended holds the ids of the runs that commits of this committer
	// ended last (at most endedKept, oldest first in endedOrder), for
	// WaitStarted.
	ended      map[string]bool
	endedOrder []string
}

// endedKept is how many ended runs the committer remembers for
// WaitStarted: enough to cover the runs that can end between a start's
// commit and its caller's wait.
const endedKept = 4096

// commitRetries bounds how often a batch is tried again after a store
// error (with backoff from 20 ms to 1.3 s, about 2.5 s in all).
const commitRetries = 7

// Request is a change submitted to the committer, and its outcome once
// its transaction ran.
type Request struct {
	Change store.Change
	// Handoff, when set, claims up to one task of that queue in the same
	// transaction: the worker that completes a step runs its successor
	// without another round trip.
	Handoff string
	// Claimed are the tasks the hand-off claimed.
	Claimed []*store.Task
	// Update is the last Update that Decide returned, for post-commit work.
	Update *store.Update
	Res    store.ChangeResult
	Err    error
	done   chan struct{}
	// task is the task whose outcome the change commits (ForTask), and
	// committedAt when its transaction committed: for telemetry.
	task        *store.Task
	committedAt time.Time
	// span is the root span of the run a Create makes, ended once the
	// creation commits.
	span trace.Span
}

// Claim asks for up to N tasks of a queue; the committer fills Tasks (or
// Err) and closes Done once the transaction that served it has committed.
type Claim struct {
	Queue string
	N     int
	Tasks []*store.Task
	Err   error
	done  chan struct{}
}

// Done is closed once a transaction served the claim.
func (r *Claim) Done() <-chan struct{} { return r.done }

// New returns a Committer; its loops start with the first submission.
func New(cfg *Config) *Committer {
	m := &Committer{
		cfg: *cfg, reqs: make(chan []*Request, 1024), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), claims: map[string]*Claim{},
		waiters: map[string][]chan *store.Run{},
	}
	telemetry.Defaults(&m.cfg.Clock, &m.cfg.Logger, &m.cfg.Telemetry)
	if m.cfg.MaxCommitBatch <= 0 {
		m.cfg.MaxCommitBatch = 512
	}
	if m.cfg.Handlers == nil {
		m.cfg.Handlers = func() []string { return []string{} }
	}
	return m
}

// run starts the commit loops: one, or as many as the store can apply at
// once (store.ConcurrentApplier). They share the queue of changes, so a
// slow commit does not hold up the next batch.
func (m *Committer) run() {
	m.start.Do(func() {
		n := 1
		if ca, ok := m.cfg.Store.(store.ConcurrentApplier); ok {
			n = max(1, ca.ApplyConcurrency())
		}
		var wg sync.WaitGroup
		for range n {
			wg.Go(m.loop)
		}
		go func() { wg.Wait(); close(m.done) }()
	})
}

// newRequest wraps a change so that the request records the last Update
// its Decide returned.
func (m *Committer) newRequest(ctx context.Context, ch store.Change, queue string) *Request {
	r := &Request{Change: ch, Handoff: queue, done: make(chan struct{}), task: taskOf(ctx)}
	if ch.Create != nil {
		r.span = m.cfg.Tracer.StartRun(ctx, ch.Create, m.cfg.Clock.Now())
	}
	if ch.Decide != nil {
		decide := ch.Decide
		r.Change.Decide = func(run *store.Run) (*store.Update, error) {
			u, err := decide(run)
			r.Update = u
			return u, err
		}
	}
	return r
}

// Submit applies one change and waits for its result.
func (m *Committer) Submit(ctx context.Context, ch store.Change) (*Request, error) {
	return m.SubmitHandoff(ctx, ch, "")
}

// SubmitHandoff is Submit that also claims a task of queue (when not
// empty) in the same transaction, into the result's Claimed.
func (m *Committer) SubmitHandoff(ctx context.Context, ch store.Change, queue string) (*Request, error) {
	m.run()
	r := m.newRequest(ctx, ch, queue)
	m.sending.RLock()
	if m.closed {
		m.sending.RUnlock()
		return nil, ErrClosed
	}
	select {
	case m.reqs <- []*Request{r}:
	case <-ctx.Done():
		m.sending.RUnlock()
		return nil, ctx.Err()
	}
	m.sending.RUnlock()
	// Once queued, a change is applied even if ctx ends: wait for it so the
	// caller never mistakes a committed change for a lost one.
	<-r.done
	if r.Err != nil {
		return r, r.Err
	}
	return r, nil
}

// SubmitAll queues many changes, in order, and waits for all of them.
// Each group of up to MaxCommitBatch changes goes into one transaction, in
// order, so that which of two conflicting starts wins does not depend on
// how concurrent commit loops split them.
func (m *Committer) SubmitAll(ctx context.Context, chs []store.Change) ([]*Request, error) {
	m.run()
	reqs := make([]*Request, len(chs))
	for i, ch := range chs {
		reqs[i] = m.newRequest(ctx, ch, "")
	}
	size := m.cfg.MaxCommitBatch
	m.sending.RLock()
	for i := 0; i < len(reqs); i += size {
		group := reqs[i:min(i+size, len(reqs))]
		var err error
		if m.closed {
			err = ErrClosed
		} else {
			select {
			case m.reqs <- group:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if err != nil {
			m.sending.RUnlock()
			for _, q := range reqs[:i] {
				<-q.done
			}
			return nil, err
		}
	}
	m.sending.RUnlock()
	for _, r := range reqs {
		<-r.done
	}
	return reqs, nil
}

// Claim leaves a standing claim for up to n tasks of queue. When now is
// set, a transaction runs for it at once even if no change is pending.
func (m *Committer) Claim(queue string, n int, now bool) *Claim {
	m.run()
	r := &Claim{Queue: queue, N: n, done: make(chan struct{})}
	m.sending.RLock()
	defer m.sending.RUnlock()
	if m.closed {
		r.Err = ErrClosed
		close(r.done)
		return r
	}
	m.mu.Lock()
	if old := m.claims[queue]; old != nil {
		close(old.done) // replaced: served with nothing
	}
	m.claims[queue] = r
	m.mu.Unlock()
	if now {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	return r
}

// Withdraw removes a standing claim that no transaction has taken yet. It
// returns false when a transaction took it: its Done channel will close.
func (m *Committer) Withdraw(r *Claim) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[r.Queue] == r {
		delete(m.claims, r.Queue)
		return true
	}
	return false
}

func (m *Committer) takeClaims() []*Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.claims) == 0 {
		return nil
	}
	out := make([]*Claim, 0, len(m.claims))
	for q, r := range m.claims {
		out = append(out, r)
		delete(m.claims, q)
	}
	return out
}

func (m *Committer) loop() {
	max := m.cfg.MaxCommitBatch
	batch := make([]*Request, 0, max)
	for {
		batch = batch[:0]
		select {
		case g := <-m.reqs:
			batch = append(batch, g...)
		case <-m.kick:
		case <-m.stop:
			// Apply what was queued before stopping; fail standing claims.
			for {
				select {
				case g := <-m.reqs:
					m.apply(g, nil)
				default:
					for _, cr := range m.takeClaims() {
						cr.Err = ErrClosed
						close(cr.done)
					}
					return
				}
			}
		}
	drain:
		for len(batch) < max {
			select {
			case g := <-m.reqs:
				batch = append(batch, g...)
			default:
				break drain
			}
		}
		m.apply(batch, m.takeClaims())
	}
}

// apply commits a batch of changes and the standing claims in one store
// Apply, retried on a store error; hands each request and claim its
// result; and closes them.
func (m *Committer) apply(batch []*Request, claims []*Claim) {
	if len(batch) == 0 && len(claims) == 0 {
		return
	}
	now := m.cfg.Clock.Now()
	plan := m.planClaims(batch, claims, now)
	params := &store.ApplyParams{Changes: make([]store.Change, len(batch)), Now: now, Claims: plan.params}
	for i, r := range batch {
		params.Changes[i] = r.Change
	}
	res, retried, err := m.applyRetrying(params, len(batch))
	if err == nil {
		plan.distribute(res.Claimed)
		m.distributeResults(batch, res, retried)
		m.committed(batch, claims, now)
	} else {
		for _, r := range batch {
			r.Err = err
		}
		for _, cr := range claims {
			cr.Err = err
		}
		m.cfg.Logger.Error("commit failed", slog.Int("changes", len(batch)), slog.Any("err", err))
	}
	for _, r := range batch {
		close(r.done)
	}
	for _, cr := range claims {
		close(cr.done)
	}
}

// claimPlan is the claims that ride in one commit, in the order of
// params: the hand-offs' queues first, then the standing claims of
// other queues.
type claimPlan struct {
	params     []store.ClaimParams
	handQueues []string              // the queues of the hand-offs, in order
	handoffs   map[string][]*Request // each hand-off queue's requests
	standing   map[string]*Claim     // a standing claim of a hand-off queue
	rest       []*Claim              // the standing claims of other queues
}

// planClaims plans the claims of a commit. Hand-offs claim first, one
// claim per queue for all of them: a worker that just finished a step
// keeps its slot busy with a successor rather than leaving it to the
// pool. A standing claim of a queue that also has hand-offs rides in the
// same claim statement, after them.
func (m *Committer) planClaims(batch []*Request, claims []*Claim, now time.Time) *claimPlan {
	cfg := &m.cfg
	// Workers claim only the tasks they can run.
	handlers := cfg.Handlers()
	claim := func(q string, limit int) store.ClaimParams {
		return store.ClaimParams{
			Queues: []string{q}, Handlers: handlers, Owner: cfg.WorkerID, Limit: limit, LeaseFor: cfg.LeaseDuration, Now: now,
		}
	}
	p := &claimPlan{handoffs: map[string][]*Request{}, standing: map[string]*Claim{}}
	for _, r := range batch {
		if r.Handoff != "" {
			if p.handoffs[r.Handoff] == nil {
				p.handQueues = append(p.handQueues, r.Handoff)
			}
			p.handoffs[r.Handoff] = append(p.handoffs[r.Handoff], r)
		}
	}
	for _, cr := range claims {
		if p.handoffs[cr.Queue] != nil {
			p.standing[cr.Queue] = cr
		}
	}
	for _, q := range p.handQueues {
		limit := len(p.handoffs[q])
		if cr := p.standing[q]; cr != nil {
			limit += cr.N
		}
		p.params = append(p.params, claim(q, limit))
	}
	for _, cr := range claims {
		if p.standing[cr.Queue] == nil {
			p.rest = append(p.rest, cr)
			p.params = append(p.params, claim(cr.Queue, cr.N))
		}
	}
	return p
}

// distribute hands the claimed tasks, one list per planned claim, out:
// a hand-off queue's to its requests in order, what is left to the
// queue's standing claim; the other claims their own.
func (p *claimPlan) distribute(claimed [][]*store.Task) {
	for i, q := range p.handQueues {
		tasks := claimed[i]
		hs := p.handoffs[q]
		for k := 0; k < len(tasks) && k < len(hs); k++ {
			hs[k].Claimed = append(hs[k].Claimed, tasks[k])
		}
		if cr := p.standing[q]; cr != nil && len(tasks) > len(hs) {
			cr.Tasks = tasks[len(hs):]
		}
	}
	for i, cr := range p.rest {
		cr.Tasks = claimed[len(p.handQueues)+i]
	}
}

// applyRetrying runs the store's Apply, and again up to commitRetries
// times on an error, waiting longer each time; retried says whether it
// tried more than once. n is the number of changes, for the log.
//
// A store error means nothing was applied, or — when a COMMIT's answer
// was lost with its connection and the store could not learn its outcome
// — possibly everything. Trying again is safe either way, for every kind
// of change (docs/architecture.md lists them): completions and
// operations are fenced by their task's lease (the retry of one that
// committed finds the task gone: ErrLeaseLost, and the worker drops it);
// decisions are checked against the sequence number they read (the retry
// is refused, and the decision made afresh from the stored history);
// signals, resumes, cancellations and a child's report carry an
// idempotency key (ErrDuplicateChange: applied already); a create names
// its run id (ErrRunExists: read back by distributeResults).
func (m *Committer) applyRetrying(params *store.ApplyParams, n int) (res *store.ApplyResult, retried bool, err error) {
	cfg := &m.cfg
	res, err = cfg.Store.Apply(context.Background(), params)
	for attempt := 1; err != nil && attempt <= commitRetries && !errors.Is(err, store.ErrClosed); attempt++ {
		retried = true
		cfg.Logger.Warn("commit failed; retrying", slog.Int("attempt", attempt), slog.Int("changes", n), slog.Any("err", err))
		cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.CommitFailed, Count: n, Err: err})
		<-cfg.Clock.After(time.Duration(10<<attempt) * time.Millisecond)
		res, err = cfg.Store.Apply(context.Background(), params)
	}
	return res, retried, err
}

// distributeResults gives each request of a committed batch its change's
// result.
func (m *Committer) distributeResults(batch []*Request, res *store.ApplyResult, retried bool) {
	for i, r := range batch {
		r.Res = res.Changes[i]
		r.Err = res.Changes[i].Err
		// A create whose first commit did happen, though its outcome was
		// lost with the connection, finds its own run on the retry.
		if retried && r.Change.Create != nil && errors.Is(r.Err, store.ErrRunExists) {
			if run, gerr := m.cfg.Store.GetRun(context.Background(), r.Change.Create.ID); gerr == nil {
				r.Res, r.Err = store.ChangeResult{Run: run}, nil
			}
		}
	}
}

// committed reports a committed batch, begun at now: to AfterCommit with
// the tasks it claimed, in telemetry, and to the waiters of the runs it
// ended.
func (m *Committer) committed(batch []*Request, claims []*Claim, now time.Time) {
	cfg := &m.cfg
	claimed := map[int64]bool{}
	for _, r := range batch {
		for _, t := range r.Claimed {
			claimed[t.ID] = true
		}
	}
	for _, cr := range claims {
		for _, t := range cr.Tasks {
			claimed[t.ID] = true
		}
	}
	if cfg.AfterCommit != nil {
		cfg.AfterCommit(batch, claimed, now)
	}
	done := cfg.Clock.Now()
	for _, r := range batch {
		r.committedAt = done
	}
	cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.CommitCompleted, Count: len(batch), Duration: done.Sub(now)})
	m.emitCommitted(batch)
}

// Close stops the loops after applying what is queued; later submissions
// fail with ErrClosed.
func (m *Committer) Close() {
	m.once.Do(func() {
		m.sending.Lock() // waits for changes being queued
		m.closed = true
		m.sending.Unlock()
		close(m.stop)
		m.start.Do(func() { close(m.done) })
	})
	<-m.done
}

// WaitRun waits until the run is completed, failed, cancelled or
// continued, and returns it. Runs that a commit of this committer ends
// are seen at once; the store is polled (from 10 ms, doubling up to
// maxPoll) for runs that other processes end.
func (m *Committer) WaitRun(ctx context.Context, runID string, maxPoll time.Duration) (*store.Run, error) {
	return m.wait(ctx, runID, maxPoll, false)
}

// WaitStarted is WaitRun for a run that a commit of this committer has
// just created, not finished: it skips WaitRun's first read of the run,
// a round trip that finds it pending, unless a commit of this committer
// ended the run since (between the start's commit and this call).
// Another process's end of it is polled for, as by WaitRun.
func (m *Committer) WaitStarted(ctx context.Context, runID string, maxPoll time.Duration) (*store.Run, error) {
	return m.wait(ctx, runID, maxPoll, true)
}

func (m *Committer) wait(ctx context.Context, runID string, maxPoll time.Duration, started bool) (*store.Run, error) {
	ch := make(chan *store.Run, 1)
	m.waitMu.Lock()
	m.waiters[runID] = append(m.waiters[runID], ch)
	read := !started || m.ended[runID]
	m.waitMu.Unlock()
	defer m.unwait(runID, ch)
	if maxPoll <= 0 {
		maxPoll = time.Second
	}
	poll := min(10*time.Millisecond, maxPoll)
	for {
		if read {
			r, err := m.cfg.Store.GetRun(ctx, runID)
			if err != nil {
				return nil, err
			}
			if r.Status.Terminal() {
				return r, nil
			}
		}
		read = true
		select {
		case r := <-ch:
			return r, nil
		case <-m.cfg.Clock.After(poll):
			poll = min(poll*2, maxPoll)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (m *Committer) unwait(runID string, ch chan *store.Run) {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	ws := m.waiters[runID]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(m.waiters, runID)
	} else {
		m.waiters[runID] = ws
	}
}
