package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/store"
)

var errRunExists = store.ErrRunExists

// Apply performs the changes in one write transaction (group commit).
//
// A change writes nothing until it is accepted: Decide sees the run as
// stored, a change's idempotency key is looked up before it writes, and
// the first write of an update, the deletion of the fenced task, matches
// the task only while its lease is held. A fenced create reads its fence
// first and deletes it once the run is inserted (the writer is alone in
// the transaction, so the lease cannot go in between). So a refused change
// needs no savepoint to be undone alone, and an error after a change's
// first write is a failure of the store, which rolls the whole transaction
// back.
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
	for i := range p.Claims {
		c := p.Claims[i]
		c.Now = p.Now
		if err := checkClaim(&c); err != nil {
			return nil, fmt.Errorf("apply: claim %d: %w", i, err)
		}
	}
	results := make([]store.ChangeResult, len(p.Changes))
	claimed := make([][]*store.Task, len(p.Claims))
	now := truncate(p.Now)
	err := s.withWriter(ctx, func(w *wconn) error {
		a := &applier{w: w, now: now, nowUS: micros(now)}
		defer func() { w.fresh = false }()
		err := w.tx(func() error {
			if len(p.Changes) > 0 {
				if err := w.checkRuns(); err != nil {
					return err
				}
				w.fresh = true
			}
			for i := range p.Changes {
				if err := ctx.Err(); err != nil {
					return err
				}
				res, err := a.change(&p.Changes[i])
				if err != nil {
					return err
				}
				results[i] = res
			}
			if err := a.flush(); err != nil {
				return err
			}
			for i := range p.Claims {
				c := p.Claims[i]
				c.Now = p.Now
				tasks, err := claim(w, &c)
				if err != nil {
					return fmt.Errorf("claim: %w", err)
				}
				claimed[i] = tasks
			}
			return ctx.Err()
		})
		if err != nil {
			w.runs.clear()
			return err
		}
		for id, st := range a.changed {
			w.runs.put(id, st)
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("apply", err)
	}
	return &store.ApplyResult{Changes: results, Claimed: claimed}, nil
}

// applier runs the changes of one Apply inside its transaction.
//
// A change's fence and its update of the run go to the database at once,
// so that later changes of the same Apply see them. Its history entries
// and new tasks wait in the applier and go in a few multi-row statements
// after the last change (tasks earlier, when a cancel must see them):
// nothing in a change reads them back.
type applier struct {
	w     *wconn
	now   time.Time
	nowUS int64

	// changed holds the runs this Apply created or updated, as they will
	// be stored; they go to the cache once the transaction commits.
	changed map[string]*runState
	// keys holds the idempotency keys this Apply recorded, by run: their
	// history entries wait in events.
	keys map[runKey]struct{}

	events []pendingEvent
	tasks  []pendingTask // without ids until flushTasks

	// gen is the version generation, read by the first create that
	// carries one (0: not read yet); nothing in the Apply changes it.
	gen int64
}

// pendingTask is a task to insert, with its run's tags and metadata as
// stored.
type pendingTask struct {
	*store.Task
	attrs attrCols
}

// change applies one change. A refused change comes back in the result,
// having written nothing; the error is a failure of the store.
func (a *applier) change(c *store.Change) (store.ChangeResult, error) {
	if c.Create != nil {
		return a.create(c.Create, c.Fence)
	}
	return a.update(c)
}

func refused(err error) (store.ChangeResult, error) { return store.ChangeResult{Err: err}, nil }

// create inserts a new run. A fenced create checks its fence first (a
// lost lease is reported before anything else), and deletes it once the
// run is inserted: a create refused for another reason leaves it.
func (a *applier) create(n *store.NewRun, fence *store.Lease) (store.ChangeResult, error) {
	if fence != nil {
		held, err := a.fenceHeld(fence)
		if err != nil {
			return store.ChangeResult{}, err
		}
		if !held {
			return refused(fmt.Errorf("create run %s: task %d: %w", n.ID, fence.TaskID, store.ErrLeaseLost))
		}
	}
	if n.VersionGen > 0 {
		if a.gen == 0 {
			if _, err := a.w.adhocRow("SELECT n FROM version_generation", 1); err != nil {
				return store.ChangeResult{}, fmt.Errorf("read the version generation: %w", err)
			}
			a.gen = vInt(a.w.dest[0])
		}
		if a.gen != n.VersionGen {
			return refused(fmt.Errorf("create run %s: %w: its version was chosen from generation %d, the store is at %d",
				n.ID, store.ErrVersionPolicyChanged, n.VersionGen, a.gen))
		}
	}
	r, err := store.RunOf(n, a.now)
	if err != nil {
		return refused(err)
	}
	tags, err := tagsArg(r.Tags)
	if err != nil {
		return refused(fmt.Errorf("create run %s: tags: %w", r.ID, err))
	}
	meta, err := metadataArg(r.Metadata)
	if err != nil {
		return refused(fmt.Errorf("create run %s: metadata: %w", r.ID, err))
	}
	key := uniqueKey(r)
	rowid, refusal, err := a.insertRun(r, key, tags, meta)
	if err != nil || refusal != nil {
		return store.ChangeResult{Err: refusal}, err
	}
	if fence != nil {
		if err := a.deleteFence(fence); err != nil {
			return store.ChangeResult{}, err
		}
	}
	st := &runState{run: *cloneRun(r), key: key, attrs: attrCols{tags, meta}, rowid: rowid}
	if err := st.storedForm(); err != nil {
		return store.ChangeResult{}, fmt.Errorf("insert run: %w", err)
	}
	a.setChanged(st)
	a.insertEvents(r.ID, 0, n.History, "")
	return store.ChangeResult{Run: r, Tasks: a.insertTasks(r, st.attrs, n.Tasks)}, nil
}

// insertRun inserts the run r with its unique key and its tags and
// metadata as stored, and returns its rowid; or the refusal of a run
// whose id, or business key, another run holds.
func (a *applier) insertRun(r *store.Run, key, tags, meta any) (rowid int64, refusal, err error) {
	sattrs, err := attrsArg(r.SearchAttributes)
	if err != nil {
		return 0, fmt.Errorf("create run %s: %w", r.ID, err), nil
	}
	w := a.w
	w.arg(r.ID)
	w.arg(r.Workflow)
	w.arg(int64(r.Version))
	w.arg(string(r.Kind))
	w.arg(string(r.Status))
	w.arg(jsonArg(r.Input))
	w.arg(jsonArg(r.Output))
	w.arg(r.Error)
	w.arg(nullString(r.BusinessID))
	w.arg(string(r.KeyScope))
	w.arg(key)
	w.arg(r.ParentID)
	w.arg(tags)
	w.arg(meta)
	w.arg(jsonArg(r.State))
	w.arg(r.Seq)
	w.arg(a.nowUS)
	w.arg(a.nowUS)
	w.arg(nullMicros(r.FinishedAt))
	w.arg(r.ConcurrencyKey)
	w.arg(r.TraceContext)
	w.arg(r.BuildID)
	w.arg(nullMicros(r.Deadline))
	w.arg(sattrs)
	// A conflict on the id fails the statement, which writes nothing; a
	// conflict on the business key does nothing.
	res, err := w.exec(qInsertRun)
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			return 0, fmt.Errorf("create run %s: %w", r.ID, errRunExists), nil
		}
		return 0, nil, fmt.Errorf("insert run: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, nil, fmt.Errorf("insert run: %w", err)
	} else if n == 0 {
		holder, err := a.holder(key)
		if err != nil {
			return 0, nil, err
		}
		if holder == "" {
			return 0, nil, fmt.Errorf("find business id holder: no run holds %q", key)
		}
		return 0, &store.DuplicateRunError{BusinessID: r.BusinessID, ExistingRunID: holder}, nil
	}
	rowid, err = res.LastInsertId()
	if err != nil {
		return 0, nil, fmt.Errorf("insert run: %w", err)
	}
	return rowid, nil, nil
}

// holder returns the run that holds a unique key, or "".
func (a *applier) holder(key any) (string, error) {
	w := a.w
	w.arg(key)
	rows, err := w.query(qHolder)
	if err != nil {
		return "", fmt.Errorf("find business id holder: %w", err)
	}
	ok, err := w.row(rows, 1)
	if err != nil {
		return "", fmt.Errorf("find business id holder: %w", err)
	}
	if !ok {
		return "", nil
	}
	return vString(w.dest[0]), nil
}

// sameKey reports whether two values of the unique_key column are the
// same: both NULL, or the same text (as the driver read it or as
// uniqueKey made it).
func sameKey(a, b any) bool {
	text := func(v any) (string, bool) {
		switch x := v.(type) {
		case string:
			return x, true
		case []byte:
			return string(x), true
		}
		return "", v == nil
	}
	as, aok := text(a)
	bs, bok := text(b)
	return aok && bok && (a == nil) == (b == nil) && as == bs
}

// uniqueKey is the value of the unique_key column of r: its workflow and
// business id while they must stay unique, else nil (NULL). Business ids
// are unique per workflow.
func uniqueKey(r *store.Run) any {
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
	return r.Workflow + "\x1f" + r.BusinessID
}

// run returns the run id as stored: as an earlier change of this Apply
// left it, as the cache has it, or read from the database. It returns nil
// when there is no such run.
func (a *applier) run(id string) (*runState, error) {
	if st := a.changed[id]; st != nil {
		return st, nil
	}
	if st := a.w.runs.get(id); st != nil {
		return st, nil
	}
	w := a.w
	w.arg(id)
	rows, err := w.query(qLoadRun)
	if err != nil {
		return nil, err
	}
	ok, err := w.row(rows, numRunCols+2)
	if err != nil || !ok {
		return nil, err
	}
	run, err := runFromValues(w.dest[1:])
	if err != nil {
		return nil, err
	}
	st := &runState{run: *run, rowid: vInt(w.dest[0]), key: w.dest[numRunCols+1], cond: w.dest[1+runCondCol],
		attrs: attrCols{tags: vString(w.dest[1+runTagsCol]), meta: w.dest[1+runTagsCol+1]}}
	a.w.runs.put(id, st) // as committed: no change of this Apply touched it
	return st, nil
}

func (a *applier) setChanged(st *runState) {
	if a.changed == nil {
		a.changed = make(map[string]*runState)
	}
	a.changed[st.run.ID] = st
}

// refuse refuses a change of a run for err, or for the lost lease when
// the change was fenced: a lost lease comes first.
func (a *applier) refuse(c *store.Change, runID string, err error) (store.ChangeResult, error) {
	if c.Fence != nil {
		held, ferr := a.fenceHeld(c.Fence)
		if ferr != nil {
			return store.ChangeResult{}, ferr
		}
		if !held {
			return refused(fmt.Errorf("update run %s: task %d: %w", runID, c.Fence.TaskID, store.ErrLeaseLost))
		}
	}
	return refused(err)
}

// fenceHeld tells whether the lease l is held: its task exists, leased
// with its token. The task may be of any run.
func (a *applier) fenceHeld(l *store.Lease) (bool, error) {
	w := a.w
	w.arg(l.TaskID)
	w.arg(l.Token)
	rows, err := w.query(qFenceHeld)
	if err != nil {
		return false, fmt.Errorf("check fence: %w", err)
	}
	held, err := w.row(rows, 1)
	if err != nil {
		return false, fmt.Errorf("check fence: %w", err)
	}
	return held, nil
}

// deleteFence deletes the task of a lease known to be held.
func (a *applier) deleteFence(l *store.Lease) error {
	n, err := a.fence(l)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("fence: task %d: the lease went within the transaction", l.TaskID)
	}
	return nil
}

// fence deletes the task of the lease l if the lease is held, and returns
// the number of tasks it deleted (0 or 1).
func (a *applier) fence(l *store.Lease) (int64, error) {
	w := a.w
	w.arg(l.TaskID)
	w.arg(l.Token)
	res, err := w.exec(qFence)
	if err != nil {
		return 0, fmt.Errorf("fence: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("fence: %w", err)
	}
	return n, nil
}

// runKey is an idempotency key of a run.
type runKey struct{ runID, key string }

// keySeen tells whether the history of run runID holds key, as stored or
// as an earlier change of this Apply recorded it.
func (a *applier) keySeen(runID, key string) (bool, error) {
	if _, ok := a.keys[runKey{runID, key}]; ok {
		return true, nil
	}
	w := a.w
	w.arg(runID)
	w.arg(key)
	rows, err := w.query(qKeySeen)
	if err != nil {
		return false, fmt.Errorf("look up key: %w", err)
	}
	seen, err := w.row(rows, 1)
	if err != nil {
		return false, fmt.Errorf("look up key: %w", err)
	}
	return seen, nil
}

// update decides a change from the run as stored and writes it. A keyed
// change first looks its key up, and is refused as a duplicate without
// calling Decide. Decide runs before the fence is checked: the fenced
// task is deleted by a statement that matches it only while the lease is
// held, so the check and the first write are one. A change refused before
// that (by its key, by Decide) checks the fence by a read, so that a lost
// lease is still what it reports.
func (a *applier) update(c *store.Change) (store.ChangeResult, error) {
	if c.Decide == nil {
		return refused(fmt.Errorf("update run %s: no Decide function", c.RunID))
	}
	st, err := a.run(c.RunID)
	if err != nil {
		return store.ChangeResult{}, fmt.Errorf("load run: %w", err)
	}
	if st == nil {
		return refused(fmt.Errorf("update run %s: %w", c.RunID, store.ErrRunNotFound))
	}
	run := &st.run
	if c.Key != "" {
		if err := store.CheckKey(c.Key); err != nil {
			return a.refuse(c, run.ID, fmt.Errorf("update run %s: %w", run.ID, err))
		}
		seen, err := a.keySeen(run.ID, c.Key)
		if err != nil {
			return store.ChangeResult{}, err
		}
		if seen {
			return a.refuse(c, run.ID, fmt.Errorf("update run %s: key %q: %w", run.ID, c.Key, store.ErrDuplicateChange))
		}
	}
	u, err := c.Decide(cloneRun(run)) // Decide may scribble on its copy
	if err != nil {
		return a.refuse(c, run.ID, err)
	}
	if u == nil {
		u = &store.Update{}
	}
	if err := u.Check(); err != nil {
		return a.refuse(c, run.ID, fmt.Errorf("update run %s: %w", run.ID, err))
	}

	next := u.Next(run, a.now)
	newKey := st.key
	if newKey != nil && store.FreesKey(next.KeyScope, next) {
		newKey = nil
	}
	if u.TakesKey(run) {
		// The single writer: no other transaction takes it meanwhile.
		newKey = uniqueKey(&next)
		holder, err := a.holder(newKey)
		if err != nil {
			return store.ChangeResult{}, err
		}
		if holder != "" && holder != run.ID {
			return a.refuse(c, run.ID, fmt.Errorf("update run %s: reopen: %w", run.ID,
				&store.DuplicateRunError{BusinessID: run.BusinessID, ExistingRunID: holder}))
		}
	}
	cond := st.cond
	if u.Condition != nil {
		cond, next.Condition, err = conditionArg(next.Condition)
		if err != nil {
			return a.refuse(c, run.ID, fmt.Errorf("update run %s: %w", run.ID, err))
		}
	}

	pausedCol, err := store.EncodePause(next.Paused)
	if err != nil {
		return a.refuse(c, run.ID, fmt.Errorf("update run %s: %w", run.ID, err))
	}
	var paused driver.Value
	if pausedCol != nil {
		paused = *pausedCol
	}
	sattrs, err := attrsArg(next.SearchAttributes)
	if err != nil {
		return a.refuse(c, run.ID, fmt.Errorf("update run %s: %w", run.ID, err))
	}

	if c.Fence != nil {
		if n, err := a.fence(c.Fence); err != nil {
			return store.ChangeResult{}, err
		} else if n == 0 {
			return refused(fmt.Errorf("update run %s: task %d: %w", run.ID, c.Fence.TaskID, store.ErrLeaseLost))
		}
	}
	// The change is accepted: from here on it writes.
	if err := a.writeRun(st, &next, newKey, cond, paused, sattrs); err != nil {
		return store.ChangeResult{}, err
	}
	a.insertEvents(run.ID, run.Seq, u.History, c.Key)
	if err := a.cancelTasks(run.ID, u); err != nil {
		return store.ChangeResult{}, err
	}
	a.setChanged(&runState{run: *cloneRun(&next), key: newKey, cond: cond, attrs: st.attrs, rowid: st.rowid})
	return store.ChangeResult{Run: &next, Tasks: a.insertTasks(&next, st.attrs, u.Tasks)}, nil
}

// writeRun updates the row of run st to next, with the columns the
// caller worked out (the unique key, the condition, the pause and the
// search attributes).
func (a *applier) writeRun(st *runState, next *store.Run, newKey, cond, paused, sattrs driver.Value) error {
	w := a.w
	newStatus, keyChanged := next.Status != st.run.Status, !sameKey(newKey, st.key)
	q := updateRunQuery(newStatus, keyChanged)
	if newStatus {
		w.arg(string(next.Status))
	}
	w.arg(jsonArg(next.Output))
	w.arg(next.Error)
	w.arg(jsonArg(next.State))
	w.arg(jsonArg(next.Published))
	w.arg(cond)
	w.arg(next.Seq)
	w.arg(a.nowUS)
	w.arg(nullMicros(next.FinishedAt))
	if keyChanged {
		w.arg(newKey)
	}
	w.arg(next.BuildID)
	w.arg(paused)
	w.arg(sattrs)
	w.arg(st.rowid)
	w.arg(st.run.ID)
	res, err := w.exec(q)
	if err != nil {
		return fmt.Errorf("update run: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update run: %w", err)
	} else if n != 1 {
		// The run is not where the cache said: fail the Apply, which
		// drops the cache. (It cannot happen unless the file was changed
		// behind SQLite's back.)
		return fmt.Errorf("update run %s: row %d not found", st.run.ID, st.rowid)
	}
	return nil
}

// cancelTasks deletes the tasks of run id that u cancels and releases
// the leases u releases.
func (a *applier) cancelTasks(id string, u *store.Update) error {
	w := a.w
	if len(u.Cancel) > 0 && a.pendingTasksOf(id) {
		// Earlier changes of the batch enqueued tasks of the run: they
		// are cancelled too.
		if err := a.flushTasks(); err != nil {
			return err
		}
	}
	if u.Release {
		w.arg(id)
		if _, err := w.exec(qReleaseRun); err != nil {
			return fmt.Errorf("release tasks: %w", err)
		}
	}
	for _, m := range u.Cancel {
		w.arg(id)
		w.arg(string(m.Kind))
		w.arg(m.Step)
		w.arg(int64(m.Index))
		if _, err := w.exec(qCancelTask); err != nil {
			return fmt.Errorf("cancel tasks: %w", err)
		}
	}
	return nil
}

// insertEvents appends evs to a run's history after seq, the first with
// the change's idempotency key (if any). The rows are written by
// flushEvents: no change reads the history (keySeen reads a.keys for the
// keys of this Apply).
func (a *applier) insertEvents(runID string, seq int64, evs []store.NewEvent, key string) {
	if len(evs) == 0 {
		return
	}
	if key != "" {
		if a.keys == nil {
			a.keys = make(map[runKey]struct{})
		}
		a.keys[runKey{runID, key}] = struct{}{}
	}
	for i := range evs {
		a.events = append(a.events, pendingEvent{runID: runID, seq: seq + int64(i) + 1, e: &evs[i], key: key})
		key = ""
	}
}

type pendingEvent struct {
	runID string
	seq   int64
	e     *store.NewEvent
	key   string // "" for none
}

// flushEvents writes the pending history entries, maxRows per statement.
func (a *applier) flushEvents() error {
	w := a.w
	evs := a.events
	for len(evs) > 0 {
		chunk := evs[:min(len(evs), maxRows)]
		evs = evs[len(chunk):]
		for i := range chunk {
			p := &chunk[i]
			e := p.e
			w.arg(p.runID)
			w.arg(p.seq)
			w.arg(string(e.Kind))
			w.arg(e.Step)
			w.arg(int64(e.Index))
			w.arg(int64(e.Attempt))
			w.arg(e.Name)
			w.arg(jsonArg(e.Data))
			w.arg(e.Error)
			w.arg(a.nowUS)
			w.arg(nullString(p.key))
		}
		if _, err := w.runInsert(insertEvents, len(chunk)); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
	}
	clear(a.events)
	a.events = a.events[:0]
	return nil
}

// insertTasks enqueues ts for run r, whose tags and metadata are stored as
// attrs. A zero ReadyAt means now. The rows are written, and the ids
// filled in, by flushTasks.
func (a *applier) insertTasks(r *store.Run, attrs attrCols, ts []store.NewTask) []*store.Task {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*store.Task, len(ts))
	for i := range ts {
		n := &ts[i]
		ready := truncate(n.ReadyAt)
		if ready.IsZero() {
			ready = a.now
		}
		out[i] = &store.Task{
			RunID: r.ID, Queue: n.Queue, Kind: n.Kind, Workflow: r.Workflow,
			Version: r.Version, Step: n.Step, Index: n.Index, Attempt: n.Attempt,
			Payload: orNil(n.Payload), Item: orNil(n.Item), Priority: n.Priority, ReadyAt: ready,
			Handler: n.Handler, Details: orNil(n.Details), CreatedAt: a.now, TraceContext: r.TraceContext,
			Tags: r.Tags, Metadata: r.Metadata,
		}
		if n.Kind.Controlled() {
			out[i].ConcurrencyKey = r.ConcurrencyKey
		}
		a.tasks = append(a.tasks, pendingTask{out[i], attrs})
	}
	return out
}

// flushTasks writes the pending tasks, maxRows per statement, and fills
// in their ids.
func (a *applier) flushTasks() error {
	w := a.w
	ts := a.tasks
	for len(ts) > 0 {
		chunk := ts[:min(len(ts), maxRows)]
		ts = ts[len(chunk):]
		for _, t := range chunk {
			w.arg(t.RunID)
			w.arg(t.Queue)
			w.arg(string(t.Kind))
			w.arg(t.Workflow)
			w.arg(int64(t.Version))
			w.arg(t.Step)
			w.arg(int64(t.Index))
			w.arg(int64(t.Attempt))
			w.arg(jsonArg(t.Payload))
			w.arg(jsonArg(t.Item))
			w.arg(int64(t.Priority))
			w.arg(micros(t.ReadyAt))
			w.arg(t.Handler)
			w.arg(jsonArg(t.Details))
			w.arg(a.nowUS)
			if t.Kind.Controlled() {
				w.arg(t.ConcurrencyKey)
			} else {
				w.arg(nil)
			}
			w.arg(t.TraceContext)
			w.arg(t.attrs.tags)
			w.arg(t.attrs.meta)
		}
		res, err := w.runInsert(insertTasks, len(chunk))
		if err != nil {
			return fmt.Errorf("insert tasks: %w", err)
		}
		// The rows of one statement get consecutive ids: AUTOINCREMENT
		// gives each new row one more than the largest id ever used.
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert tasks: %w", err)
		}
		for i, t := range chunk {
			t.ID = last - int64(len(chunk)-1-i)
		}
	}
	clear(a.tasks)
	a.tasks = a.tasks[:0]
	return nil
}

// pendingTasksOf tells whether tasks of run id wait in a.tasks.
func (a *applier) pendingTasksOf(id string) bool {
	for _, t := range a.tasks {
		if t.RunID == id {
			return true
		}
	}
	return false
}

// flush writes what the changes left pending.
func (a *applier) flush() error {
	if err := a.flushEvents(); err != nil {
		return err
	}
	return a.flushTasks()
}

// orNil returns nil for an empty JSON value, as the database stores it.
func orNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// attrsArg is the search_attributes column of a run with attributes m.
func attrsArg(m map[string]store.Attr) (driver.Value, error) {
	col, err := store.EncodeAttrs(m)
	if err != nil || col == nil {
		return nil, err
	}
	return *col, nil
}
