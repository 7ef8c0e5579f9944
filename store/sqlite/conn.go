package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hephaestus-go/hephaestus/store"
)

// The writer's statements run on the driver connection itself
// (sql.Conn.Raw), prepared once and kept: database/sql costs more per
// statement than a small SQLite statement does (argument conversion,
// Rows and Tx bookkeeping, a goroutine per cancellable context), and the
// single writer's CPU bounds the throughput of the store.
//
// database/sql hands the writer pool's only connection to one caller at a
// time, so the cache needs no lock of its own.

// Statements of the writer, by index into wconn.fixed.
const (
	qBegin = iota
	qCommit
	qRollback
	qInsertRun
	qHolder
	qLoadRun
	qUpdateRun // the four qUpdateRun statements, in this order: updateRunQuery
	qUpdateRunKeepStatus
	qUpdateRunKeepKey
	qUpdateRunKeepStatusKey
	qFence
	qFenceHeld
	qKeySeen
	qDataVersion
	qCancelTask
	qReleaseRun
	qClaimOne
	qClaimMany
	qClaimHandler
	qLease
	qHeartbeat
	qHeartbeatDetails
	qReleaseTask
	qPrune
	qExpireWorkers
	qRegisterWorker
	qRemoveWorker
	qRunOf
	qGetRequestW
	qInsertRequest
	qInsertRequestIfMissing
	qRenewRequest
	qDeleteRequest
	qAnswerRequest
	numQueries
)

// updateRunSet is the middle of qUpdateRun's SET list; updateRunEnd is
// the rest, and its WHERE.
const (
	updateRunSet = `output = ?, error = ?, state = ?, published = ?, condition = ?, seq = ?, updated_at = ?,
	finished_at = ?, `
	updateRunEnd = `build_id = ?, paused = ?, search_attributes = ? WHERE rowid = ? AND id = ?`
)

// updateRunQuery is the statement that updates a run's row: the status
// and the unique key are in its SET list only when the change changes
// them. SQLite rewrites the entries of every index whose columns or
// partial-index predicate a SET names, even to the value it had:
// runs_active's predicate names the status (one page fewer of the ten a
// step's commit writes), and runs_unique_key holds the key of a run with
// a business id while it is active.
func updateRunQuery(status, key bool) int {
	q := qUpdateRun
	if !status {
		q++
	}
	if !key {
		q += 2
	}
	return q
}

var queries = [numQueries]string{
	qBegin:    "BEGIN IMMEDIATE",
	qCommit:   "COMMIT",
	qRollback: "ROLLBACK",
	qInsertRun: `INSERT INTO runs (id, workflow, version, kind, status, input, output, error,
		business_id, key_scope, unique_key, parent_id, tags, metadata, state, published, seq,
		created_at, updated_at, finished_at, concurrency_key, trace_context, build_id, deadline, search_attributes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING`,
	qHolder:  "SELECT id FROM runs WHERE unique_key = ?",
	qLoadRun: "SELECT rowid, " + runCols + ", unique_key FROM runs WHERE id = ?",
	// By rowid (from the run's read or the cache): one b-tree search
	// fewer than by id. The id is checked too, at no cost.
	qUpdateRun:              "UPDATE runs SET status = ?, " + updateRunSet + "unique_key = ?, " + updateRunEnd,
	qUpdateRunKeepStatus:    "UPDATE runs SET " + updateRunSet + "unique_key = ?, " + updateRunEnd,
	qUpdateRunKeepKey:       "UPDATE runs SET status = ?, " + updateRunSet + updateRunEnd,
	qUpdateRunKeepStatusKey: "UPDATE runs SET " + updateRunSet + updateRunEnd,
	// The lease (task ?1, token ?2) is held. The task may be of any run.
	qFence:     "DELETE FROM tasks WHERE id = ?1 AND token = ?2 AND owner IS NOT NULL",
	qFenceHeld: "SELECT 1 FROM tasks WHERE id = ?1 AND token = ?2 AND owner IS NOT NULL",
	// The history of run ?1 holds key ?2 (events_key).
	qKeySeen:     "SELECT 1 FROM events WHERE run_id = ?1 AND key = ?2",
	qDataVersion: "PRAGMA data_version",
	qReleaseRun:  "UPDATE tasks SET owner = NULL, lease_until = NULL WHERE run_id = ?1 AND owner IS NOT NULL",
	qCancelTask: `DELETE FROM tasks WHERE run_id = ?1
		AND (?2 = '' OR kind = ?2) AND (?3 = '' OR step = ?3) AND (?4 < 0 OR idx = ?4)`,
	qClaimOne:         claimQuery(queueOne),
	qClaimMany:        claimQuery(queueMany),
	qClaimHandler:     claimHandlerQuery,
	qLease:            "UPDATE tasks SET owner = ?, token = token + 1, lease_until = ?, claims = claims + 1 WHERE id = ?",
	qHeartbeat:        "UPDATE tasks SET lease_until = ? WHERE id = ? AND token = ? AND owner IS NOT NULL",
	qHeartbeatDetails: "UPDATE tasks SET lease_until = ?, details = ? WHERE id = ? AND token = ? AND owner IS NOT NULL",
	qReleaseTask:      "UPDATE tasks SET owner = NULL, lease_until = NULL WHERE id = ? AND token = ? AND owner IS NOT NULL",
	// A finished run with tasks left has work to do (tasks_run).
	qPrune: `DELETE FROM runs WHERE id IN (
		SELECT id FROM runs WHERE finished_at < ?1
		AND status IN (SELECT value FROM json_each(?3))
		AND (?4 IS NULL OR workflow IN (SELECT value FROM json_each(?4)))
		AND workflow NOT IN (SELECT value FROM json_each(?5))
		AND NOT EXISTS (SELECT 1 FROM tasks WHERE tasks.run_id = runs.id)
		ORDER BY finished_at LIMIT ?2)`,
	qExpireWorkers: "DELETE FROM workers WHERE expires_at <= ?",
	qRegisterWorker: `INSERT INTO workers (id, queues, handlers, host, pid, started_at, seen_at, expires_at, build_id)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
		ON CONFLICT (id) DO UPDATE SET queues = ?2, handlers = ?3, host = ?4, pid = ?5,
		started_at = ?6, seen_at = ?7, expires_at = ?8, build_id = ?9`,
	qRemoveWorker: "DELETE FROM workers WHERE id = ?",
	// Requests (requests.go).
	qRunOf:       "SELECT workflow, version, seq, trace_context, tags, metadata FROM runs WHERE id = ?",
	qGetRequestW: "SELECT " + requestCols + " FROM requests WHERE run_id = ? AND id = ?",
	qInsertRequest: `INSERT INTO requests (run_id, id, kind, name, args, seq, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)`,
	qInsertRequestIfMissing: `INSERT INTO requests (run_id, id, kind, name, args, seq, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT (run_id, id) DO NOTHING`,
	qRenewRequest: `UPDATE requests SET kind = ?3, name = ?4, args = ?5, seq = ?6, status = 'pending', result = NULL,
		code = '', error = '', created_at = ?7, answered_at = NULL WHERE run_id = ?1 AND id = ?2 AND status = 'rejected'`,
	qDeleteRequest: "DELETE FROM requests WHERE run_id = ? AND id = ?",
	qAnswerRequest: `UPDATE requests SET status = ?, result = ?, code = ?, error = ?, answered_at = ?
		WHERE run_id = ? AND id = ?`,
}

// Multi-row inserts: one statement per change (or per chunk of rows)
// rather than one per row. Variants are prepared on first use for 1 to
// maxRows rows.
const (
	insertEvents = iota
	insertTasks
	numInserts
)

const maxRows = 32

var insertHeads = [numInserts]string{
	insertEvents: "INSERT INTO events (" + eventCols + ") VALUES ",
	insertTasks: `INSERT INTO tasks (run_id, queue, kind, workflow, version, step, idx, attempt,
		payload, item, priority, ready_at, handler, details, created_at, flow_key, trace_context, tags, metadata) VALUES `,
}

var insertWidths = [numInserts]int{insertEvents: 11, insertTasks: 19}

func insertQuery(kind, rows int) string {
	var b strings.Builder
	b.WriteString(insertHeads[kind])
	row := "(?" + strings.Repeat(", ?", insertWidths[kind]-1) + ")"
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// background is the context of every driver call: with a context that
// can be cancelled the driver starts a goroutine per statement, which
// costs more than the statement. Callers check their context between
// statements instead.
var background = context.Background()

// wconn is the writer's driver connection with its prepared statements.
type wconn struct {
	dc    any // the driver connection the statements belong to
	fixed [numQueries]driver.Stmt
	multi [numInserts][maxRows + 1]driver.Stmt
	// byText holds statements prepared on first use by their text (flow
	// control's, flowctl.go).
	byText map[string]driver.Stmt

	runs runCache
	// fresh: the transaction under way checked the data version
	// (checkRuns), so runs.version is current; queues caches the
	// controlled queues as of a data version (flowctl.go).
	fresh  bool
	queues queueCache

	// callerTx, when set, is a transaction of the caller's (InsertInTx): the
	// statements go through it, under ctx, instead of the prepared ones.
	callerTx *sql.Tx
	ctx      context.Context

	args []driver.NamedValue
	dest []driver.Value
}

// withWriter runs f on the writer's driver connection.
func (s *Store) withWriter(ctx context.Context, f func(w *wconn) error) error {
	c, err := s.writer.Conn(ctx)
	if err != nil {
		return err
	}
	err = c.Raw(func(dc any) error {
		if s.closed.Load() {
			return store.ErrClosed
		}
		w := &s.wc
		if w.dc != dc {
			// A new connection: the pool replaced one that failed (the
			// driver reported it unusable). Its statements and cache go.
			*w = wconn{dc: dc}
		}
		ferr := f(w)
		if errors.Is(ferr, driver.ErrBadConn) {
			// The connection is in an unknown state: database/sql
			// discards it; its statements go first.
			ferr = errors.Join(ferr, w.closeStmts())
			*w = wconn{}
		}
		return ferr
	})
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return err
}

// closeWriter closes the writer's statements; the store is closed, so no
// Apply prepares them again.
func (s *Store) closeWriter() error {
	if s.writer == nil {
		return nil
	}
	c, err := s.writer.Conn(context.Background())
	if err != nil {
		return nil // the pool is closed, and the statements with it
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		if s.wc.dc != dc {
			return nil
		}
		err := s.wc.closeStmts()
		s.wc = wconn{}
		return err
	})
}

func (w *wconn) closeStmts() error {
	var errs []error
	for i, st := range w.fixed {
		if st != nil {
			errs = append(errs, st.Close())
			w.fixed[i] = nil
		}
	}
	for q, st := range w.byText {
		errs = append(errs, st.Close())
		delete(w.byText, q)
	}
	for k := range w.multi {
		for i, st := range w.multi[k] {
			if st != nil {
				errs = append(errs, st.Close())
				w.multi[k][i] = nil
			}
		}
	}
	return errors.Join(errs...)
}

func (w *wconn) prepare(q string) (driver.Stmt, error) {
	st, err := w.dc.(driver.ConnPrepareContext).PrepareContext(background, q)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, q)
	}
	return st, nil
}

func (w *wconn) stmt(q int) (driver.Stmt, error) {
	if st := w.fixed[q]; st != nil {
		return st, nil
	}
	st, err := w.prepare(queries[q])
	if err != nil {
		return nil, err
	}
	w.fixed[q] = st
	return st, nil
}

// maxTextStmts bounds the statements the writer keeps by their text
// (textStmt): past it, a statement is prepared for one use. The texts
// are the store's constants and a few shapes built from them, far fewer.
const maxTextStmts = 256

// textStmt returns the statement of text q, prepared on its first use
// and kept for the next while fewer than maxTextStmts are kept (SQLite's
// parse of a statement costs more than many of its executions, and
// background loops run the same ones at every poll). done closes a
// statement that is not kept; call it after the statement's last use. On
// an error the collected arguments are dropped.
func (w *wconn) textStmt(q string) (st driver.Stmt, done func(), err error) {
	if st := w.byText[q]; st != nil {
		return st, noop, nil
	}
	if st, err = w.prepare(q); err != nil {
		clear(w.args)
		w.args = w.args[:0]
		return nil, nil, err
	}
	if len(w.byText) >= maxTextStmts {
		return st, func() { _ = st.Close() }, nil
	}
	if w.byText == nil {
		w.byText = map[string]driver.Stmt{}
	}
	w.byText[q] = st
	return st, noop, nil
}

func noop() {}

// execText runs statement q (textStmt) with the collected arguments.
func (w *wconn) execText(q string) (driver.Result, error) {
	st, done, err := w.textStmt(q)
	if err != nil {
		return nil, err
	}
	defer done()
	return w.run(st)
}

// queryText runs statement q (textStmt) with the collected arguments;
// closing the rows closes a statement that is not kept.
func (w *wconn) queryText(q string) (driver.Rows, error) {
	st, done, err := w.textStmt(q)
	if err != nil {
		return nil, err
	}
	rows, err := w.queryStmt(st)
	if err != nil {
		done()
		return nil, err
	}
	return &textRows{Rows: rows, done: done}, nil
}

// textRows are the rows of a textStmt statement.
type textRows struct {
	driver.Rows
	done func()
}

func (r *textRows) Close() error {
	err := r.Rows.Close()
	r.done()
	return err
}

// prepareAll prepares the statements of the writer (not the multi-row
// variants), so that Open reports a broken one.
func (w *wconn) prepareAll() error {
	for q := range numQueries {
		if _, err := w.stmt(q); err != nil {
			return err
		}
	}
	return nil
}

func (w *wconn) insertStmt(kind, rows int) (driver.Stmt, error) {
	if st := w.multi[kind][rows]; st != nil {
		return st, nil
	}
	st, err := w.prepare(insertQuery(kind, rows))
	if err != nil {
		return nil, err
	}
	w.multi[kind][rows] = st
	return st, nil
}

// runInsert runs the multi-row insert of kind for rows rows with the
// collected arguments.
func (w *wconn) runInsert(kind, rows int) (driver.Result, error) {
	if w.callerTx != nil {
		return w.txExec(insertQuery(kind, rows))
	}
	st, err := w.insertStmt(kind, rows)
	if err != nil {
		return nil, err
	}
	return w.run(st)
}

// txArgs takes the collected arguments for a statement through
// w.callerTx.
func (w *wconn) txArgs() []any {
	args := make([]any, len(w.args))
	for i, a := range w.args {
		args[i] = a.Value
		if a.Name != "" {
			args[i] = sql.Named(a.Name, a.Value)
		}
	}
	clear(w.args)
	w.args = w.args[:0]
	return args
}

func (w *wconn) txExec(q string) (driver.Result, error) {
	return w.callerTx.ExecContext(w.ctx, q, w.txArgs()...)
}

func (w *wconn) txQuery(q string) (driver.Rows, error) {
	rows, err := w.callerTx.QueryContext(w.ctx, q, w.txArgs()...)
	if err != nil {
		return nil, err
	}
	return &txRows{rows: rows}, nil
}

// txRows reads *sql.Rows as driver.Rows, for row.
type txRows struct{ rows *sql.Rows }

func (r *txRows) Columns() []string { cols, _ := r.rows.Columns(); return cols }
func (r *txRows) Close() error      { return r.rows.Close() }
func (r *txRows) Next(dest []driver.Value) error {
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	ptrs := make([]any, len(dest))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	return r.rows.Scan(ptrs...)
}

// arg appends an argument for the next statement.
func (w *wconn) arg(v driver.Value) {
	w.args = append(w.args, driver.NamedValue{Ordinal: len(w.args) + 1, Value: v})
}

// named appends an argument for the next statement, bound to its
// parameter :name.
func (w *wconn) named(name string, v driver.Value) {
	w.args = append(w.args, driver.NamedValue{Name: name, Ordinal: len(w.args) + 1, Value: v})
}

// run executes st with the collected arguments and clears them.
func (w *wconn) run(st driver.Stmt) (driver.Result, error) {
	res, err := st.(driver.StmtExecContext).ExecContext(background, w.args)
	clear(w.args)
	w.args = w.args[:0]
	return res, err
}

// exec runs the statement q with the collected arguments.
func (w *wconn) exec(q int) (driver.Result, error) {
	if w.callerTx != nil {
		return w.txExec(queries[q])
	}
	st, err := w.stmt(q)
	if err != nil {
		return nil, err
	}
	return w.run(st)
}

// query runs the statement q with the collected arguments; the caller
// closes the rows.
func (w *wconn) query(q int) (driver.Rows, error) {
	if w.callerTx != nil {
		return w.txQuery(queries[q])
	}
	st, err := w.stmt(q)
	if err != nil {
		return nil, err
	}
	return w.queryStmt(st)
}

func (w *wconn) queryStmt(st driver.Stmt) (driver.Rows, error) {
	rows, err := st.(driver.StmtQueryContext).QueryContext(background, w.args)
	clear(w.args)
	w.args = w.args[:0]
	return rows, err
}

// row returns the first row of rows in w.dest (of n columns), and false
// when there is none. It closes rows.
func (w *wconn) row(rows driver.Rows, n int) (bool, error) {
	if cap(w.dest) < n {
		w.dest = make([]driver.Value, n)
	}
	w.dest = w.dest[:n]
	clear(w.dest)
	err := rows.Next(w.dest)
	cerr := rows.Close()
	switch {
	case err == io.EOF:
		return false, cerr
	case err != nil:
		return false, err
	}
	return true, cerr
}

// begin starts a write transaction. Unless commit succeeded, end rolls it
// back.
func (w *wconn) begin() error {
	_, err := w.exec(qBegin)
	return err
}

func (w *wconn) commit() error {
	_, err := w.exec(qCommit)
	return err
}

// rollback ends a failed transaction. When that fails too, the
// connection's state is unknown: the error makes database/sql discard it.
func (w *wconn) rollback(cause error) error {
	if _, err := w.exec(qRollback); err != nil {
		return fmt.Errorf("%w (rollback: %w)", cause, errors.Join(err, driver.ErrBadConn))
	}
	return cause
}

// tx runs f in a write transaction.
func (w *wconn) tx(f func() error) error {
	if err := w.begin(); err != nil {
		return err
	}
	if err := f(); err != nil {
		return w.rollback(err)
	}
	if err := w.commit(); err != nil {
		return w.rollback(err)
	}
	return nil
}
