package sqlite

import (
	"database/sql/driver"
	"encoding/json"
	"io"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/flowctl"
	"github.com/hephaestus-go/hephaestus/store"
)

// Flow control (docs/flow-control.md). A claim first asks which of its
// queues are controlled (one indexed read); the others take the fast path
// as before, and each controlled one is claimed by claimControlled in the
// same write transaction. The single writer serializes claims, so the
// counts it reads are exact: the live leases of the queue's work per key,
// the rate windows, the keys with tasks and each one's candidates;
// flowctl.Pick chooses, and the chosen tasks are leased with the leases
// and the new rotation and rate state recorded.

// maxKeysPerClaim bounds the concurrency keys one controlled claim visits
// (docs/flow-control.md): it walks the keys of the queue in order from
// where the previous claim stopped, wrapping around.
const maxKeysPerClaim = 100

const (
	queueCols = "name, paused, max_running, max_running_per_key, rate_limit, rate_period, key_rate_limit, key_rate_period, fair, weights, updated_at"

	controlledOneSQL  = "SELECT name FROM queues WHERE name = ?1 AND controlled"
	controlledManySQL = "SELECT name FROM queues WHERE name IN (SELECT value FROM json_each(?1)) AND controlled"
	allControlledSQL  = "SELECT name FROM queues WHERE controlled"
	queueStateSQL     = "SELECT " + queueCols + ", controlled, window_start, window_starts, vclock, key_cursor FROM queues WHERE name = ?1"
	// The leases of queue ?1 that no longer count at ?2.
	deadLeasesSQL = `DELETE FROM queue_leases WHERE queue = ?1 AND NOT EXISTS (SELECT 1 FROM tasks t
		WHERE t.id = queue_leases.task_id AND t.token = queue_leases.token AND t.owner IS NOT NULL AND t.lease_until > ?2)`
	leasesByKeySQL = "SELECT key, count(*) FROM queue_leases WHERE queue = ?1 GROUP BY key"
	// Claimable tasks of queue ?1 at ?2 that flow control does not govern,
	// up to ?3, for handlers ?4 (NULL: any).
	bookkeepingSQL = `SELECT ` + taskCols + ` FROM tasks WHERE queue = ?1 AND flow_key IS NULL AND ready_at <= ?2
		AND (lease_until IS NULL OR lease_until <= ?2) AND ` + handlersOrAny + `
		ORDER BY priority DESC, ready_at, id LIMIT ?3 + 0`
	// The first key of queue ?1 from ?2 on (and before ?3, unless NULL).
	nextKeySQL = `SELECT flow_key FROM tasks WHERE queue = ?1 AND flow_key >= ?2 AND (?3 IS NULL OR flow_key < ?3)
		ORDER BY flow_key LIMIT 1`
	// Up to ?4 candidates of key ?2 of queue ?1 at ?3, for handlers ?5.
	keyCandidatesSQL = `SELECT id, priority FROM tasks WHERE queue = ?1 AND flow_key = ?2 AND ready_at <= ?3
		AND (lease_until IS NULL OR lease_until <= ?3) AND ` + handlersOrAnyAt5 + `
		ORDER BY priority DESC, ready_at, id LIMIT ?4 + 0`
	keyStateSQL = "SELECT vtime, window_start, window_starts FROM queue_keys WHERE queue = ?1 AND key = ?2"
	taskByIDSQL = "SELECT " + taskCols + " FROM tasks WHERE id = ?1 AND ready_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2)"
	putLeaseSQL = `INSERT INTO queue_leases (task_id, token, queue, key) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (task_id) DO UPDATE SET token = ?2, queue = ?3, key = ?4`
	putKeySQL = `INSERT INTO queue_keys (queue, key, vtime, window_start, window_starts) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (queue, key) DO UPDATE SET vtime = ?3, window_start = ?4, window_starts = ?5`
	putQueueStateSQL = "UPDATE queues SET window_start = ?2, window_starts = ?3, vclock = ?4, key_cursor = ?5 WHERE name = ?1"

	// The claim's store.ClaimParams.HandlerSet (NULL: any).
	handlersOrAny    = "(?4 IS NULL OR handler IN (SELECT value FROM json_each(?4)))"
	handlersOrAnyAt5 = "(?5 IS NULL OR handler IN (SELECT value FROM json_each(?5)))"
)

// controlledOf returns the controlled queues among p.Queues.
func controlledOf(w *wconn, p *store.ClaimParams, queues string) ([]string, error) {
	w.arg(queues)
	q := controlledManySQL
	if len(p.Queues) == 1 {
		q = controlledOneSQL
	}
	rows, err := w.queryText(q)
	if err != nil {
		return nil, err
	}
	var out []string
	dest := make([]driver.Value, 1)
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, vString(dest[0]))
	}
	return out, rows.Close()
}

// queueCache is the set of controlled queues as of a data version: a
// commit of another connection (another process) changes the version,
// and this connection's own writes of queues drop it.
type queueCache struct {
	valid   bool
	version int64
	names   map[string]bool
}

// controlledQueues returns the controlled queues among p.Queues (queues:
// them as controlledOf binds them). In a transaction that checked the data
// version it answers from the cache, filled by one read of the queues
// table when stale, so that the claims riding in commits cost no
// statement more; otherwise it asks the table.
func (w *wconn) controlledQueues(p *store.ClaimParams, queues string) ([]string, error) {
	if !w.fresh {
		return controlledOf(w, p, queues)
	}
	if !w.queues.valid || w.queues.version != w.runs.version {
		names := map[string]bool{}
		if err := each(w, allControlledSQL, 1, func(v []driver.Value) error {
			names[vString(v[0])] = true
			return nil
		}); err != nil {
			return nil, err
		}
		w.queues = queueCache{valid: true, version: w.runs.version, names: names}
	}
	var out []string
	for _, q := range p.Queues {
		if w.queues.names[q] {
			out = append(out, q)
		}
	}
	return out, nil
}

// each runs a query and calls f with each row.
func each(w *wconn, q string, n int, f func(v []driver.Value) error) error {
	rows, err := w.queryText(q)
	if err != nil {
		return err
	}
	dest := make([]driver.Value, n)
	for {
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err == nil {
			err = f(dest)
		}
		if err != nil {
			rows.Close()
			return err
		}
	}
	return rows.Close()
}

func handlersArg(h []string) (any, error) {
	if h == nil {
		return nil, nil
	}
	return jsonList(h)
}

// claimControlled leases up to limit tasks of the controlled queue, in
// the caller's write transaction.
func claimControlled(w *wconn, p *store.ClaimParams, queue string, limit int) ([]*store.Task, error) {
	now := micros(p.Now)
	until := now + p.LeaseFor.Microseconds()
	handlers, err := handlersArg(p.HandlerSet())
	if err != nil {
		return nil, err
	}
	var (
		q          store.Queue
		controlled bool
		window     flowctl.Window
		clock      float64
		cursor     any
	)
	w.arg(queue)
	err = each(w, queueStateSQL, 16, func(v []driver.Value) error {
		if err := queueFromValues(&q, v); err != nil {
			return err
		}
		controlled = vInt(v[11]) != 0
		if v[12] != nil {
			window = flowctl.Window{Start: fromMicros(vInt(v[12])), Starts: int(vInt(v[13]))}
		}
		clock = vFloat(v[14])
		cursor = v[15]
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !controlled {
		return nil, nil // the caller claimed it on the fast path
	}
	var out []*store.Task
	lease := func(t *store.Task) error {
		w.arg(p.Owner)
		w.arg(until)
		w.arg(t.ID)
		if _, err := w.exec(qLease); err != nil {
			return err
		}
		t.Owner, t.Token, t.LeaseUntil, t.Claims = p.Owner, t.Token+1, fromMicros(until), t.Claims+1
		out = append(out, t)
		return nil
	}
	// Engine bookkeeping first: never held back.
	var bk []*store.Task
	w.arg(queue)
	w.arg(now)
	w.arg(int64(limit))
	w.arg(handlers)
	if err := each(w, bookkeepingSQL, numTaskCols, func(v []driver.Value) error {
		t, err := taskFromValues(v)
		bk = append(bk, t)
		return err
	}); err != nil {
		return nil, err
	}
	for _, t := range bk {
		if err := lease(t); err != nil {
			return nil, err
		}
	}
	limit -= len(out)
	if limit <= 0 || q.Paused {
		return out, nil
	}
	in := &flowctl.Input{Limits: limitsOf(&q), Now: p.Now, Want: limit, Window: window, Clock: clock}
	w.arg(queue)
	w.arg(now)
	if _, err := w.execText(deadLeasesSQL); err != nil {
		return nil, err
	}
	running := map[string]int{}
	w.arg(queue)
	if err := each(w, leasesByKeySQL, 2, func(v []driver.Value) error {
		n := int(vInt(v[1]))
		running[vString(v[0])] = n
		in.Running += n
		return nil
	}); err != nil {
		return nil, err
	}
	// The keys: from the cursor on, then from the start up to it.
	var keys []string
	walk := func(from string, before any) error {
		for len(keys) < maxKeysPerClaim {
			w.arg(queue)
			w.arg(from)
			w.arg(before)
			var next *string
			if err := each(w, nextKeySQL, 1, func(v []driver.Value) error {
				k := vString(v[0])
				next = &k
				return nil
			}); err != nil {
				return err
			}
			if next == nil {
				return nil
			}
			keys = append(keys, *next)
			from = *next + "\x01" // the keys after it: no key holds a control character
		}
		return nil
	}
	from := ""
	if c, ok := cursor.(string); ok {
		from = c + "\x01"
	}
	if err := walk(from, nil); err != nil {
		return nil, err
	}
	if from != "" {
		if err := walk("", from); err != nil {
			return nil, err
		}
	}
	per := limit
	if m := q.MaxRunningPerKey; m > 0 {
		per = min(per, m)
	}
	if r := q.KeyRate.Limit; r > 0 {
		per = min(per, r)
	}
	for _, key := range keys {
		k := flowctl.Key{Key: key, Running: running[key]}
		w.arg(queue)
		w.arg(key)
		if err := each(w, keyStateSQL, 3, func(v []driver.Value) error {
			k.VTime = vFloat(v[0])
			if v[1] != nil {
				k.Window = flowctl.Window{Start: fromMicros(vInt(v[1])), Starts: int(vInt(v[2]))}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		w.arg(queue)
		w.arg(key)
		w.arg(now)
		w.arg(int64(per))
		w.arg(handlers)
		if err := each(w, keyCandidatesSQL, 2, func(v []driver.Value) error {
			k.Candidates = append(k.Candidates, flowctl.Candidate{ID: vInt(v[0]), Priority: int(vInt(v[1]))})
			return nil
		}); err != nil {
			return nil, err
		}
		in.Keys = append(in.Keys, k)
	}
	res := flowctl.Pick(in)
	for _, id := range res.Picks {
		var t *store.Task
		w.arg(id)
		w.arg(now)
		if err := each(w, taskByIDSQL, numTaskCols, func(v []driver.Value) error {
			var err error
			t, err = taskFromValues(v)
			return err
		}); err != nil {
			return nil, err
		}
		if t == nil {
			continue
		}
		if err := lease(t); err != nil {
			return nil, err
		}
		w.arg(t.ID)
		w.arg(t.Token)
		w.arg(queue)
		w.arg(t.ConcurrencyKey)
		if _, err := w.execText(putLeaseSQL); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(res.Keys))
	for k := range res.Keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		ks := res.Keys[k]
		w.arg(queue)
		w.arg(k)
		w.arg(ks.VTime)
		w.arg(nullMicros(ks.Window.Start))
		w.arg(int64(ks.Window.Starts))
		if _, err := w.execText(putKeySQL); err != nil {
			return nil, err
		}
	}
	var next any
	if len(keys) == maxKeysPerClaim {
		next = keys[len(keys)-1]
	}
	w.arg(queue)
	w.arg(nullMicros(res.Window.Start))
	w.arg(int64(res.Window.Starts))
	w.arg(res.Clock)
	w.arg(next)
	if _, err := w.execText(putQueueStateSQL); err != nil {
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

// queueFromValues reads queueCols.
func queueFromValues(q *store.Queue, v []driver.Value) error {
	*q = store.Queue{
		Name: vString(v[0]), Paused: vInt(v[1]) != 0, MaxRunning: int(vInt(v[2])), MaxRunningPerKey: int(vInt(v[3])),
		Rate:    store.Rate{Limit: int(vInt(v[4])), Period: time.Duration(vInt(v[5])) * time.Microsecond},
		KeyRate: store.Rate{Limit: int(vInt(v[6])), Period: time.Duration(vInt(v[7])) * time.Microsecond},
		Fair:    vInt(v[8]) != 0, UpdatedAt: vTime(v[10]),
	}
	if s := vString(v[9]); s != "" {
		return json.Unmarshal([]byte(s), &q.Weights)
	}
	return nil
}

func vFloat(v driver.Value) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	}
	return 0
}
