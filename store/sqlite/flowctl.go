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
	// The statements of a controlled claim bind their arguments by name
	// (wconn.named).
	queueStateSQL = "SELECT " + queueCols + ", controlled, window_start, window_starts, vclock, key_cursor FROM queues WHERE name = :queue"
	// The leases of the queue that no longer count at :now.
	deadLeasesSQL = `DELETE FROM queue_leases WHERE queue = :queue AND NOT EXISTS (SELECT 1 FROM tasks t
		WHERE t.id = queue_leases.task_id AND t.token = queue_leases.token AND t.owner IS NOT NULL AND t.lease_until > :now)`
	leasesByKeySQL = "SELECT key, count(*) FROM queue_leases WHERE queue = :queue GROUP BY key"
	// Claimable tasks of the queue at :now that flow control does not
	// govern, up to :limit, for :handlers.
	bookkeepingSQL = `SELECT ` + taskCols + ` FROM tasks WHERE queue = :queue AND flow_key IS NULL AND ready_at <= :now
		AND (lease_until IS NULL OR lease_until <= :now) AND ` + handlersOrAny + ` AND ` + notPaused + `
		ORDER BY priority DESC, ready_at, id LIMIT :limit + 0`
	// The first key of the queue from :from on (and before :before, unless
	// NULL).
	nextKeySQL = `SELECT flow_key FROM tasks WHERE queue = :queue AND flow_key >= :from AND (:before IS NULL OR flow_key < :before)
		ORDER BY flow_key LIMIT 1`
	// Up to :limit candidates of :key of the queue at :now, for :handlers.
	keyCandidatesSQL = `SELECT id, priority FROM tasks WHERE queue = :queue AND flow_key = :key AND ready_at <= :now
		AND (lease_until IS NULL OR lease_until <= :now) AND ` + handlersOrAny + ` AND ` + notPaused + `
		ORDER BY priority DESC, ready_at, id LIMIT :limit + 0`
	keyStateSQL = "SELECT vtime, window_start, window_starts FROM queue_keys WHERE queue = :queue AND key = :key"
	taskByIDSQL = "SELECT " + taskCols + " FROM tasks WHERE id = :id AND ready_at <= :now AND (lease_until IS NULL OR lease_until <= :now) AND " + notPaused
	putLeaseSQL = `INSERT INTO queue_leases (task_id, token, queue, key) VALUES (:task, :token, :queue, :key)
		ON CONFLICT (task_id) DO UPDATE SET token = :token, queue = :queue, key = :key`
	putKeySQL = `INSERT INTO queue_keys (queue, key, vtime, window_start, window_starts) VALUES (:queue, :key, :vtime, :window_start, :window_starts)
		ON CONFLICT (queue, key) DO UPDATE SET vtime = :vtime, window_start = :window_start, window_starts = :window_starts`
	putQueueStateSQL = "UPDATE queues SET window_start = :window_start, window_starts = :window_starts, vclock = :vclock, key_cursor = :cursor WHERE name = :queue"

	// The claim's store.ClaimParams.HandlerSet (NULL: any).
	handlersOrAny = "(:handlers IS NULL OR handler IN (SELECT value FROM json_each(:handlers)))"
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
// the caller's write transaction: the engine's bookkeeping first, then
// what flowctl.Pick chooses among the candidates of the queue's keys, and
// last the flow-control state the pick leaves.
func claimControlled(w *wconn, p *store.ClaimParams, queue string, limit int) ([]*store.Task, error) {
	handlers, err := handlersArg(p.HandlerSet())
	if err != nil {
		return nil, err
	}
	c := &controlClaim{w: w, p: p, queue: queue, now: micros(p.Now), handlers: handlers}
	c.until = c.now + p.LeaseFor.Microseconds()
	st, err := c.queueState()
	if err != nil || !st.controlled {
		return nil, err // not controlled: the caller claimed it on the fast path
	}
	if err := c.leaseBookkeeping(limit); err != nil {
		return nil, err
	}
	limit -= len(c.out)
	if limit <= 0 || st.queue.Paused {
		return c.out, nil
	}
	in := &flowctl.Input{Limits: limitsOf(&st.queue), Now: p.Now, Want: limit, Window: st.window, Clock: st.clock}
	running, err := c.runningByKey()
	if err != nil {
		return nil, err
	}
	for _, n := range running {
		in.Running += n
	}
	keys, err := c.keys(st.cursor)
	if err != nil {
		return nil, err
	}
	per := perKeyCandidates(&st.queue, limit)
	for _, key := range keys {
		k, err := c.key(key, running[key], per)
		if err != nil {
			return nil, err
		}
		in.Keys = append(in.Keys, k)
	}
	res := flowctl.Pick(in)
	if err := c.leasePicks(res.Picks); err != nil {
		return nil, err
	}
	if err := c.saveKeys(res.Keys); err != nil {
		return nil, err
	}
	var next any // where the next claim starts: after the last key visited, when it stopped at the bound
	if len(keys) == maxKeysPerClaim {
		next = keys[len(keys)-1]
	}
	if err := c.saveQueueState(res, next); err != nil {
		return nil, err
	}
	return c.out, nil
}

// controlClaim is one claim of a controlled queue: what its statements
// bind, and the tasks it leased so far.
type controlClaim struct {
	w        *wconn
	p        *store.ClaimParams
	queue    string
	now      int64 // p.Now in microseconds
	until    int64 // the leases' end in microseconds
	handlers any   // p.HandlerSet() as handlersArg binds it
	out      []*store.Task
}

// numQueueCols is the number of queueCols.
const numQueueCols = 11

// The columns of queueStateSQL after queueCols.
const (
	colControlled   = numQueueCols + iota
	colWindowStart  // of the queue's rate window (NULL: none)
	colWindowStarts // the starts in that window
	colVClock       // the queue's virtual clock for fair sharing
	colKeyCursor    // the key the previous claim stopped at (NULL: none)
	numQueueStateCols
)

// controlState is a queue's configuration and flow-control state.
type controlState struct {
	queue      store.Queue
	controlled bool
	window     flowctl.Window
	clock      float64
	cursor     any // string, or nil
}

// queueState reads the queue's configuration and flow-control state.
func (c *controlClaim) queueState() (*controlState, error) {
	st := &controlState{}
	c.w.named("queue", c.queue)
	err := each(c.w, queueStateSQL, numQueueStateCols, func(v []driver.Value) error {
		if err := queueFromValues(&st.queue, v); err != nil {
			return err
		}
		st.controlled = vInt(v[colControlled]) != 0
		if v[colWindowStart] != nil {
			st.window = flowctl.Window{Start: fromMicros(vInt(v[colWindowStart])), Starts: int(vInt(v[colWindowStarts]))}
		}
		st.clock = vFloat(v[colVClock])
		st.cursor = v[colKeyCursor]
		return nil
	})
	return st, err
}

// lease leases t to the claim's owner and adds it to the claim's tasks.
func (c *controlClaim) lease(t *store.Task) error {
	c.w.arg(c.p.Owner)
	c.w.arg(c.until)
	c.w.arg(t.ID)
	if _, err := c.w.exec(qLease); err != nil {
		return err
	}
	t.Owner, t.Token, t.LeaseUntil, t.Claims = c.p.Owner, t.Token+1, fromMicros(c.until), t.Claims+1
	c.out = append(c.out, t)
	return nil
}

// leaseBookkeeping leases up to limit of the queue's tasks that flow
// control does not govern (the engine's bookkeeping): never held back.
func (c *controlClaim) leaseBookkeeping(limit int) error {
	var bk []*store.Task
	c.w.named("queue", c.queue)
	c.w.named("now", c.now)
	c.w.named("limit", int64(limit))
	c.w.named("handlers", c.handlers)
	if err := each(c.w, bookkeepingSQL, numTaskCols, func(v []driver.Value) error {
		t, err := taskFromValues(v)
		bk = append(bk, t)
		return err
	}); err != nil {
		return err
	}
	for _, t := range bk {
		if err := c.lease(t); err != nil {
			return err
		}
	}
	return nil
}

// runningByKey drops the queue's leases that no longer count and returns
// the live ones per key.
func (c *controlClaim) runningByKey() (map[string]int, error) {
	c.w.named("queue", c.queue)
	c.w.named("now", c.now)
	if _, err := c.w.execText(deadLeasesSQL); err != nil {
		return nil, err
	}
	running := map[string]int{}
	c.w.named("queue", c.queue)
	err := each(c.w, leasesByKeySQL, 2, func(v []driver.Value) error {
		running[vString(v[0])] = int(vInt(v[1]))
		return nil
	})
	return running, err
}

// keys returns up to maxKeysPerClaim keys of the queue: from after cursor
// (nil: from the start) on, then from the start up to it.
func (c *controlClaim) keys(cursor any) ([]string, error) {
	var keys []string
	from := ""
	if s, ok := cursor.(string); ok {
		from = s + "\x01" // the keys after it: no key holds a control character
	}
	keys, err := c.walkKeys(keys, from, nil)
	if err != nil || from == "" {
		return keys, err
	}
	return c.walkKeys(keys, "", from)
}

// walkKeys appends to keys, up to maxKeysPerClaim, the queue's keys from
// from on and before before (nil: to the end).
func (c *controlClaim) walkKeys(keys []string, from string, before any) ([]string, error) {
	for len(keys) < maxKeysPerClaim {
		c.w.named("queue", c.queue)
		c.w.named("from", from)
		c.w.named("before", before)
		var next *string
		if err := each(c.w, nextKeySQL, 1, func(v []driver.Value) error {
			k := vString(v[0])
			next = &k
			return nil
		}); err != nil {
			return nil, err
		}
		if next == nil {
			break
		}
		keys = append(keys, *next)
		from = *next + "\x01"
	}
	return keys, nil
}

// perKeyCandidates is how many candidates a claim of limit tasks reads of
// each key: no more than a key may start.
func perKeyCandidates(q *store.Queue, limit int) int {
	per := limit
	if m := q.MaxRunningPerKey; m > 0 {
		per = min(per, m)
	}
	if r := q.KeyRate.Limit; r > 0 {
		per = min(per, r)
	}
	return per
}

// key reads key's state and up to per of its candidates.
func (c *controlClaim) key(key string, running, per int) (flowctl.Key, error) {
	k := flowctl.Key{Key: key, Running: running}
	c.w.named("queue", c.queue)
	c.w.named("key", key)
	if err := each(c.w, keyStateSQL, 3, func(v []driver.Value) error {
		k.VTime = vFloat(v[0])
		if v[1] != nil {
			k.Window = flowctl.Window{Start: fromMicros(vInt(v[1])), Starts: int(vInt(v[2]))}
		}
		return nil
	}); err != nil {
		return k, err
	}
	c.w.named("queue", c.queue)
	c.w.named("key", key)
	c.w.named("now", c.now)
	c.w.named("limit", int64(per))
	c.w.named("handlers", c.handlers)
	err := each(c.w, keyCandidatesSQL, 2, func(v []driver.Value) error {
		k.Candidates = append(k.Candidates, flowctl.Candidate{ID: vInt(v[0]), Priority: int(vInt(v[1]))})
		return nil
	})
	return k, err
}

// leasePicks leases the picked tasks that are still claimable and records
// their leases of the queue.
func (c *controlClaim) leasePicks(ids []int64) error {
	for _, id := range ids {
		var t *store.Task
		c.w.named("id", id)
		c.w.named("now", c.now)
		if err := each(c.w, taskByIDSQL, numTaskCols, func(v []driver.Value) error {
			var err error
			t, err = taskFromValues(v)
			return err
		}); err != nil {
			return err
		}
		if t == nil {
			continue
		}
		if err := c.lease(t); err != nil {
			return err
		}
		c.w.named("task", t.ID)
		c.w.named("token", t.Token)
		c.w.named("queue", c.queue)
		c.w.named("key", t.ConcurrencyKey)
		if _, err := c.w.execText(putLeaseSQL); err != nil {
			return err
		}
	}
	return nil
}

// saveKeys records the keys' new state, in key order.
func (c *controlClaim) saveKeys(keys map[string]flowctl.KeyState) error {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		ks := keys[k]
		c.w.named("queue", c.queue)
		c.w.named("key", k)
		c.w.named("vtime", ks.VTime)
		c.w.named("window_start", nullMicros(ks.Window.Start))
		c.w.named("window_starts", int64(ks.Window.Starts))
		if _, err := c.w.execText(putKeySQL); err != nil {
			return err
		}
	}
	return nil
}

// saveQueueState records the queue's new rate window and clock, and the
// key the next claim starts after (nil: the first).
func (c *controlClaim) saveQueueState(res *flowctl.Output, next any) error {
	c.w.named("queue", c.queue)
	c.w.named("window_start", nullMicros(res.Window.Start))
	c.w.named("window_starts", int64(res.Window.Starts))
	c.w.named("vclock", res.Clock)
	c.w.named("cursor", next)
	_, err := c.w.execText(putQueueStateSQL)
	return err
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
