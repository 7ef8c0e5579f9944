package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// applyAttempts bounds the transactions one Apply runs when the earlier
// ones failed before their COMMIT was sent (deadlock, broken connection).
const applyAttempts = 4

var (
	errRunExists = store.ErrRunExists
	// errFallback: the pipelined batch went wrong; undo it and apply the
	// changes one by one.
	errFallback = errors.New("fall back to one change at a time")
)

// Apply performs the changes in one transaction (group commit); see the
// package documentation for how.
func (s *Store) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if len(p.Changes) == 0 && len(p.Claims) == 0 {
		return &store.ApplyResult{Changes: []store.ChangeResult{}, Claimed: [][]*store.Task{}}, nil
	}
	if p.Now.IsZero() {
		return nil, errors.New("apply: Now is zero")
	}
	claims := make([]store.ClaimParams, len(p.Claims))
	for i := range p.Claims {
		c := p.Claims[i]
		c.Now = p.Now
		if err := checkClaim(&c); err != nil {
			return nil, fmt.Errorf("apply: claim %d: %w", i, err)
		}
		claims[i] = c
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	backoff := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, sent, err := s.applyOnce(ctx, p, claims)
		if err == nil {
			return res, nil
		}
		// A transaction whose COMMIT was never sent did not commit: run it
		// again after a failure that may pass. Once COMMIT is sent, the
		// outcome is unknown: never again.
		if sent || attempt == applyAttempts || !transient(err) || ctx.Err() != nil || s.check() != nil {
			return nil, s.fail("apply", err)
		}
		s.noteFailure(err)
		if !sleep(ctx, jitter(backoff)) {
			return nil, s.fail("apply", err)
		}
		backoff *= 4
	}
}

// applyOnce runs one transaction. sent reports whether its COMMIT was
// sent, after which a failure leaves the outcome unknown.
func (s *Store) applyOnce(ctx context.Context, p *store.ApplyParams, claims []store.ClaimParams) (_ *store.ApplyResult, sent bool, _ error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	conn := pc.Conn()
	defer func() {
		// A transaction left open by a failure: roll it back so that the
		// connection can serve again (the pool drops it if that fails).
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
				_ = conn.Close(rctx)
			}
			cancel()
		}
		pc.Release()
	}()
	a := &applier{s: s, conn: conn, p: p, claims: claims, now: truncate(p.Now)}
	return a.run(ctx)
}

// applier runs the changes of one Apply inside its transaction.
//
// It keeps the runs it deals with in memory: those that updates name are
// loaded and locked first, then each change is decided against the
// in-memory state and its writes are queued in a pipeline. A create's
// outcome is known only when its statement ran (the business key may be
// held by a run this transaction does not see); so a change that names a
// run whose creation is still in the pipeline sends the pipeline first.
type applier struct {
	s      *Store
	conn   *pgx.Conn
	p      *store.ApplyParams
	claims []store.ClaimParams
	now    time.Time

	// loaded is the state as locked at the start: runs by id (a nil run:
	// absent), fenced tasks by id.
	loaded map[string]*runState
	fenced map[int64]fencedTask

	// The state as the changes so far left it.
	slow    bool
	runs    map[string]*runState
	gone    map[int64]bool // fenced tasks deleted by earlier changes
	pending map[string]*op // creates sent but not yet read, by run id
	ops     []*op          // by change; nil when refused at once
	results []store.ChangeResult
	claimed [][]*store.Task
	pl      pipeline
}

type runState struct {
	run *store.Run // nil: the run does not exist
	key *string    // its unique_key
	// unknown: a run with this id exists, but it is not loaded.
	unknown bool
}

type fencedTask struct {
	runID string
	token int64
	owned bool
	kind  store.TaskKind
	step  string
	index int
}

// op is the write of one change.
type op struct {
	i      int
	create bool
	id     string
	key    *string // for a create: the business key it takes
	fenced bool
	sql    string
	args   []any
	res    store.ChangeResult
	effect func()    // applies the change to the in-memory state
	prev   *runState // a create's entry before it
	// Read back.
	inserted, fenceDeleted, runUpdated int64
	ids                                []int64
	// retry: a create whose conflict vanished before it could be named.
	retry bool
}

func (a *applier) run(ctx context.Context) (*store.ApplyResult, bool, error) {
	if err := a.begin(ctx); err != nil {
		return nil, false, err
	}
	err := a.applyAll(ctx)
	if errors.Is(err, errFallback) {
		if _, err := a.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT apply"); err != nil {
			return nil, false, err
		}
		a.slow = true
		err = a.applyAll(ctx)
	}
	if err != nil {
		return nil, false, err
	}
	// Wake other processes for tasks ready now that this commit did not
	// lease itself.
	leased := map[int64]bool{}
	for _, ts := range a.claimed {
		for _, t := range ts {
			leased[t.ID] = true
		}
	}
	var queues []string
	for _, r := range a.results {
		for _, t := range r.Tasks {
			if r.Err == nil && !t.ReadyAt.After(a.now) && !leased[t.ID] && !slices.Contains(queues, t.Queue) {
				queues = append(queues, t.Queue)
			}
		}
	}
	for _, q := range queues {
		a.pl.exec(nil, "SELECT pg_notify($1, $2)", a.s.channel, q)
	}
	a.pl.commit()
	// From here on a failure leaves the outcome unknown; ctx no longer
	// cancels (the bound of Config.Timeout remains).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.s.timeout)
	defer cancel()
	if err := a.pl.send(cctx, a.conn); err != nil {
		return nil, true, fmt.Errorf("commit: %w", err)
	}
	return &store.ApplyResult{Changes: a.results, Claimed: a.claimed}, true, nil
}

// begin starts the transaction and locks the runs that updates name and
// the tasks that fences name, in id order (so that concurrent Applies
// cannot deadlock on them). The savepoint lets a failed pipeline be
// undone without losing the locks.
func (a *applier) begin(ctx context.Context) error {
	a.pl.exec(nil, "BEGIN ISOLATION LEVEL READ COMMITTED")
	var ids []string
	var fences []int64
	for _, c := range a.p.Changes {
		if c.Create == nil && !slices.Contains(ids, c.RunID) {
			ids = append(ids, c.RunID)
		}
		if c.Create == nil && c.Fence != nil && !slices.Contains(fences, c.Fence.TaskID) {
			fences = append(fences, c.Fence.TaskID)
		}
	}
	a.loaded = make(map[string]*runState, len(ids))
	for _, id := range ids {
		a.loaded[id] = &runState{}
	}
	if len(ids) > 0 {
		a.pl.query(nil, func(rows pgx.Rows) error {
			for rows.Next() {
				var key *string
				r, err := scanRun(rows, &key)
				if err != nil {
					return err
				}
				a.loaded[r.ID] = &runState{run: r, key: key}
			}
			return rows.Err()
		}, a.s.q.loadRuns, ids)
	}
	a.fenced = make(map[int64]fencedTask, len(fences))
	if len(fences) > 0 {
		a.pl.query(nil, func(rows pgx.Rows) error {
			for rows.Next() {
				var id int64
				var ft fencedTask
				var kind string
				if err := rows.Scan(&id, &ft.runID, &ft.token, &ft.owned, &kind, &ft.step, &ft.index); err != nil {
					return err
				}
				ft.kind = store.TaskKind(kind)
				a.fenced[id] = ft
			}
			return rows.Err()
		}, a.s.q.loadFenced, fences)
	}
	a.pl.exec(nil, "SAVEPOINT apply")
	if len(ids) == 0 {
		return nil // nothing to wait for: the writes go in the same round trip
	}
	return a.pl.send(ctx, a.conn)
}

// applyAll applies every change, then the claims. In the fast mode the
// writes of all changes go in one pipeline; errFallback asks for the slow
// mode, where each change is sent alone in a savepoint, so that a
// statement's failure refuses that change only.
func (a *applier) applyAll(ctx context.Context) error {
	a.runs = make(map[string]*runState, len(a.loaded)+len(a.p.Changes))
	for id, st := range a.loaded {
		a.runs[id] = st
	}
	a.gone = map[int64]bool{}
	a.pending = map[string]*op{}
	a.ops = make([]*op, len(a.p.Changes))
	a.results = make([]store.ChangeResult, len(a.p.Changes))
	for i := range a.p.Changes {
		if err := a.change(ctx, i); err != nil {
			return err
		}
	}
	a.claimed = make([][]*store.Task, len(a.claims))
	for i := range a.claims {
		sql, args := claimArgs(&a.s.q, &a.claims[i])
		a.pl.query(nil, func(rows pgx.Rows) error {
			ts, err := collectTasks(rows)
			a.claimed[i] = ts
			return err
		}, sql, args...)
	}
	if err := a.flush(ctx); err != nil {
		return err
	}
	for i, o := range a.ops {
		if o != nil {
			a.results[i] = o.res
		}
	}
	return nil
}

func (a *applier) change(ctx context.Context, i int) error {
	c := &a.p.Changes[i]
	id := c.RunID
	if c.Create != nil {
		id = c.Create.ID
	}
	// The outcome of a create of this run decides this change.
	if _, ok := a.pending[id]; ok {
		if err := a.flush(ctx); err != nil {
			return err
		}
	}
	if st := a.runs[id]; st != nil && st.unknown {
		if err := a.flush(ctx); err != nil {
			return err
		}
		if err := a.load(ctx, id); err != nil {
			return err
		}
	}
	if !a.slow {
		o, refused := a.plan(i)
		if o == nil {
			a.ops[i], a.results[i] = nil, refused
			return nil
		}
		o.effect()
		a.queue(o)
		return nil
	}
	for tries := 0; ; tries++ {
		o, refused := a.plan(i)
		if o == nil {
			a.ops[i], a.results[i] = nil, refused
			return nil
		}
		a.pl.exec(nil, "SAVEPOINT change")
		a.queue(o)
		a.pl.exec(nil, "RELEASE SAVEPOINT change")
		err := a.flush(ctx)
		var oe *opError
		switch {
		case err == nil && o.retry && tries < 3:
			continue
		case err == nil && o.retry:
			return fmt.Errorf("create run %s: the business id holder keeps changing", o.id)
		case err == nil:
			if o.res.Err == nil {
				o.effect()
			}
			return nil
		case errors.As(err, &oe) && oe.op == o && !transient(oe.err):
			// This change alone is refused.
			if _, err := a.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT change; RELEASE SAVEPOINT change"); err != nil {
				return err
			}
			verb := "update"
			if o.create {
				verb = "create"
			}
			o.res = store.ChangeResult{Err: fmt.Errorf("%s run %s: %w", verb, o.id, oe.err)}
			return nil
		default:
			return err
		}
	}
}

// load locks and reads one run.
func (a *applier) load(ctx context.Context, id string) error {
	st := &runState{}
	a.pl.query(nil, func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanRun(rows, &st.key)
			if err != nil {
				return err
			}
			st.run = r
		}
		return rows.Err()
	}, a.s.q.loadRuns, []string{id})
	if err := a.pl.send(ctx, a.conn); err != nil {
		return err
	}
	a.runs[id] = st
	return nil
}

func (a *applier) queue(o *op) {
	a.ops[o.i] = o
	if o.create {
		a.pending[o.id] = o
		a.pl.queryRow(o, func(row pgx.Row) error { return row.Scan(&o.inserted, &o.ids) }, o.sql, o.args...)
		return
	}
	a.pl.queryRow(o, func(row pgx.Row) error { return row.Scan(&o.fenceDeleted, &o.runUpdated, &o.ids) }, o.sql, o.args...)
}

// flush sends the pipeline and reads back the outcome of the changes in
// it. Creates that met a conflict learn who holds the id.
func (a *applier) flush(ctx context.Context) error {
	ops := a.pl.changeOps()
	if err := a.pl.send(ctx, a.conn); err != nil {
		var oe *opError
		if !a.slow && errors.As(err, &oe) && oe.op != nil && !transient(oe.err) {
			return errFallback
		}
		return err
	}
	var conflicts []*op
	for _, o := range ops {
		if o.create {
			delete(a.pending, o.id)
			if o.inserted == 0 {
				conflicts = append(conflicts, o)
				continue
			}
		} else if (o.fenced && o.fenceDeleted != 1) || o.runUpdated != 1 {
			return fmt.Errorf("run %s changed under its lock", o.id)
		}
		if len(o.ids) != len(o.res.Tasks) {
			return fmt.Errorf("run %s: %d task ids for %d tasks", o.id, len(o.ids), len(o.res.Tasks))
		}
		for k, id := range o.ids {
			o.res.Tasks[k].ID = id
		}
	}
	if len(conflicts) == 0 {
		return nil
	}
	type holder struct{ same, other *string }
	found := make([]holder, len(conflicts))
	for k, o := range conflicts {
		a.pl.queryRow(nil, func(row pgx.Row) error { return row.Scan(&found[k].same, &found[k].other) }, a.s.q.lookup, o.id, o.key)
	}
	if err := a.pl.send(ctx, a.conn); err != nil {
		return err
	}
	for k, o := range conflicts {
		o.retry = false
		switch h := found[k]; {
		case h.same != nil:
			o.res = refused(fmt.Errorf("create run %s: %w", o.id, errRunExists))
			a.runs[o.id] = &runState{unknown: true}
		case h.other != nil:
			o.res = refused(&store.DuplicateRunError{BusinessID: o.res.Run.BusinessID, ExistingRunID: *h.other})
			a.restore(o)
		case a.slow:
			// The holder finished (or went) between the conflict and the
			// lookup: the id is free now; try again.
			o.retry = true
		default:
			return errFallback
		}
	}
	return nil
}

// restore undoes the in-memory effect of a create that did not happen.
func (a *applier) restore(o *op) {
	if a.slow {
		return // the effect was not applied
	}
	if o.prev == nil {
		delete(a.runs, o.id)
	} else {
		a.runs[o.id] = o.prev
	}
}

func refused(err error) store.ChangeResult { return store.ChangeResult{Err: err} }

// plan decides change i against the in-memory state. It returns the write
// to make, or nil and the change's (refused) result.
func (a *applier) plan(i int) (*op, store.ChangeResult) {
	c := &a.p.Changes[i]
	if c.Create != nil {
		return a.planCreate(i, c.Create)
	}
	return a.planUpdate(i, c)
}

func (a *applier) planCreate(i int, n *store.NewRun) (*op, store.ChangeResult) {
	if n.ID == "" {
		return nil, refused(errors.New("create run: id is empty"))
	}
	r := &store.Run{
		ID: n.ID, Workflow: n.Workflow, Version: n.Version, Kind: n.Kind, Status: n.Status,
		Input: orNil(n.Input), Output: orNil(n.Output), Error: n.Error, BusinessID: n.BusinessID,
		KeyScope: n.KeyScope, ParentID: n.ParentID, State: orNil(n.State),
		Seq: int64(len(n.History)), CreatedAt: a.now, UpdatedAt: a.now,
	}
	if len(n.Tags) > 0 {
		r.Tags = n.Tags
	}
	if len(n.Metadata) > 0 {
		r.Metadata = n.Metadata
	}
	if r.Status == "" {
		r.Status = hephtype.StatusPending
	}
	if !r.Status.Valid() {
		return nil, refused(fmt.Errorf("create run %s: unknown status %q", r.ID, r.Status))
	}
	if r.BusinessID != "" && r.KeyScope == "" {
		r.KeyScope = businesskey.ScopeActive
	}
	if r.KeyScope != "" && !r.KeyScope.Valid() {
		return nil, refused(fmt.Errorf("create run %s: unknown key scope %q", r.ID, r.KeyScope))
	}
	if r.Status.Terminal() {
		r.FinishedAt = a.now
	}
	if err := validateTasks(n.Tasks); err != nil {
		return nil, refused(fmt.Errorf("create run %s: %w", r.ID, err))
	}
	meta, err := metadataArg(r.Metadata)
	if err != nil {
		return nil, refused(fmt.Errorf("create run %s: metadata: %w", r.ID, err))
	}
	if st := a.runs[r.ID]; st != nil && st.run != nil {
		return nil, refused(fmt.Errorf("create run %s: %w", r.ID, errRunExists))
	}
	tags := r.Tags
	if tags == nil {
		tags = []string{}
	}
	key := uniqueKey(r)
	args := []any{r.ID, r.Workflow, int64(r.Version), string(r.Kind), string(r.Status), jsonArg(r.Input),
		jsonArg(r.Output), r.Error, nullString(r.BusinessID), string(r.KeyScope), key, r.ParentID, tags, meta,
		jsonArg(r.State), r.Seq, a.now, nullTime(r.FinishedAt)}
	args = append(args, eventArgs(n.History)...)
	args = append(args, taskArgs(n.Tasks, a.now)...)
	o := &op{i: i, create: true, id: r.ID, key: key, sql: a.s.q.createRun, args: args, prev: a.runs[r.ID],
		res: store.ChangeResult{Run: r, Tasks: newTasks(r, n.Tasks, a.now)}}
	o.effect = func() { a.runs[r.ID] = &runState{run: r, key: key} }
	return o, store.ChangeResult{}
}

// uniqueKey is the value of the unique_key column of r: its workflow and
// business id while they must stay unique, else nil (NULL). Business ids
// are unique per workflow.
func uniqueKey(r *store.Run) *string {
	if r.BusinessID == "" {
		return nil
	}
	switch r.KeyScope {
	case businesskey.ScopeForever:
	case businesskey.ScopeActive:
		if r.Status.Terminal() {
			return nil
		}
	default:
		return nil
	}
	k := r.Workflow + "\x1f" + r.BusinessID
	return &k
}

func (a *applier) planUpdate(i int, c *store.Change) (*op, store.ChangeResult) {
	if c.Decide == nil {
		return nil, refused(fmt.Errorf("update run %s: no Decide function", c.RunID))
	}
	st := a.runs[c.RunID]
	if st == nil || st.run == nil {
		return nil, refused(fmt.Errorf("update run %s: %w", c.RunID, store.ErrRunNotFound))
	}
	run := st.run
	var fenceID, fenceToken *int64
	if c.Fence != nil {
		ft, ok := a.fenced[c.Fence.TaskID]
		if !ok || a.gone[c.Fence.TaskID] || !ft.owned || ft.token != c.Fence.Token || ft.runID != run.ID {
			return nil, refused(fmt.Errorf("update run %s: task %d: %w", run.ID, c.Fence.TaskID, store.ErrLeaseLost))
		}
		fenceID, fenceToken = &c.Fence.TaskID, &c.Fence.Token
	}
	given := *run // Decide may scribble on its copy
	u, err := c.Decide(&given)
	if err != nil {
		return nil, refused(err)
	}
	if u == nil {
		u = &store.Update{}
	}
	if u.Status != "" && !u.Status.Valid() {
		return nil, refused(fmt.Errorf("update run %s: unknown status %q", run.ID, u.Status))
	}
	if err := validateTasks(u.Tasks); err != nil {
		return nil, refused(fmt.Errorf("update run %s: %w", run.ID, err))
	}

	next := *run
	if u.Status != "" {
		next.Status = u.Status
	}
	if u.State != nil {
		next.State = orNil(u.State)
	}
	if u.Output != nil {
		next.Output = orNil(u.Output)
	}
	if u.Error != "" {
		next.Error = u.Error
	}
	if u.Published != nil {
		next.Published = orNil(u.Published)
	}
	next.Seq = run.Seq + int64(len(u.History))
	next.UpdatedAt = a.now
	if next.Status.Terminal() && next.FinishedAt.IsZero() {
		next.FinishedAt = a.now
	}
	newKey := st.key
	if newKey != nil && next.KeyScope == businesskey.ScopeActive && next.Status.Terminal() {
		newKey = nil
	}

	n := len(u.Cancel)
	ckinds, csteps, cidx := make([]string, n), make([]string, n), make([]int64, n)
	for k, m := range u.Cancel {
		ckinds[k], csteps[k], cidx[k] = string(m.Kind), m.Step, int64(m.Index)
	}
	args := []any{run.ID, fenceID, fenceToken, ckinds, csteps, cidx,
		string(next.Status), jsonArg(next.Output), next.Error, jsonArg(next.State), jsonArg(next.Published),
		next.Seq, a.now, nullTime(next.FinishedAt), newKey, run.Seq}
	args = append(args, eventArgs(u.History)...)
	args = append(args, next.Workflow, int64(next.Version))
	args = append(args, taskArgs(u.Tasks, a.now)...)
	o := &op{i: i, id: run.ID, fenced: c.Fence != nil, sql: a.s.q.updateRun, args: args,
		res: store.ChangeResult{Run: &next, Tasks: newTasks(&next, u.Tasks, a.now)}}
	o.effect = func() {
		a.runs[run.ID] = &runState{run: &next, key: newKey}
		if c.Fence != nil {
			a.gone[c.Fence.TaskID] = true
		}
		// Tasks this change cancels no longer fence later changes.
		for id, ft := range a.fenced {
			if ft.runID != run.ID {
				continue
			}
			for _, m := range u.Cancel {
				if (m.Kind == "" || m.Kind == ft.kind) && (m.Step == "" || m.Step == ft.step) && (m.Index < 0 || m.Index == ft.index) {
					a.gone[id] = true
				}
			}
		}
	}
	return o, store.ChangeResult{}
}

// newTasks are the tasks a change enqueues, as stored (ids come later).
func newTasks(r *store.Run, ts []store.NewTask, now time.Time) []*store.Task {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*store.Task, len(ts))
	for i, n := range ts {
		out[i] = &store.Task{
			RunID: r.ID, Queue: n.Queue, Kind: n.Kind, Workflow: r.Workflow,
			Version: r.Version, Step: n.Step, Index: n.Index, Attempt: n.Attempt,
			Payload: orNil(n.Payload), Item: orNil(n.Item), Priority: n.Priority, ReadyAt: readyAt(n, now),
			CreatedAt: now,
		}
	}
	return out
}

func validateTasks(ts []store.NewTask) error {
	for i, t := range ts {
		if t.Queue == "" {
			return fmt.Errorf("task %d: queue is empty", i)
		}
		if t.Kind == "" {
			return fmt.Errorf("task %d: kind is empty", i)
		}
	}
	return nil
}

// orNil returns nil for an empty JSON value, as the database stores it.
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// pipeline queues statements and sends them in one round trip.
type pipeline struct {
	b      pgx.Batch
	read   []func(pgx.BatchResults) error
	owners []*op // the change each statement writes, or nil
}

// opError is the failure of one statement of a pipeline.
type opError struct {
	op  *op // nil for statements of no change
	err error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func (p *pipeline) add(o *op, read func(pgx.BatchResults) error, sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.read = append(p.read, read)
	p.owners = append(p.owners, o)
}

func (p *pipeline) exec(o *op, sql string, args ...any) {
	p.add(o, func(br pgx.BatchResults) error { _, err := br.Exec(); return err }, sql, args...)
}

func (p *pipeline) commit() {
	p.add(nil, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("the transaction was rolled back (%s)", tag)
		}
		return err
	}, "COMMIT")
}

func (p *pipeline) queryRow(o *op, scan func(pgx.Row) error, sql string, args ...any) {
	p.add(o, func(br pgx.BatchResults) error { return scan(br.QueryRow()) }, sql, args...)
}

func (p *pipeline) query(o *op, each func(pgx.Rows) error, sql string, args ...any) {
	p.add(o, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		return each(rows)
	}, sql, args...)
}

// changeOps lists the changes written by the queued statements.
func (p *pipeline) changeOps() []*op {
	var out []*op
	for _, o := range p.owners {
		if o != nil && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// send runs the queued statements and empties the pipeline. The error of
// a statement comes as an *opError naming its change.
func (p *pipeline) send(ctx context.Context, conn *pgx.Conn) error {
	if len(p.read) == 0 {
		return nil
	}
	br := conn.SendBatch(ctx, &p.b)
	var err error
	for i, read := range p.read {
		if err = read(br); err != nil {
			err = &opError{op: p.owners[i], err: err}
			break
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	*p = pipeline{}
	return err
}

// jitter spreads d over ±25%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.75 + 0.5*rand.Float64()))
}

// sleep waits for d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
