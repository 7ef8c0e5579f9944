package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// claimQuery selects up to ?3 claimable tasks of the queues selected by
// queueCond (over ?1) at time ?2, in claim order: ready, and nobody holds
// a live lease on them. A claim that lists handlers reads per handler
// instead (claimHandlerQuery).
//
// The limit is written "?3 + 0": with a bare "LIMIT ?" the planner takes
// the bound value into account, so SQLite prepares the statement again on
// every call with a new limit — a fifth of the CPU of a busy worker. For
// the same reason lists of queues are bound as one JSON array read with
// json_each, so that a statement's text does not depend on their length.
func claimQuery(queueCond string) string {
	return `SELECT ` + taskCols + ` FROM tasks
		WHERE ` + queueCond + ` AND ready_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2)
			AND ` + notPaused + `
		ORDER BY priority DESC, ready_at, id LIMIT ?3 + 0`
}

// claimHandlerQuery is claimQuery for one queue (?1) and a claim that
// lists handlers (?4, a JSON array of its HandlerSet): per handler, the
// first ?3 claimable tasks in claim order, read through tasks_handler (a
// correlated subquery run once per handler; INDEXED BY: without
// statistics the planner may walk tasks_claim and filter on the handler,
// which is what this statement is for not doing), then the first ?3 of
// them all. A bounded read, whatever the queue holds for other handlers:
// claimQuery with a handler filter walked the whole backlog of a queue
// whose front held another worker's tasks.
const claimHandlerQuery = `SELECT ` + taskCols + ` FROM (SELECT DISTINCT value FROM json_each(?4)) AS h
		JOIN tasks ON id IN (SELECT id FROM tasks INDEXED BY tasks_handler
			WHERE queue = ?1 AND handler = h.value AND ready_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2)
				AND ` + notPaused + `
			ORDER BY priority DESC, ready_at, id LIMIT ?3 + 0)
		ORDER BY priority DESC, ready_at, id LIMIT ?3 + 0`

// Conditions of claimQuery and nextReadyQuery.
const (
	// notPaused keeps the tasks whose run is not paused (store.Run.Paused):
	// one probe of runs_paused, which holds the paused runs only, per task
	// the walk meets (INDEXED BY: without statistics the planner would
	// probe the primary key and read the run's row).
	notPaused = "NOT EXISTS (SELECT 1 FROM runs pr INDEXED BY runs_paused WHERE pr.id = run_id AND pr.paused IS NOT NULL)"
	queueOne  = "queue = ?1"
	queueMany = "queue IN (SELECT value FROM json_each(?1))"
)

// handlerIn is the condition that the task's handler is empty or in the
// JSON array bound to param: see store.NextReadyParams.Handlers.
func handlerIn(param string) string {
	return "(handler = '' OR handler IN (SELECT value FROM json_each(" + param + ")))"
}

// jsonList is a list bound as one JSON array (never "null": json_each
// reads that as one NULL value).
func jsonList(l []string) (string, error) {
	if len(l) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(l)
	return string(b), err
}

// ClaimTasks leases up to p.Limit ready tasks.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimParams) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	if err := checkClaim(p); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	var out []*store.Task
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			var err error
			out, err = claim(w, p)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("claim tasks", err)
	}
	return out, nil
}

func checkClaim(p *store.ClaimParams) error {
	switch {
	case p.Owner == "":
		return errors.New("Owner is empty")
	case p.Limit <= 0:
		return fmt.Errorf("Limit must be positive, got %d", p.Limit)
	case p.LeaseFor <= 0:
		return fmt.Errorf("LeaseFor must be positive, got %v", p.LeaseFor)
	case p.Now.IsZero():
		return errors.New("Now is zero")
	}
	return nil
}

// claim leases ready tasks, inside a write transaction: it reads them in
// claim order, then leases them one by one. (One UPDATE … RETURNING costs
// more: SQLite builds a temporary b-tree for the subquery's ids and
// another for the returned rows.) A task's token grows by one at every
// claim, so its tokens never repeat, across processes too.
func claim(w *wconn, p *store.ClaimParams) ([]*store.Task, error) {
	if len(p.Queues) == 0 {
		return nil, nil
	}
	// One queue or many (a claim that lists handlers reads per handler).
	q, queues := qClaimOne, p.Queues[0]
	if len(p.Queues) > 1 {
		var err error
		if queues, err = jsonList(p.Queues); err != nil {
			return nil, err
		}
		q = qClaimMany
	}
	// Controlled queues are claimed within their limits (flowctl.go).
	controlled, err := w.controlledQueues(p, queues)
	if err != nil {
		return nil, err
	}
	if len(controlled) > 0 {
		return claimMixed(w, p, controlled)
	}
	now := micros(p.Now)
	if p.Handlers != nil {
		return claimByHandler(w, p, now)
	}
	w.arg(queues)
	w.arg(now)
	w.arg(int64(p.Limit))
	out, err := w.queryTasks(q)
	if err != nil {
		return nil, err
	}
	return lease(w, p, now, out)
}

// claimByHandler claims for a claim that lists handlers: per queue,
// claimHandlerQuery; the queues' tasks merged in claim order and cut at
// p.Limit.
func claimByHandler(w *wconn, p *store.ClaimParams, now int64) ([]*store.Task, error) {
	handlers, err := jsonList(p.HandlerSet())
	if err != nil {
		return nil, err
	}
	var cands []*store.Task
	for _, q := range slices.Compact(slices.Sorted(slices.Values(p.Queues))) {
		w.arg(q)
		w.arg(now)
		w.arg(int64(p.Limit))
		w.arg(handlers)
		ts, err := w.queryTasks(qClaimHandler)
		if err != nil {
			return nil, err
		}
		cands = append(cands, ts...)
	}
	slices.SortFunc(cands, store.ClaimOrder)
	return lease(w, p, now, cands[:min(len(cands), p.Limit)])
}

// queryTasks runs a statement that returns task rows, with the
// arguments bound.
func (w *wconn) queryTasks(q int) ([]*store.Task, error) {
	rows, err := w.query(q)
	if err != nil {
		return nil, err
	}
	var out []*store.Task
	dest := make([]driver.Value, numTaskCols)
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			rows.Close()
			return nil, err
		}
		t, err := taskFromValues(dest)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// lease leases the tasks read by a claim, one by one.
func lease(w *wconn, p *store.ClaimParams, now int64, out []*store.Task) ([]*store.Task, error) {
	until := now + p.LeaseFor.Microseconds()
	for _, t := range out {
		w.arg(p.Owner)
		w.arg(until)
		w.arg(t.ID)
		if _, err := w.exec(qLease); err != nil {
			return nil, err
		}
		t.Owner, t.Token, t.LeaseUntil, t.Claims = p.Owner, t.Token+1, fromMicros(until), t.Claims+1
	}
	return out, nil
}

// claimMixed claims the queues of p that are not controlled on the fast
// path, then the controlled ones.
func claimMixed(w *wconn, p *store.ClaimParams, controlled []string) ([]*store.Task, error) {
	var out []*store.Task
	if rest := slices.DeleteFunc(slices.Clone(p.Queues), func(q string) bool { return slices.Contains(controlled, q) }); len(rest) > 0 {
		fast := *p
		fast.Queues = rest
		ts, err := claim(w, &fast)
		if err != nil {
			return nil, err
		}
		out = ts
	}
	for _, q := range controlled {
		if len(out) >= p.Limit {
			break
		}
		ts, err := claimControlled(w, p, q, p.Limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// Heartbeat extends the leases still held to p.Until, and records the
// details p names on their tasks.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if len(p.Leases) == 0 {
		return nil, nil
	}
	if p.Until.IsZero() {
		return nil, errors.New("heartbeat: Until is zero")
	}
	var lost []int64
	until := micros(p.Until)
	err := s.leases(ctx, p.Leases, func(w *wconn, l store.Lease) int {
		w.arg(until)
		if d, ok := p.Details[l.TaskID]; ok {
			w.arg(jsonArg(d))
			return qHeartbeatDetails
		}
		return qHeartbeat
	}, func(l store.Lease) {
		lost = append(lost, l.TaskID)
	})
	if err != nil {
		return nil, s.fail("heartbeat", err)
	}
	return lost, nil
}

// ReleaseTasks makes leased tasks claimable again at once.
func (s *Store) ReleaseTasks(ctx context.Context, leases []store.Lease) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("release tasks: %w", err)
	}
	if len(leases) == 0 {
		return nil
	}
	release := func(*wconn, store.Lease) int { return qReleaseTask }
	if err := s.leases(ctx, leases, release, func(store.Lease) {}); err != nil {
		return s.fail("release tasks", err)
	}
	return nil
}

// leases runs a statement for each lease in one transaction and calls
// lost for those it matched no row for. stmt collects the statement's
// leading arguments and returns it; the task id and token follow.
func (s *Store) leases(ctx context.Context, leases []store.Lease, stmt func(w *wconn, l store.Lease) int, lost func(store.Lease)) error {
	var missed []store.Lease
	err := s.withWriter(ctx, func(w *wconn) error {
		missed = missed[:0]
		return w.tx(func() error {
			for _, l := range leases {
				if err := ctx.Err(); err != nil {
					return err
				}
				q := stmt(w, l)
				w.arg(l.TaskID)
				w.arg(l.Token)
				res, err := w.exec(q)
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				if n == 0 {
					missed = append(missed, l)
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, l := range missed {
		lost(l)
	}
	return nil
}

// GetTask returns a task by id.
func (s *Store) GetTask(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	rows, err := s.r.getTask.QueryContext(ctx, id)
	if err != nil {
		return nil, s.fail("get task", err)
	}
	ts, err := scanTasks(rows)
	if err != nil {
		return nil, s.fail("get task", err)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("get task %d: %w", id, store.ErrTaskNotFound)
	}
	return ts[0], nil
}

// scanTasks reads rows of taskCols and closes them.
func scanTasks(rows *sql.Rows) ([]*store.Task, error) {
	defer rows.Close()
	var out []*store.Task
	vals := make([]any, numTaskCols)
	ptrs := make([]any, numTaskCols)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	dest := make([]driver.Value, numTaskCols)
	for rows.Next() {
		// Scanned into *any, the values are the driver's (TEXT as string,
		// INTEGER as int64, NULL as nil), as taskFromValues reads them.
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range vals {
			dest[i] = v
		}
		t, err := taskFromValues(dest)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// nextReadyQuery returns the earliest ready time of the unleased tasks of
// the queues in the JSON array ?1 and the earliest lease expiry of the
// leased ones; handlerCond, when not empty, restricts the tasks.
func nextReadyQuery(handlerCond string) string {
	if handlerCond != "" {
		handlerCond = " AND " + handlerCond
	}
	return `SELECT min(t) FROM (
			SELECT min(ready_at) AS t FROM tasks
				WHERE ` + queueMany + ` AND owner IS NULL` + handlerCond + ` AND ` + notPaused + `
			UNION ALL
			SELECT min(lease_until) AS t FROM tasks
				WHERE ` + queueMany + ` AND owner IS NOT NULL` + handlerCond + `)`
}

// NextReady returns when a task of the queues is next claimable.
func (s *Store) NextReady(ctx context.Context, p *store.NextReadyParams) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next ready: %w", err)
	}
	if len(p.Queues) == 0 {
		return time.Time{}, false, nil
	}
	queues, err := jsonList(p.Queues)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next ready: %w", err)
	}
	var next *int64
	if p.Handlers == nil {
		err = s.r.nextReady.QueryRowContext(ctx, queues).Scan(&next)
	} else {
		var handlers string
		if handlers, err = jsonList(p.Handlers); err != nil {
			return time.Time{}, false, fmt.Errorf("next ready: %w", err)
		}
		err = s.r.nextReadyHandlers.QueryRowContext(ctx, queues, handlers).Scan(&next)
	}
	if err != nil {
		return time.Time{}, false, s.fail("next ready", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return fromMicros(*next), true, nil
}

// strandedQuery selects up to ?5 tasks of queue ?1 ready before ?2,
// claimable at ?3, whose handler is neither empty nor in the JSON array
// ?4, oldest ready first. It walks the queue's entries of tasks_claim
// (ready_at is in the index, so tasks not yet ready cost no row read) and
// sorts what it keeps: a scan of the queue, which the runtime makes once
// a minute, rather than an index that every task write would pay for.
const strandedWhere = `queue = ?1 AND ready_at < ?2 AND ready_at <= ?3 AND (lease_until IS NULL OR lease_until <= ?3)
	AND handler <> '' AND handler NOT IN (SELECT value FROM json_each(?4)) AND ` + notPaused

const strandedQuery = `SELECT ` + taskCols + ` FROM tasks WHERE ` + strandedWhere + ` ORDER BY ready_at, id LIMIT ?5`

// strandedPerRunQuery keeps the oldest stranded task of each run.
const strandedPerRunQuery = `SELECT ` + taskCols + ` FROM (SELECT ` + taskCols + `,
	ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY ready_at, id) AS nth FROM tasks WHERE ` + strandedWhere + `)
	WHERE nth = 1 ORDER BY ready_at, id LIMIT ?5`

// StrandedTasks returns claimable tasks of a queue that no handler of
// p.Served can run.
func (s *Store) StrandedTasks(ctx context.Context, p *store.StrandedParams) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("stranded tasks: %w", err)
	}
	limit, err := p.Check()
	if err != nil {
		return nil, fmt.Errorf("stranded tasks: %w", err)
	}
	served, err := jsonList(p.Served)
	if err != nil {
		return nil, fmt.Errorf("stranded tasks: %w", err)
	}
	stmt := s.r.strands
	if p.PerRun {
		stmt = s.r.strandsPerRun
	}
	rows, err := stmt.QueryContext(ctx, p.Queue, micros(p.ReadyBefore), micros(p.Now), served, limit)
	if err != nil {
		return nil, s.fail("stranded tasks", err)
	}
	out, err := scanTasks(rows)
	if err != nil {
		return nil, s.fail("stranded tasks", err)
	}
	return out, nil
}
