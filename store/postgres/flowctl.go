package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/internal/flowctl"
	"github.com/hephaestus-go/hephaestus/store"
)

// Flow control (docs/flow-control.md). A claim of a queue whose row in
// queues is controlled does not take the fast path: the claim statements
// skip such queues, a statement sent with them names the ones they
// skipped, and claimControlled claims those in a transaction of its own.
// That transaction locks the queue's row, which serializes the queue's
// claims across processes so that the counts it reads are exact; reads the
// live leases of the queue's work per key, the rate windows, the keys with
// tasks and each one's candidates; lets flowctl.Pick choose; and leases
// the chosen tasks, recording the leases and the new rotation and rate
// state, before it commits.

// handlerCondSQL is handlerCond over the claim's handlers ($6).
var handlerCondSQL = handlerCond("$6")

// maxKeysPerClaim bounds the concurrency keys one controlled claim visits
// (docs/flow-control.md): it walks the keys of the queue in order from
// where the previous claim stopped, wrapping around.
const maxKeysPerClaim = 100

// The columns of queues read by scanQueue.
const queueCols = "name, paused, max_running, max_running_per_key, rate_limit, rate_period, key_rate_limit, key_rate_period, fair, weights, updated_at"

// The statements of flow control, with the schema's name (§).
var (
	// The queues of $1 that are controlled.
	controlledSQL = "SELECT coalesce(array_agg(name), '{}') FROM §queues WHERE name = ANY($1::text[]) AND controlled"
	// Locks queue $1 for the claim; returns its configuration and state.
	lockQueueSQL = "SELECT " + queueCols + ", controlled, window_start, window_starts, vclock, key_cursor FROM §queues WHERE name = $1 FOR UPDATE"
	// Deletes the leases of queue $1 that no longer count at $2 and
	// returns, per key, those that do.
	runningSQL = `WITH dead AS (
		DELETE FROM §queue_leases l WHERE l.queue = $1 AND NOT EXISTS (SELECT 1 FROM §tasks t
			WHERE t.id = l.task_id AND t.token = l.token AND t.owner IS NOT NULL AND t.lease_until > $2)
		RETURNING l.task_id)
	SELECT l.key, count(*) FROM §queue_leases l WHERE l.queue = $1 AND l.task_id NOT IN (SELECT task_id FROM dead)
	GROUP BY l.key`
	// Up to $3 keys of queue $1 with tasks, from $2 on, then from the
	// start up to $2 (a skip scan of tasks_flow: one probe per key), each
	// with its state and up to $5 candidates claimable at $4 by handlers
	// $6.
	candidatesSQL = `WITH RECURSIVE a(key) AS (
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key >= $2 ORDER BY flow_key LIMIT 1)
		UNION ALL
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key > a.key ORDER BY flow_key LIMIT 1)
		FROM a WHERE a.key IS NOT NULL
	), b(key) AS (
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key >= '' AND flow_key < $2 ORDER BY flow_key LIMIT 1)
		WHERE $2 <> ''
		UNION ALL
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key > b.key AND flow_key < $2 ORDER BY flow_key LIMIT 1)
		FROM b WHERE b.key IS NOT NULL
	), k AS (
		SELECT key, part FROM ((SELECT key, 0 AS part FROM a WHERE key IS NOT NULL LIMIT $3)
			UNION ALL (SELECT key, 1 AS part FROM b WHERE key IS NOT NULL LIMIT $3)) AS u
		ORDER BY part, key LIMIT $3
	)
	SELECT k.key, k.part, qk.vtime, qk.window_start, qk.window_starts, c.id, c.priority
	FROM k LEFT JOIN §queue_keys qk ON qk.queue = $1 AND qk.key = k.key
	LEFT JOIN LATERAL (SELECT id, priority FROM §tasks
		WHERE queue = $1 AND flow_key = k.key AND ready_at <= $4 AND (lease_until IS NULL OR lease_until <= $4)
			AND ` + handlerCondSQL + `
		ORDER BY priority DESC, ready_at, id LIMIT $5) c ON true
	ORDER BY k.part, k.key, c.priority DESC NULLS LAST`
	// Leases the tasks $1 (checked again: still claimable at $4) to $2
	// until $3, and records the leases of the work among them.
	leaseControlledSQL = `WITH l AS (
		UPDATE §tasks t SET owner = $2, token = t.token + 1, lease_until = $3, claims = t.claims + 1
		WHERE t.id = ANY($1::int8[]) AND t.queue = $5 AND t.ready_at <= $4 AND (t.lease_until IS NULL OR t.lease_until <= $4)
		RETURNING ` + "t.id, t.run_id, t.queue, t.kind, t.workflow, t.version, t.step, t.idx, t.attempt, t.payload, t.item, t.priority, t.ready_at, t.handler, t.details, t.owner, t.token, t.lease_until, t.claims, t.created_at, t.flow_key" + `
	), r AS (
		INSERT INTO §queue_leases (task_id, token, queue, key)
		SELECT id, token, queue, flow_key FROM l WHERE flow_key IS NOT NULL
		ON CONFLICT (task_id) DO UPDATE SET token = excluded.token, queue = excluded.queue, key = excluded.key
	)
	SELECT * FROM l`
	// Records the state of keys ($2 keys, $3 vtimes, $4 window starts, $5
	// starts) of queue $1.
	putKeysSQL = `INSERT INTO §queue_keys (queue, key, vtime, window_start, window_starts)
	SELECT $1, x.key, x.vtime, x.ws, x.n FROM unnest($2::text[], $3::float8[], $4::timestamptz[], $5::int8[]) AS x(key, vtime, ws, n)
	ON CONFLICT (queue, key) DO UPDATE SET vtime = excluded.vtime, window_start = excluded.window_start,
		window_starts = excluded.window_starts`
	// Records the state of queue $1.
	putQueueStateSQL = `UPDATE §queues SET window_start = $2, window_starts = $3, vclock = $4, key_cursor = $5 WHERE name = $1`
)

// bookkeepingSQL leases up to $5 tasks of queue $1 that flow control does
// not govern, as claimSQL does.
var bookkeepingSQL = `UPDATE §tasks t SET owner = $2, token = t.token + 1, lease_until = $3, claims = t.claims + 1
	FROM (SELECT id FROM §tasks WHERE queue = $1 AND flow_key IS NULL AND ready_at <= $4
		AND (lease_until IS NULL OR lease_until <= $4) AND ` + handlerCondSQL + `
		ORDER BY priority DESC, ready_at, id LIMIT $5 FOR UPDATE SKIP LOCKED) picked
	WHERE t.id = picked.id RETURNING ` + prefixed("t.", taskCols)

// flowQueries are the statements of flow control with the schema's name,
// by their text (see queries.flow).
func flowQueries(s func(string) string) map[string]string {
	m := map[string]string{}
	for _, q := range []string{controlledSQL, lockQueueSQL, runningSQL, candidatesSQL, leaseControlledSQL, putKeysSQL,
		putQueueStateSQL, bookkeepingSQL, getQueueSQL, putQueueSQL, pauseQueueSQL, statsSQL, runningByKeySQL, allQueuesSQL} {
		m[q] = s(q)
	}
	return m
}

// sq returns statement q of flowQueries with the store's schema.
func (s *Store) sq(q string) string {
	out, ok := s.q.flow[q]
	if !ok {
		panic("postgres: flow statement not prepared: " + q)
	}
	return out
}

// controlledQueues learns which of the claims' queues are controlled.
func controlledQueues(rows pgx.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		if err := rows.Scan(&out); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// claimControlled leases up to limit tasks of the controlled queue, in a
// transaction of its own.
func (s *Store) claimControlled(ctx context.Context, p *store.ClaimParams, queue string, limit int) ([]*store.Task, error) {
	var out []*store.Task
	err := s.once(ctx, func(ctx context.Context) error {
		out = nil
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, applySettings); err != nil {
			return err
		}
		if out, err = s.claimLocked(ctx, tx, p, queue, limit); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return nil, err
	}
	s.known.putLeases(out)
	return out, nil
}

// qstate is a queue's row as a controlled claim reads it.
type qstate struct {
	q          store.Queue
	controlled bool
	window     flowctl.Window
	clock      float64
	cursor     *string
}

func (s *Store) claimLocked(ctx context.Context, tx pgx.Tx, p *store.ClaimParams, queue string, limit int) ([]*store.Task, error) {
	now := truncate(p.Now)
	until := truncate(p.Now.Add(p.LeaseFor))
	var st qstate
	var ws *time.Time
	row := tx.QueryRow(ctx, s.sq(lockQueueSQL), queue)
	dest := append(queueDest(&st.q), &st.controlled, &ws, &st.window.Starts, &st.clock, &st.cursor)
	if err := row.Scan(dest...); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	st.window.Start = fromNull(ws)
	if !st.controlled {
		// Its configuration changed since: the fast path.
		one := *p
		one.Queues, one.Limit = []string{queue}, limit
		sql, args := claimArgs(&s.q, &one)
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		return collectTasks(rows)
	}
	// Engine bookkeeping first: never held back.
	rows, err := tx.Query(ctx, s.sq(bookkeepingSQL), queue, p.Owner, until, now, limit, p.Handlers)
	if err != nil {
		return nil, err
	}
	out, err := collectTasks(rows)
	if err != nil {
		return nil, err
	}
	limit -= len(out)
	if limit <= 0 || st.q.Paused {
		return out, nil
	}
	in := &flowctl.Input{Limits: limitsOf(&st.q), Now: now, Want: limit, Window: st.window, Clock: st.clock}
	running := map[string]int{}
	rows, err = tx.Query(ctx, s.sq(runningSQL), queue, now)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			rows.Close()
			return nil, err
		}
		running[k] = n
		in.Running += n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	from := ""
	if st.cursor != nil {
		from = *st.cursor + "\x01" // the keys after it: no key holds a control character
	}
	per := limit
	if m := st.q.MaxRunningPerKey; m > 0 {
		per = min(per, m)
	}
	if r := st.q.KeyRate.Limit; r > 0 {
		per = min(per, r)
	}
	rows, err = tx.Query(ctx, s.sq(candidatesSQL), queue, from, maxKeysPerClaim, now, per, p.Handlers)
	if err != nil {
		return nil, err
	}
	var visited []string
	for rows.Next() {
		var (
			key    string
			part   int
			vtime  *float64
			kws    *time.Time
			starts *int64
			id     *int64
			prio   *int64
		)
		if err := rows.Scan(&key, &part, &vtime, &kws, &starts, &id, &prio); err != nil {
			rows.Close()
			return nil, err
		}
		if len(visited) == 0 || visited[len(visited)-1] != key {
			visited = append(visited, key)
			k := flowctl.Key{Key: key, Running: running[key]}
			if vtime != nil {
				k.VTime = *vtime
			}
			if kws != nil {
				k.Window = flowctl.Window{Start: kws.UTC(), Starts: int(*starts)}
			}
			in.Keys = append(in.Keys, k)
		}
		if id != nil {
			k := &in.Keys[len(in.Keys)-1]
			k.Candidates = append(k.Candidates, flowctl.Candidate{ID: *id, Priority: int(*prio)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	res := flowctl.Pick(in)
	var cursor *string
	if len(visited) == maxKeysPerClaim {
		cursor = &visited[len(visited)-1]
	}
	if len(res.Picks) > 0 {
		rows, err = tx.Query(ctx, s.sq(leaseControlledSQL), res.Picks, p.Owner, until, now, queue)
		if err != nil {
			return nil, err
		}
		leased, err := collectTasks(rows)
		if err != nil {
			return nil, err
		}
		// Back in the order Pick chose them.
		order := map[int64]int{}
		for i, id := range res.Picks {
			order[id] = i
		}
		slices.SortFunc(leased, func(a, b *store.Task) int { return order[a.ID] - order[b.ID] })
		out = append(out, leased...)
	}
	if len(res.Keys) > 0 {
		var keys []string
		var vtimes []float64
		var wss []*time.Time
		var ns []int64
		for k, ks := range res.Keys {
			keys, vtimes, ns = append(keys, k), append(vtimes, ks.VTime), append(ns, int64(ks.Window.Starts))
			var w *time.Time
			if !ks.Window.Start.IsZero() {
				t := ks.Window.Start
				w = &t
			}
			wss = append(wss, w)
		}
		if _, err := tx.Exec(ctx, s.sq(putKeysSQL), queue, keys, vtimes, wss, ns); err != nil {
			return nil, err
		}
	}
	var w *time.Time
	if !res.Window.Start.IsZero() {
		t := res.Window.Start
		w = &t
	}
	if _, err := tx.Exec(ctx, s.sq(putQueueStateSQL), queue, w, res.Window.Starts, res.Clock, cursor); err != nil {
		return nil, err
	}
	return out, nil
}

// limitsOf converts a queue's configuration for flowctl.
func limitsOf(q *store.Queue) flowctl.Limits {
	return flowctl.Limits{Paused: q.Paused, MaxRunning: q.MaxRunning, MaxRunningPerKey: q.MaxRunningPerKey,
		Rate:    flowctl.Rate{Limit: q.Rate.Limit, Period: q.Rate.Period},
		KeyRate: flowctl.Rate{Limit: q.KeyRate.Limit, Period: q.KeyRate.Period}, Weights: q.Weights}
}

// queueDest are the scan destinations of queueCols into q; finish calls
// fill in what needs converting.
func queueDest(q *store.Queue) []any {
	f := &queueScan{q: q}
	return []any{&q.Name, &q.Paused, &f.maxRunning, &f.maxPerKey, &f.rate, &f.ratePeriod, &f.keyRate, &f.keyRatePeriod,
		&q.Fair, f, &q.UpdatedAt}
}

// queueScan converts the integer and JSON columns of a queue as they are
// scanned: it scans the weights column itself, last of those it needs, and
// fills in the rest then.
type queueScan struct {
	q                                    *store.Queue
	maxRunning, maxPerKey, rate, keyRate int64
	ratePeriod, keyRatePeriod            int64
}

// Scan implements sql.Scanner for the weights column.
func (f *queueScan) Scan(v any) error {
	q := f.q
	q.MaxRunning, q.MaxRunningPerKey = int(f.maxRunning), int(f.maxPerKey)
	q.Rate = store.Rate{Limit: int(f.rate), Period: time.Duration(f.ratePeriod) * time.Microsecond}
	q.KeyRate = store.Rate{Limit: int(f.keyRate), Period: time.Duration(f.keyRatePeriod) * time.Microsecond}
	q.Weights = nil
	var b []byte
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		b = []byte(x)
	case []byte:
		b = x
	default:
		return fmt.Errorf("weights: unexpected %T", v)
	}
	return json.Unmarshal(b, &q.Weights)
}
