package hephaestus

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// committer applies state changes in groups: while one transaction
// commits, the next changes queue up and go together in the following one.
// With a single writer (SQLite) this turns a commit per change into a
// commit per batch, at no added latency when the system is idle.
//
// Claims go through the committer too. A queue whose worker has free slots
// leaves a standing claim; the next transaction leases ready tasks for it
// after applying its changes, so a step's successor is claimed in the very
// transaction that completes the step.
type committer struct {
	c     *Client
	reqs  chan []*commitReq // a group is never split between transactions
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
	claims map[string]*claimReq // standing claims by queue
}

// commitRetries bounds how often a batch is tried again after a store
// error (with backoff from 20 ms to 1.3 s, about 2.5 s in all).
const commitRetries = 7

type commitReq struct {
	change store.Change
	// handoff, when set, claims up to one task of that queue in the same
	// transaction: the worker that completes a step runs its successor
	// without another round trip.
	handoff string
	claimed []*store.Task
	// update is the last Update that Decide returned, for post-commit work.
	update *store.Update
	res    store.ChangeResult
	err    error
	done   chan struct{}
}

// claimReq asks for up to n tasks of a queue; the committer fills tasks and
// closes done once the transaction that served it has committed.
type claimReq struct {
	queue string
	n     int
	tasks []*store.Task
	err   error
	done  chan struct{}
}

func newCommitter(c *Client) *committer {
	return &committer{
		c: c, reqs: make(chan []*commitReq, 1024), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), claims: map[string]*claimReq{},
	}
}

// run starts the commit loops: one, or as many as the store can apply at
// once (store.ConcurrentApplier). They share the queue of changes, so a
// slow commit does not hold up the next batch.
func (m *committer) run() {
	m.start.Do(func() {
		n := 1
		if ca, ok := m.c.cfg.Store.(store.ConcurrentApplier); ok {
			n = max(1, ca.ApplyConcurrency())
		}
		var wg sync.WaitGroup
		for range n {
			wg.Go(m.loop)
		}
		go func() { wg.Wait(); close(m.done) }()
	})
}

// submit applies one change and waits for its result.
func (m *committer) submit(ctx context.Context, ch store.Change) (*commitReq, error) {
	return m.submitHandoff(ctx, ch, "")
}

// submitHandoff is submit that also claims a task of queue (when not
// empty) in the same transaction, into the result's claimed.
func (m *committer) submitHandoff(ctx context.Context, ch store.Change, queue string) (*commitReq, error) {
	m.run()
	r := &commitReq{change: ch, handoff: queue, done: make(chan struct{})}
	if ch.Decide != nil {
		decide := ch.Decide
		r.change.Decide = func(run *store.Run) (*store.Update, error) {
			u, err := decide(run)
			r.update = u
			return u, err
		}
	}
	m.sending.RLock()
	if m.closed {
		m.sending.RUnlock()
		return nil, ErrClosed
	}
	select {
	case m.reqs <- []*commitReq{r}:
	case <-ctx.Done():
		m.sending.RUnlock()
		return nil, ctx.Err()
	}
	m.sending.RUnlock()
	// Once queued, a change is applied even if ctx ends: wait for it so the
	// caller never mistakes a committed change for a lost one.
	<-r.done
	if r.err != nil {
		return r, r.err
	}
	return r, nil
}

// submitAll queues many changes, in order, and waits for all of them.
// Each group of up to MaxCommitBatch changes goes into one transaction, in
// order, so that which of two conflicting starts wins does not depend on
// how concurrent commit loops split them.
func (m *committer) submitAll(ctx context.Context, chs []store.Change) ([]*commitReq, error) {
	m.run()
	reqs := make([]*commitReq, len(chs))
	for i, ch := range chs {
		reqs[i] = &commitReq{change: ch, done: make(chan struct{})}
	}
	size := m.c.cfg.MaxCommitBatch
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

// claim leaves a standing claim for up to n tasks of queue. When now is
// set, a transaction runs for it at once even if no change is pending.
func (m *committer) claim(queue string, n int, now bool) *claimReq {
	m.run()
	r := &claimReq{queue: queue, n: n, done: make(chan struct{})}
	m.mu.Lock()
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

// withdraw removes a standing claim that no transaction has taken yet. It
// returns false when a transaction took it: its done channel will close.
func (m *committer) withdraw(r *claimReq) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[r.queue] == r {
		delete(m.claims, r.queue)
		return true
	}
	return false
}

func (m *committer) takeClaims() []*claimReq {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.claims) == 0 {
		return nil
	}
	out := make([]*claimReq, 0, len(m.claims))
	for q, r := range m.claims {
		out = append(out, r)
		delete(m.claims, q)
	}
	return out
}

func (m *committer) loop() {
	max := m.c.cfg.MaxCommitBatch
	batch := make([]*commitReq, 0, max)
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
						cr.err = ErrClosed
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

func (m *committer) apply(batch []*commitReq, claims []*claimReq) {
	if len(batch) == 0 && len(claims) == 0 {
		return
	}
	changes := make([]store.Change, len(batch))
	for i, r := range batch {
		changes[i] = r.change
	}
	cfg := &m.c.cfg
	now := cfg.Clock.Now()
	params := &store.ApplyParams{Changes: changes, Now: now}
	// Workers claim only the tasks they can run.
	handlers := m.c.claimHandlers()
	// Hand-offs claim first, one claim per queue for all of them: a worker
	// that just finished a step keeps its slot busy with a successor rather
	// than leaving it to the pool.
	var handQueues []string
	handoffs := map[string][]*commitReq{}
	for _, r := range batch {
		if r.handoff != "" {
			if handoffs[r.handoff] == nil {
				handQueues = append(handQueues, r.handoff)
			}
			handoffs[r.handoff] = append(handoffs[r.handoff], r)
		}
	}
	// A standing claim of a queue that also has hand-offs rides in the same
	// claim statement, after them.
	standing := map[string]*claimReq{}
	for _, cr := range claims {
		if handoffs[cr.queue] != nil {
			standing[cr.queue] = cr
		}
	}
	for _, q := range handQueues {
		limit := len(handoffs[q])
		if cr := standing[q]; cr != nil {
			limit += cr.n
		}
		params.Claims = append(params.Claims, store.ClaimParams{
			Queues: []string{q}, Handlers: handlers, Owner: cfg.WorkerID, Limit: limit, LeaseFor: cfg.LeaseDuration, Now: now,
		})
	}
	var rest []*claimReq
	for _, cr := range claims {
		if standing[cr.queue] == nil {
			rest = append(rest, cr)
			params.Claims = append(params.Claims, store.ClaimParams{
				Queues: []string{cr.queue}, Handlers: handlers, Owner: cfg.WorkerID, Limit: cr.n, LeaseFor: cfg.LeaseDuration, Now: now,
			})
		}
	}
	res, err := cfg.Store.Apply(context.Background(), params)
	// A store error means nothing was applied, or — when a COMMIT's answer
	// was lost with its connection and the store could not learn its
	// outcome — possibly everything. Trying again is safe either way, for
	// every kind of change (docs/architecture.md lists them): completions
	// and operations are fenced by their task's lease (the retry of one
	// that committed finds the task gone: ErrLeaseLost, and the worker
	// drops it); decisions are checked against the sequence number they
	// read (the retry is refused, and the decision made afresh from the
	// stored history); signals, resumes, cancellations and a child's
	// report carry an idempotency key (ErrDuplicateChange: applied
	// already); a create names its run id (ErrRunExists: read back below).
	retried := false
	for attempt := 1; err != nil && attempt <= commitRetries && !errors.Is(err, store.ErrClosed); attempt++ {
		retried = true
		cfg.Logger.Warn("commit failed; retrying", slog.Int("attempt", attempt), slog.Int("changes", len(batch)), slog.Any("err", err))
		m.c.emit(Event{Kind: CommitFailed, Count: len(batch), Err: err})
		<-cfg.Clock.After(time.Duration(10<<attempt) * time.Millisecond)
		res, err = cfg.Store.Apply(context.Background(), params)
	}
	if err == nil {
		for i, q := range handQueues {
			tasks := res.Claimed[i]
			hs := handoffs[q]
			for k := 0; k < len(tasks) && k < len(hs); k++ {
				hs[k].claimed = append(hs[k].claimed, tasks[k])
			}
			if cr := standing[q]; cr != nil && len(tasks) > len(hs) {
				cr.tasks = tasks[len(hs):]
			}
		}
		for i, cr := range rest {
			cr.tasks = res.Claimed[len(handQueues)+i]
		}
	}
	for i, r := range batch {
		if err != nil {
			r.err = err
			continue
		}
		r.res = res.Changes[i]
		r.err = res.Changes[i].Err
		// A create whose first commit did happen, though its outcome was
		// lost with the connection, finds its own run on the retry.
		if retried && r.change.Create != nil && errors.Is(r.err, store.ErrRunExists) {
			if run, gerr := cfg.Store.GetRun(context.Background(), r.change.Create.ID); gerr == nil {
				r.res, r.err = store.ChangeResult{Run: run}, nil
			}
		}
	}
	if err != nil {
		for _, cr := range claims {
			cr.err = err
		}
	}
	if err == nil {
		claimed := map[int64]bool{}
		for _, r := range batch {
			for _, t := range r.claimed {
				claimed[t.ID] = true
			}
		}
		for _, cr := range claims {
			for _, t := range cr.tasks {
				claimed[t.ID] = true
			}
		}
		m.c.afterCommit(batch, claimed, now)
	} else {
		cfg.Logger.Error("commit failed", slog.Int("changes", len(batch)), slog.Any("err", err))
	}
	for _, r := range batch {
		close(r.done)
	}
	for _, cr := range claims {
		close(cr.done)
	}
}

// close stops the loop after applying what is queued.
func (m *committer) close() {
	m.once.Do(func() {
		m.sending.Lock() // waits for changes being queued
		m.closed = true
		m.sending.Unlock()
		close(m.stop)
		m.start.Do(func() { close(m.done) })
	})
	<-m.done
}
