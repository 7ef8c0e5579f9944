package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// writeStmts are prepared once on the writer connection and bound to each
// transaction with Tx.StmtContext, which reuses the prepared statement.
type writeStmts struct {
	savepoint, release, rollbackTo             *sql.Stmt
	insertRun, holder, loadRun, updateRun      *sql.Stmt
	insertEvent, insertTask, fence, cancelTask *sql.Stmt
	claimOne, claimMany                        *sql.Stmt
	heartbeat, releaseTask, prune              *sql.Stmt
}

func (w *writeStmts) set() stmtSet {
	return stmtSet{
		{&w.savepoint, "SAVEPOINT change"},
		{&w.release, "RELEASE change"},
		{&w.rollbackTo, "ROLLBACK TO change"},
		{&w.insertRun, `INSERT INTO runs (id, workflow, version, kind, status, input, output, error,
			business_id, key_scope, unique_key, parent_id, tags, metadata, state, published, seq,
			created_at, updated_at, finished_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)
			ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING`},
		{&w.holder, "SELECT id FROM runs WHERE unique_key = ?"},
		{&w.loadRun, "SELECT " + runCols + ", unique_key FROM runs WHERE id = ?"},
		{&w.updateRun, `UPDATE runs SET status = ?, output = ?, error = ?, state = ?, published = ?,
			seq = ?, updated_at = ?, finished_at = ?, unique_key = ? WHERE id = ?`},
		{&w.insertEvent, "INSERT INTO events (" + eventCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"},
		{&w.insertTask, `INSERT INTO tasks (run_id, queue, kind, workflow, version, step, idx, attempt,
			payload, item, priority, ready_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&w.fence, "DELETE FROM tasks WHERE id = ? AND token = ? AND run_id = ? AND owner IS NOT NULL"},
		{&w.cancelTask, `DELETE FROM tasks WHERE run_id = ?1
			AND (?2 = '' OR kind = ?2) AND (?3 = '' OR step = ?3) AND (?4 < 0 OR idx = ?4)`},
		{&w.claimOne, claimQuery("queue = ?1")},
		{&w.claimMany, claimQuery("queue IN (SELECT value FROM json_each(?1))")},
		{&w.heartbeat, "UPDATE tasks SET lease_until = ? WHERE id = ? AND token = ? AND owner IS NOT NULL"},
		{&w.releaseTask, "UPDATE tasks SET owner = NULL, lease_until = NULL WHERE id = ? AND token = ? AND owner IS NOT NULL"},
		{&w.prune, `DELETE FROM runs WHERE id IN (
			SELECT id FROM runs WHERE finished_at < ?
			AND status IN ('completed', 'failed', 'cancelled', 'continued')
			ORDER BY finished_at LIMIT ?)`},
	}
}

func (w *writeStmts) prepare(ctx context.Context, db *sql.DB) error { return w.set().prepare(ctx, db) }
func (w *writeStmts) close() error                                  { return w.set().close() }

var errRunExists = errors.New("a run with this id exists")

// Apply performs the changes in one write transaction (group commit),
// each inside a savepoint so that a refused change is undone alone.
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
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.fail("apply", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// Statements run with a context that is never cancelled: the driver
	// starts a goroutine per statement to watch a cancellable one, which
	// costs more than the statement. ctx is checked between changes, and
	// its cancellation rolls the transaction back.
	a := &applier{ctx: context.WithoutCancel(ctx), tx: tx, w: &s.w, now: truncate(p.Now)}
	defer a.closeStmts()
	results := make([]store.ChangeResult, len(p.Changes))
	for i := range p.Changes {
		if err := ctx.Err(); err != nil {
			return nil, s.fail("apply", err)
		}
		if _, err := a.stmt(a.w.savepoint).ExecContext(a.ctx); err != nil {
			return nil, s.fail("apply", err)
		}
		res, err := a.change(&p.Changes[i])
		if err != nil {
			return nil, s.fail("apply", err)
		}
		if res.Err != nil {
			if _, err := a.stmt(a.w.rollbackTo).ExecContext(a.ctx); err != nil {
				return nil, s.fail("apply", err)
			}
		}
		if _, err := a.stmt(a.w.release).ExecContext(a.ctx); err != nil {
			return nil, s.fail("apply", err)
		}
		results[i] = res
	}
	claimed := make([][]*store.Task, len(p.Claims))
	for i := range p.Claims {
		c := p.Claims[i]
		c.Now = p.Now
		tasks, err := claim(a.ctx, &c, a.stmt, a.w)
		if err != nil {
			return nil, s.fail("apply: claim", err)
		}
		claimed[i] = tasks
	}
	if err := ctx.Err(); err != nil {
		return nil, s.fail("apply", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.fail("apply", err)
	}
	return &store.ApplyResult{Changes: results, Claimed: claimed}, nil
}

// applier runs the changes of one Apply inside its transaction.
type applier struct {
	ctx   context.Context
	tx    *sql.Tx
	w     *writeStmts
	now   time.Time
	bound map[*sql.Stmt]*sql.Stmt
}

// stmt returns the prepared statement bound to the transaction.
func (a *applier) stmt(st *sql.Stmt) *sql.Stmt {
	if b, ok := a.bound[st]; ok {
		return b
	}
	if a.bound == nil {
		a.bound = make(map[*sql.Stmt]*sql.Stmt, 8)
	}
	b := a.tx.StmtContext(a.ctx, st)
	a.bound[st] = b
	return b
}

func (a *applier) closeStmts() {
	for _, b := range a.bound {
		b.Close()
	}
}

// change applies one change. A refused change comes back in the result;
// the error is a failure of the store.
func (a *applier) change(c *store.Change) (store.ChangeResult, error) {
	if c.Create != nil {
		return a.create(c.Create)
	}
	return a.update(c)
}

func refused(err error) (store.ChangeResult, error) { return store.ChangeResult{Err: err}, nil }

func (a *applier) create(n *store.NewRun) (store.ChangeResult, error) {
	if n.ID == "" {
		return refused(errors.New("create run: id is empty"))
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
		return refused(fmt.Errorf("create run %s: unknown status %q", r.ID, r.Status))
	}
	if r.BusinessID != "" && r.KeyScope == "" {
		r.KeyScope = businesskey.ScopeActive
	}
	if r.KeyScope != "" && !r.KeyScope.Valid() {
		return refused(fmt.Errorf("create run %s: unknown key scope %q", r.ID, r.KeyScope))
	}
	if r.Status.Terminal() {
		r.FinishedAt = a.now
	}
	if err := validateTasks(n.Tasks); err != nil {
		return refused(fmt.Errorf("create run %s: %w", r.ID, err))
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
	res, err := a.stmt(a.w.insertRun).ExecContext(a.ctx,
		r.ID, r.Workflow, r.Version, string(r.Kind), string(r.Status), jsonArg(r.Input),
		jsonArg(r.Output), r.Error, nullString(r.BusinessID), string(r.KeyScope), key, r.ParentID, tags, meta,
		jsonArg(r.State), r.Seq, micros(a.now), micros(a.now), nullMicros(r.FinishedAt))
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
			return refused(fmt.Errorf("create run %s: %w", r.ID, errRunExists))
		}
		return store.ChangeResult{}, fmt.Errorf("insert run: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return store.ChangeResult{}, fmt.Errorf("insert run: %w", err)
	} else if n == 0 {
		var holder string
		if err := a.stmt(a.w.holder).QueryRowContext(a.ctx, key).Scan(&holder); err != nil {
			return store.ChangeResult{}, fmt.Errorf("find business id holder: %w", err)
		}
		return refused(&store.DuplicateRunError{BusinessID: r.BusinessID, ExistingRunID: holder})
	}
	if err := a.insertEvents(r.ID, 0, n.History); err != nil {
		return store.ChangeResult{}, err
	}
	tasks, err := a.insertTasks(r, n.Tasks)
	if err != nil {
		return store.ChangeResult{}, err
	}
	return store.ChangeResult{Run: r, Tasks: tasks}, nil
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

func (a *applier) update(c *store.Change) (store.ChangeResult, error) {
	if c.Decide == nil {
		return refused(fmt.Errorf("update run %s: no Decide function", c.RunID))
	}
	var key *string
	run, err := scanRun(a.stmt(a.w.loadRun).QueryRowContext(a.ctx, c.RunID), &key)
	if errors.Is(err, sql.ErrNoRows) {
		return refused(fmt.Errorf("update run %s: %w", c.RunID, store.ErrRunNotFound))
	}
	if err != nil {
		return store.ChangeResult{}, fmt.Errorf("load run: %w", err)
	}
	if c.Fence != nil {
		res, err := a.stmt(a.w.fence).ExecContext(a.ctx, c.Fence.TaskID, c.Fence.Token, run.ID)
		if err != nil {
			return store.ChangeResult{}, fmt.Errorf("fence: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return store.ChangeResult{}, fmt.Errorf("fence: %w", err)
		} else if n == 0 {
			return refused(fmt.Errorf("update run %s: task %d: %w", run.ID, c.Fence.TaskID, store.ErrLeaseLost))
		}
	}
	given := *run // Decide may scribble on its copy
	u, err := c.Decide(&given)
	if err != nil {
		return refused(err)
	}
	if u == nil {
		u = &store.Update{}
	}
	if u.Status != "" && !u.Status.Valid() {
		return refused(fmt.Errorf("update run %s: unknown status %q", run.ID, u.Status))
	}
	if err := validateTasks(u.Tasks); err != nil {
		return refused(fmt.Errorf("update run %s: %w", run.ID, err))
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
	var newKey any
	if key != nil {
		newKey = *key
		if next.KeyScope == businesskey.ScopeActive && next.Status.Terminal() {
			newKey = nil
		}
	}

	if err := a.insertEvents(run.ID, run.Seq, u.History); err != nil {
		return store.ChangeResult{}, err
	}
	_, err = a.stmt(a.w.updateRun).ExecContext(a.ctx, string(next.Status), jsonArg(next.Output),
		next.Error, jsonArg(next.State), jsonArg(next.Published), next.Seq, micros(a.now),
		nullMicros(next.FinishedAt), newKey, run.ID)
	if err != nil {
		return store.ChangeResult{}, fmt.Errorf("update run: %w", err)
	}
	for _, m := range u.Cancel {
		if _, err := a.stmt(a.w.cancelTask).ExecContext(a.ctx, run.ID, string(m.Kind), m.Step, m.Index); err != nil {
			return store.ChangeResult{}, fmt.Errorf("cancel tasks: %w", err)
		}
	}
	tasks, err := a.insertTasks(&next, u.Tasks)
	if err != nil {
		return store.ChangeResult{}, err
	}
	return store.ChangeResult{Run: &next, Tasks: tasks}, nil
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

// insertEvents appends evs to a run's history after seq.
func (a *applier) insertEvents(runID string, seq int64, evs []store.NewEvent) error {
	if len(evs) == 0 {
		return nil
	}
	st := a.stmt(a.w.insertEvent)
	for i, e := range evs {
		_, err := st.ExecContext(a.ctx, runID, seq+int64(i)+1, string(e.Kind), e.Step, e.Index,
			e.Attempt, e.Name, jsonArg(e.Data), e.Error, micros(a.now))
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
	}
	return nil
}

// insertTasks enqueues ts for run r. A zero ReadyAt means now.
func (a *applier) insertTasks(r *store.Run, ts []store.NewTask) ([]*store.Task, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	st := a.stmt(a.w.insertTask)
	out := make([]*store.Task, len(ts))
	for i, n := range ts {
		ready := truncate(n.ReadyAt)
		if ready.IsZero() {
			ready = a.now
		}
		res, err := st.ExecContext(a.ctx, r.ID, n.Queue, string(n.Kind), r.Workflow, r.Version,
			n.Step, n.Index, n.Attempt, jsonArg(n.Payload), jsonArg(n.Item), n.Priority,
			micros(ready), micros(a.now))
		if err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		out[i] = &store.Task{
			ID: id, RunID: r.ID, Queue: n.Queue, Kind: n.Kind, Workflow: r.Workflow,
			Version: r.Version, Step: n.Step, Index: n.Index, Attempt: n.Attempt,
			Payload: orNil(n.Payload), Item: orNil(n.Item), Priority: n.Priority, ReadyAt: ready,
			CreatedAt: a.now,
		}
	}
	return out, nil
}

// orNil returns nil for an empty JSON value, as the database stores it.
func orNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}
