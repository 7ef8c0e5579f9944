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

// handlerCondSQL is handlerSetCond over the claim's handlers ($6: its
// HandlerSet).
var handlerCondSQL = handlerSetCond("$6")

// maxKeysPerClaim bounds the concurrency keys one controlled claim visits
// (docs/flow-control.md): it walks the keys of the queue in order from
// where the previous claim stopped, wrapping around.
const maxKeysPerClaim = 100

// The columns of queues that queueDest scans into a store.Queue.
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
	// Up to $3 keys of queue $1 with tasks, from the key after the
	// queue's cursor on ($2 when it has none), then from the start up to
	// it (a skip scan of tasks_flow: one probe per key), each with its
	// state and up to $5 candidates claimable at $4 by handlers $6 (fewer
	// when a per-key limit is lower).
	candidatesSQL = `WITH RECURSIVE c0(cur, per) AS (
		SELECT coalesce((SELECT key_cursor || chr(1) FROM §queues WHERE name = $1), $2::text),
			coalesce((SELECT least($5::int8, coalesce(nullif(max_running_per_key, 0), $5::int8),
				coalesce(nullif(key_rate_limit, 0), $5::int8)) FROM §queues WHERE name = $1), $5::int8)
	), a(key) AS (
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key >= (SELECT cur FROM c0) ORDER BY flow_key LIMIT 1)
		UNION ALL
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key > a.key ORDER BY flow_key LIMIT 1)
		FROM a WHERE a.key IS NOT NULL
	), b(key) AS (
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key >= '' AND flow_key < (SELECT cur FROM c0) ORDER BY flow_key LIMIT 1)
		WHERE (SELECT cur FROM c0) <> ''
		UNION ALL
		SELECT (SELECT flow_key FROM §tasks WHERE queue = $1 AND flow_key > b.key AND flow_key < (SELECT cur FROM c0) ORDER BY flow_key LIMIT 1)
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
			AND ` + handlerCondSQL + ` AND ` + notPaused + `
		ORDER BY priority DESC, ready_at, id LIMIT (SELECT per FROM c0)) c ON true
	ORDER BY k.part, k.key, c.priority DESC NULLS LAST`
	// Leases the tasks $1 (checked again: still claimable at $4) to $2
	// until $3, and records the leases of the work among them. (By id
	// alone: a generic plan given the queue too may walk the queue.)
	leaseControlledSQL = `WITH l AS (
		UPDATE §tasks t SET owner = $2, token = t.token + 1, lease_until = $3, claims = t.claims + 1
		WHERE t.id = ANY($1::int8[]) AND t.ready_at <= $4 AND (t.lease_until IS NULL OR t.lease_until <= $4)
			AND NOT EXISTS (SELECT 1 FROM §runs pr WHERE pr.id = t.run_id AND pr.paused IS NOT NULL)
		RETURNING ` + prefixed("t.", taskCols) + `
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
		AND (lease_until IS NULL OR lease_until <= $4) AND ` + handlerCondSQL + ` AND ` + notPaused + `
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
// transaction of its own sent in two round trips: the lock and the reads
// (with the claim of the bookkeeping tasks), then, once flowctl.Pick has
// chosen, the leases, the new state and COMMIT.
func (s *Store) claimControlled(ctx context.Context, p *store.ClaimParams, queue string, limit int) ([]*store.Task, error) {
	var out []*store.Task
	err := s.once(ctx, func(ctx context.Context) error {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		conn := pc.Conn()
		defer func() {
			// A transaction left open by a failure: roll it back so that
			// the connection can serve again.
			if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
					_ = conn.Close(rctx)
				}
				cancel()
			}
			pc.Release()
		}()
		out, err = s.claimLocked(ctx, conn, p, queue, limit)
		return err
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

func (s *Store) claimLocked(ctx context.Context, conn *pgx.Conn, p *store.ClaimParams, queue string, limit int) ([]*store.Task, error) {
	now := truncate(p.Now)
	until := truncate(p.Now.Add(p.LeaseFor))
	// The first round trip. Under READ COMMITTED each statement after the
	// lock reads what committed before it ran, so the counts include every
	// claim of the queue serialized before this one. (candidatesSQL reads
	// the cursor from the locked row itself.)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(applySettings)
	b.Queue(s.sq(lockQueueSQL), queue)
	b.Queue(s.sq(bookkeepingSQL), queue, p.Owner, until, now, limit, p.HandlerSet())
	b.Queue(s.sq(runningSQL), queue, now)
	b.Queue(s.sq(candidatesSQL), queue, "", maxKeysPerClaim, now, limit, p.HandlerSet())
	var st qstate
	var out []*store.Task
	in := &flowctl.Input{Now: now}
	running := map[string]int{}
	var visited []string
	if err := readClaimState(conn.SendBatch(ctx, b), &st, &out, in, running, &visited); err != nil {
		return nil, err
	}
	// The second round trip.
	b = &pgx.Batch{}
	var leased []*store.Task
	switch {
	case !st.controlled:
		// Its configuration changed since the claim's first statement: the
		// fast path, within the limit.
		one := *p
		one.Queues, one.Limit = []string{queue}, limit-len(out)
		if one.Limit > 0 {
			sql, args := claimArgs(&s.q, &one)
			b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
				var err error
				leased, err = collectTasks(rows)
				return err
			})
		}
	case !st.q.Paused && limit > len(out):
		in.Limits, in.Want, in.Window, in.Clock = limitsOf(&st.q), limit-len(out), st.window, st.clock
		res := flowctl.Pick(in)
		if len(res.Picks) > 0 {
			b.Queue(s.sq(leaseControlledSQL), res.Picks, p.Owner, until, now).Query(func(rows pgx.Rows) error {
				var err error
				if leased, err = collectTasks(rows); err != nil {
					return err
				}
				// In the order Pick chose them.
				order := map[int64]int{}
				for i, id := range res.Picks {
					order[id] = i
				}
				slices.SortFunc(leased, func(a, b *store.Task) int { return order[a.ID] - order[b.ID] })
				return nil
			})
		}
		if len(res.Keys) > 0 {
			var keys []string
			var vtimes []float64
			var wss []*time.Time
			var ns []int64
			for k, ks := range res.Keys {
				keys, vtimes, ns = append(keys, k), append(vtimes, ks.VTime), append(ns, int64(ks.Window.Starts))
				wss = append(wss, nullTimePtr(ks.Window.Start))
			}
			b.Queue(s.sq(putKeysSQL), queue, keys, vtimes, wss, ns)
		}
		var next *string
		if len(visited) == maxKeysPerClaim {
			next = &visited[len(visited)-1]
		}
		b.Queue(s.sq(putQueueStateSQL), queue, nullTimePtr(res.Window.Start), res.Window.Starts, res.Clock, next)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if conn.PgConn().TxStatus() != 'I' {
		return nil, errors.New("the claim's transaction did not commit")
	}
	return append(out, leased...), nil
}

// readClaimState reads the results of a controlled claim's first round
// trip: the queue's row, the bookkeeping tasks it leased, the running
// work per key and the keys with their candidates.
func readClaimState(br pgx.BatchResults, st *qstate, out *[]*store.Task, in *flowctl.Input, running map[string]int, visited *[]string) error {
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	var ws *time.Time
	dest := append(queueDest(&st.q), &st.controlled, &ws, &st.window.Starts, &st.clock, &st.cursor)
	if err := br.QueryRow().Scan(dest...); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	st.window.Start = fromNull(ws)
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if *out, err = collectTasks(rows); err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			rows.Close()
			return err
		}
		running[k] = n
		in.Running += n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if rows, err = br.Query(); err != nil {
		return err
	}
	defer rows.Close()
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
			return err
		}
		if n := len(*visited); n == 0 || (*visited)[n-1] != key {
			*visited = append(*visited, key)
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
	return rows.Err()
}

func nullTimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
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
