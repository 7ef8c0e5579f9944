package postgres

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The columns read by scanRun, scanTask and scanEvent, in order.
const (
	runCols     = "id, workflow, version, kind, status, input, output, error, business_id, key_scope, parent_id, tags, metadata, state, published, condition, seq, created_at, updated_at, finished_at, concurrency_key, trace_context, build_id, deadline, paused, search_attributes"
	taskCols    = "id, run_id, queue, kind, workflow, version, step, idx, attempt, payload, item, priority, ready_at, handler, details, owner, token, lease_until, claims, created_at, flow_key, trace_context, tags, metadata"
	historyCols = "run_id, seq, n, key, at, entries"
	workerCols  = "id, queues, handlers, host, pid, started_at, seen_at, expires_at, build_id"
)

type scanner interface{ Scan(dest ...any) error }

// runScan holds what scanRun reads that is not a field of the run as it
// is: the destinations escape to the scanner, so they are one allocation
// instead of one each.
type runScan struct {
	kind, status, scope  string
	input, output, state []byte
	published, meta      []byte
	condition, paused    []byte
	sattrs               []byte
	tags                 []string
	created, updated     time.Time
	finished, deadline   *time.Time
	businessID           *string
	dest                 [26]any
}

// scanRun reads runCols, then extra.
func scanRun(sc scanner, extra ...any) (*store.Run, error) {
	r, v := new(store.Run), new(runScan)
	v.dest = [...]any{&r.ID, &r.Workflow, &r.Version, &v.kind, &v.status, &v.input, &v.output, &r.Error,
		&v.businessID, &v.scope, &r.ParentID, &v.tags, &v.meta, &v.state, &v.published, &v.condition, &r.Seq,
		&v.created, &v.updated, &v.finished, &r.ConcurrencyKey, &r.TraceContext, &r.BuildID, &v.deadline, &v.paused, &v.sattrs}
	dest := v.dest[:]
	if len(extra) > 0 {
		dest = append(dest[:len(dest):len(dest)], extra...)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	if v.businessID != nil {
		r.BusinessID = *v.businessID
	}
	r.Kind = hephtype.RunKind(v.kind)
	r.Status = hephtype.RunStatus(v.status)
	r.KeyScope = businesskey.Scope(v.scope)
	r.Input, r.Output, r.State, r.Published = v.input, v.output, v.state, v.published
	if len(v.tags) > 0 {
		r.Tags = v.tags
	}
	if len(v.meta) > 0 {
		if err := json.Unmarshal(v.meta, &r.Metadata); err != nil {
			return nil, fmt.Errorf("run %s: metadata: %w", r.ID, err)
		}
	}
	if len(v.condition) > 0 {
		if err := json.Unmarshal(v.condition, &r.Condition); err != nil {
			return nil, fmt.Errorf("run %s: condition: %w", r.ID, err)
		}
		r.Condition.Since = r.Condition.Since.UTC()
	}
	var err error
	if r.Paused, err = store.DecodePause(v.paused); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	r.CreatedAt = v.created.UTC()
	r.UpdatedAt = v.updated.UTC()
	r.FinishedAt = fromNull(v.finished)
	r.Deadline = fromNull(v.deadline)
	if r.SearchAttributes, err = store.DecodeAttrs(v.sattrs); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return r, nil
}

// taskScan is scanTask's runScan.
type taskScan struct {
	kind           string
	payload, item  []byte
	details        []byte
	owner          *string
	ready, created time.Time
	leaseUntil     *time.Time
	flowKey        *string
	tags           []string
	meta           []byte
	dest           [24]any
}

func scanTask(sc scanner) (*store.Task, error) {
	t, v := new(store.Task), new(taskScan)
	v.dest = [...]any{&t.ID, &t.RunID, &t.Queue, &v.kind, &t.Workflow, &t.Version, &t.Step, &t.Index,
		&t.Attempt, &v.payload, &v.item, &t.Priority, &v.ready, &t.Handler, &v.details, &v.owner, &t.Token, &v.leaseUntil, &t.Claims, &v.created, &v.flowKey, &t.TraceContext,
		&v.tags, &v.meta}
	if err := sc.Scan(v.dest[:]...); err != nil {
		return nil, err
	}
	if len(v.tags) > 0 {
		t.Tags = v.tags
	}
	if len(v.meta) > 0 {
		if err := json.Unmarshal(v.meta, &t.Metadata); err != nil {
			return nil, fmt.Errorf("task %d: metadata: %w", t.ID, err)
		}
	}
	t.Kind = store.TaskKind(v.kind)
	t.Payload, t.Item, t.Details = v.payload, v.item, v.details
	if v.flowKey != nil {
		t.ConcurrencyKey = *v.flowKey
	}
	if v.owner != nil {
		t.Owner = *v.owner
	}
	t.ReadyAt = v.ready.UTC()
	t.LeaseUntil = fromNull(v.leaseUntil)
	t.CreatedAt = v.created.UTC()
	return t, nil
}

func scanWorker(sc scanner) (*store.Worker, error) {
	var (
		w                      store.Worker
		started, seen, expires time.Time
		pid                    int64
	)
	if err := sc.Scan(&w.ID, &w.Queues, &w.Handlers, &w.Host, &pid, &started, &seen, &expires, &w.BuildID); err != nil {
		return nil, err
	}
	if len(w.Queues) == 0 {
		w.Queues = nil
	}
	if len(w.Handlers) == 0 {
		w.Handlers = nil
	}
	w.PID = int(pid)
	w.StartedAt, w.SeenAt, w.ExpiresAt = started.UTC(), seen.UTC(), expires.UTC()
	return &w, nil
}

func fromNull(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// truncate rounds t down to what the database keeps (microseconds), in
// UTC.
func truncate(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// jsonArg stores an empty JSON value as NULL; the statement casts the
// text to jsonb.
func jsonArg(b json.RawMessage) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

func metadataArg(m map[string]json.RawMessage) (*string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// conditionArg is a run's condition as JSON, or NULL when there is none.
func conditionArg(c store.Condition) (*string, error) {
	if c.IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err // a time out of JSON's range
	}
	s := string(b)
	return &s, nil
}

// nullString stores "" as NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// queries holds the statements of a store, with its schema's name in
// them.
type queries struct {
	loadRuns, loadFenced, loadKeys, writeCreates, writeUpdates, lookup          string
	guard, created, vacuumTasks, gen, genGuard                                  string
	claimOne, claimMany, claimHandlers, heartbeat, release, nextReady, stranded string
	getTask                                                                     string
	strandedPerRun                                                              string
	getRun, findRun, runExists, history, pruneLock, prune                       string
	registerWorker, removeWorker, listWorkers                                   string
	listRuns                                                                    string // up to the WHERE clause
	// flow holds the statements of flow control (flowctl.go, queues.go),
	// by their text with § for the schema.
	flow map[string]string
}

func newQueries(schema string) queries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return queries{
		loadRuns: s("SELECT " + runCols + ", unique_key FROM §runs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE"),
		// The first statement of a guessed Apply (applier.guess): it locks
		// the runs ($1, $2 their xmin as known) and the fencing tasks ($3,
		// $4 their tokens) in the order loadRuns and loadFenced do, and
		// fails unless each is as known, and no keyed change ($5 runs, $6
		// keys) is in the history yet. Under READ COMMITTED a row updated
		// while the statement waited for its lock is checked again in its
		// new version.
		guard: s(`SELECT §fresh(
			(SELECT count(*) FROM (SELECT FROM §runs r JOIN unnest($1::text[], $2::int8[]) AS x(id, xmin) ON r.id = x.id
				WHERE r.xmin::text::int8 = x.xmin ORDER BY r.id FOR UPDATE OF r) AS l) = cardinality($1::text[])
			AND (SELECT count(*) FROM (SELECT FROM §tasks t JOIN unnest($3::int8[], $4::int8[]) AS x(id, token) ON t.id = x.id
				WHERE t.token = x.token AND t.owner IS NOT NULL ORDER BY t.id FOR UPDATE OF t) AS l) = cardinality($3::int8[])
			AND NOT EXISTS (SELECT FROM unnest($5::text[], $6::text[]) AS x(run_id, key)
				JOIN §history h ON h.run_id = x.run_id AND h.key = x.key WHERE h.key IS NOT NULL))`),
		// The version generation (migration 0030), read by an Apply whose
		// creates carry one; genGuard fails a guessed Apply unless every
		// generation of $1 is the store's. Neither locks the row: a rule
		// or state change is in force for the creates whose transactions
		// read the generation after it committed.
		gen:      s("SELECT n FROM §version_generation"),
		genGuard: s("SELECT §fresh((SELECT n FROM §version_generation) = ALL($1::int8[]))"),
		// Not TRUNCATE: a queue grows back, and truncating takes a lock
		// that stops every claim while it waits for it.
		vacuumTasks: s("VACUUM (SKIP_LOCKED, TRUNCATE false) §tasks"),
		// After the creates of a guessed Apply: fails unless this
		// transaction inserted every run of $1 (writeCreates skips one that
		// conflicts), so that COMMIT can go with the writes.
		created: s(`SELECT §fresh((SELECT count(*) FROM §runs WHERE id = ANY($1::text[])
			AND xmin = pg_current_xact_id()::xid) = cardinality($1::text[]))`),
		loadFenced: s(`SELECT id, run_id, token, owner IS NOT NULL, kind, step, idx FROM §tasks
			WHERE id = ANY($1::int8[]) ORDER BY id FOR UPDATE`),
		// The keys of keyed changes ($1 runs, $2 keys) already in the
		// history, through history_key.
		loadKeys: s(`SELECT h.run_id, h.key FROM unnest($1::text[], $2::text[]) AS x(run_id, key)
			JOIN §history h ON h.run_id = x.run_id AND h.key = x.key WHERE h.key IS NOT NULL`),
		writeCreates: s(writeCreatesSQL),
		writeUpdates: s(writeUpdatesSQL),
		lookup:       s("SELECT (SELECT id FROM §runs WHERE id = $1), (SELECT id FROM §runs WHERE unique_key = $2)"),
		// Controlled queues are claimed by claimControlled, not here.
		claimOne:      s(claimSQL("queue = $1 AND NOT EXISTS (SELECT 1 FROM §queues c WHERE c.name = $1 AND c.controlled)")),
		claimMany:     s(claimSQL("queue = ANY($1::text[]) AND queue <> ALL(ARRAY(SELECT name FROM §queues WHERE name = ANY($1::text[]) AND controlled))")),
		claimHandlers: s(claimHandlersSQL),
		heartbeat:     s(heartbeatSQL),
		getTask:       s("SELECT " + taskCols + " FROM §tasks WHERE id = $1"),
		release:       s(leaseSQL("owner = NULL, lease_until = NULL")),
		nextReady: s(`SELECT min(least(r.t, l.t)) FROM unnest($1::text[]) AS q(name)
			CROSS JOIN LATERAL (SELECT min(ready_at) FROM §tasks WHERE queue = q.name AND owner IS NULL
				AND ` + handlerCond("$2") + ` AND ` + notPaused + `) AS r(t)
			CROSS JOIN LATERAL (SELECT min(lease_until) FROM §tasks WHERE queue = q.name AND owner IS NOT NULL
				AND ready_at < coalesce(r.t, 'infinity') AND ` + handlerCond("$2") + `) AS l(t)`),
		// Claimable at $3 (ready, and unleased or its lease expired), ready
		// before $2, with a handler that is not empty and not among $4.
		stranded: s(`SELECT ` + taskCols + ` FROM §tasks
			WHERE queue = $1 AND ready_at < $2 AND ready_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
				AND handler <> '' AND handler <> ALL($4::text[]) AND ` + notPaused + `
			ORDER BY ready_at, id LIMIT $5`),
		strandedPerRun: s(`SELECT ` + taskCols + ` FROM (SELECT DISTINCT ON (run_id) ` + taskCols + ` FROM §tasks
			WHERE queue = $1 AND ready_at < $2 AND ready_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
				AND handler <> '' AND handler <> ALL($4::text[]) AND ` + notPaused + `
			ORDER BY run_id, ready_at, id) oldest
			ORDER BY ready_at, id LIMIT $5`),
		getRun:    s("SELECT " + runCols + " FROM §runs WHERE id = $1"),
		findRun:   s("SELECT " + runCols + " FROM §runs WHERE business_id = $1 AND ($2 = '' OR workflow = $2) ORDER BY created_at DESC, id DESC LIMIT 1"),
		runExists: s("SELECT EXISTS (SELECT 1 FROM §runs WHERE id = $1)"),
		// The rows holding entries after $2 (a row holds seq .. seq+n-1);
		// each holds at least one, so $3 rows hold the first $3 entries.
		history: s("SELECT " + historyCols + " FROM §history WHERE run_id = $1 AND seq + n > $2 + 1 ORDER BY seq LIMIT $3"),
		// Finished runs without tasks (tasks_run tells): a run's tasks are
		// work it left to do.
		pruneLock: s(`SELECT id FROM §runs r WHERE created_at < $1 AND finished_at < $1
			AND status = ANY($3::text[])
			AND ($4::text[] IS NULL OR workflow = ANY($4::text[])) AND workflow <> ALL($5::text[])
			AND NOT EXISTS (SELECT 1 FROM §tasks t WHERE t.run_id = r.id)
			ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED`),
		// Those of the locked runs $1 that still have no task (the snapshot
		// of this statement, taken with them locked, sees every task
		// written for them), with their history, step logs and event waits.
		prune: s(`WITH d AS (
				SELECT x.id FROM unnest($1::text[]) AS x(id) WHERE NOT EXISTS (SELECT 1 FROM §tasks t WHERE t.run_id = x.id)
			), e AS (DELETE FROM §history WHERE run_id IN (SELECT id FROM d)),
			l AS (DELETE FROM §step_logs WHERE run_id IN (SELECT id FROM d)),
			w AS (DELETE FROM §event_waits WHERE run_id IN (SELECT id FROM d))
			DELETE FROM §runs WHERE id IN (SELECT id FROM d)`),
		registerWorker: s(`INSERT INTO §workers (` + workerCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, handlers = excluded.handlers, host = excluded.host,
				pid = excluded.pid, started_at = excluded.started_at, seen_at = excluded.seen_at, expires_at = excluded.expires_at,
				build_id = excluded.build_id`),
		removeWorker: s("DELETE FROM §workers WHERE id = $1"),
		// Records expired for an hour go: a process whose clock runs ahead
		// does not delete the records of live workers.
		listWorkers: s(`WITH gone AS (DELETE FROM §workers WHERE expires_at < $1::timestamptz - interval '1 hour')
			SELECT ` + workerCols + ` FROM §workers WHERE expires_at > $1 ORDER BY id`),
		listRuns: s("SELECT " + runCols + " FROM §runs"),
		flow:     flowQueries(s),
	}
}

// notPaused keeps the tasks whose run is not paused (store.Run.Paused):
// one probe of runs_paused, which holds the paused runs only, per task a
// claim's walk meets.
const notPaused = "NOT EXISTS (SELECT 1 FROM §runs pr WHERE pr.id = run_id AND pr.paused IS NOT NULL)"

// handlerCond keeps the tasks that the handlers in the array parameter p
// can run: all when p is NULL (a nil list), else those whose handler is
// empty or in the list.
func handlerCond(p string) string {
	return "(" + p + "::text[] IS NULL OR handler = '' OR handler = ANY(" + p + "::text[]))"
}

// handlerSetCond keeps the tasks of a claim whose handler is in the array
// parameter p (store.ClaimParams.HandlerSet: it holds the empty handler
// unless the claim is strict), or all when p is NULL.
func handlerSetCond(p string) string {
	return "(" + p + "::text[] IS NULL OR handler = ANY(" + p + "::text[]))"
}

// claimSQL leases up to $5 tasks of the queues selected by queueCond (over
// $1) that the handlers $6 can run to owner $2 until $3, at time $4. Rows
// locked by others (being claimed, or fenced by an Apply) are skipped,
// never waited for. A task's token grows by one at every claim, so its
// tokens never repeat. The handlers filter the rows the walk of
// tasks_claim meets; they do not change the walk.
func claimSQL(queueCond string) string {
	return `WITH picked AS (
		SELECT id FROM §tasks
		WHERE ` + queueCond + ` AND ready_at <= $4 AND (lease_until IS NULL OR lease_until <= $4)
			AND ` + handlerSetCond("$6") + ` AND ` + notPaused + `
		ORDER BY priority DESC, ready_at, id LIMIT $5
		FOR UPDATE SKIP LOCKED)
	UPDATE §tasks t SET owner = $2, token = t.token + 1, lease_until = $3, claims = t.claims + 1
	FROM picked WHERE t.id = picked.id
	RETURNING ` + prefixed("t.", taskCols)
}

// claimHandlersSQL is claimSQL for a claim that lists handlers ($6, its
// HandlerSet) of the queues $1 (an array): per queue and handler, the
// first $5 claimable tasks in claim order, locked (skipping those another
// transaction holds, as claimSQL does), read through tasks_handler — a
// bounded read, whatever the queue holds for other handlers: walking
// tasks_claim and filtering on the handler read the whole backlog of a
// queue whose front held another worker's tasks — then the first $5 of
// them all leased. The others stay locked until the claim commits, in the
// same transaction. Controlled queues are left out before any of their
// tasks is read (and locked), as in claimSQL.
var claimHandlersSQL = `WITH cand AS (
		SELECT c.id, c.priority, c.ready_at FROM (SELECT u.name FROM unnest($1::text[]) AS u(name)
			WHERE NOT EXISTS (SELECT 1 FROM §queues cq WHERE cq.name = u.name AND cq.controlled)) AS qn
		CROSS JOIN unnest($6::text[]) AS h(name)
		CROSS JOIN LATERAL (
			SELECT id, priority, ready_at FROM §tasks
			WHERE queue = qn.name AND handler = h.name AND ready_at <= $4 AND (lease_until IS NULL OR lease_until <= $4)
				AND ` + notPaused + `
			ORDER BY priority DESC, ready_at, id LIMIT $5
			FOR UPDATE SKIP LOCKED) AS c),
	picked AS (SELECT id FROM cand ORDER BY priority DESC, ready_at, id LIMIT $5)
	UPDATE §tasks t SET owner = $2, token = t.token + 1, lease_until = $3, claims = t.claims + 1
	FROM picked WHERE t.id = picked.id
	RETURNING ` + prefixed("t.", taskCols)

// leaseSQL sets columns of the leased tasks still held among ($1 ids, $2
// tokens), locking them in id order (so that two of these never
// deadlock), and returns their ids.
func leaseSQL(set string) string {
	return `WITH held AS (
		SELECT t.id FROM §tasks t JOIN unnest($1::int8[], $2::int8[]) AS l(id, token)
			ON t.id = l.id AND t.token = l.token
		WHERE t.owner IS NOT NULL ORDER BY t.id FOR UPDATE OF t)
	UPDATE §tasks t SET ` + set + ` FROM held WHERE t.id = held.id RETURNING t.id`
}

// heartbeatSQL is leaseSQL that extends the leases to $3 and records the
// details ($4 task ids, $5 details as text) of those it names.
var heartbeatSQL = `WITH held AS (
		SELECT t.id FROM §tasks t JOIN unnest($1::int8[], $2::int8[]) AS l(id, token)
			ON t.id = l.id AND t.token = l.token
		WHERE t.owner IS NOT NULL ORDER BY t.id FOR UPDATE OF t)
	UPDATE §tasks t SET lease_until = $3,
		details = CASE WHEN d.id IS NULL THEN t.details ELSE d.details::jsonb END
	FROM held LEFT JOIN unnest($4::int8[], $5::text[]) AS d(id, details) ON d.id = held.id
	WHERE t.id = held.id RETURNING t.id`

func prefixed(p, cols string) string {
	parts := strings.Split(cols, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}

// unnest is the list of array parameters from $n, one per type.
func unnest(n int, types ...string) string {
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = "$" + itoa(n+i) + "::" + t + "[]"
	}
	return strings.Join(parts, ", ")
}

// The history rows of writeUpdatesSQL and writeCreatesSQL, from $n: run
// id, first seq, number of entries, key, entries (see history.go); $now is
// the time.
func historySQL(n, now int) string {
	return `INSERT INTO §history (seq, at, n, run_id, key, entries)
	SELECT x.seq, $` + itoa(now) + `::timestamptz, x.n, x.run_id, x.key, x.entries
	FROM unnest(` + unnest(n, "text", "int8", "int4", "text", "text") + `) AS x(run_id, seq, n, key, entries)`
}

// The task columns, from $n: run id, queue, kind, workflow, version, step,
// idx, attempt, payload, item, priority, ready_at, handler, details (see
// tasks); $now is the time. The rows are inserted in the order of the
// arrays, so their ids ascend in that order.
//
// $key is the array of the tasks' flow keys (NULL for tasks flow control
// does not govern), $trace that of their runs' trace contexts. runs names
// the rows (id, tags, metadata) of the runs the statement writes: each
// task copies its run's tags and metadata from them (they never change),
// and the tasks of a run not among them are not inserted.
func tasksSQL(n, now, key, trace int, runs string) string {
	return `INSERT INTO §tasks (run_id, queue, kind, workflow, version, step, idx, attempt, payload, item,
		priority, ready_at, handler, details, created_at, flow_key, trace_context, tags, metadata)
	SELECT x.run_id, x.queue, x.kind, x.workflow, x.version, x.step, x.idx, x.attempt, x.payload::jsonb,
		x.item::jsonb, x.priority, x.ready_at, x.handler, x.details::jsonb, $` + itoa(now) + `::timestamptz, x.flow_key,
		x.trace_context, a.tags, a.metadata
	FROM unnest(` + unnest(n, "text", "text", "text", "text", "int8", "text", "int8", "int8", "text", "text", "int8",
		"timestamptz", "text", "text") + `, $` + itoa(key) + `::text[], $` + itoa(trace) + `::text[])
		WITH ORDINALITY AS x(run_id, queue, kind, workflow, version, step, idx, attempt, payload, item, priority,
			ready_at, handler, details, flow_key, trace_context, n)
	JOIN ` + runs + ` a ON a.id = x.run_id`
}

func itoa(n int) string { return strconv.Itoa(n) }

// writeUpdatesSQL writes the updates of a segment in one statement: it
// deletes the fenced tasks ($1: the caller holds them locked and checked
// their tokens), cancels the tasks that match ($2 run ids, $3 kinds, $4
// steps, $5 indexes), updates the runs ($6-$15, one row per run: its last
// state), appends the history ($17-$21) and enqueues tasks ($22-$35, their
// flow keys $37 and trace contexts $38; their tags and metadata those of
// the runs updated); $16 is now, $39 the runs' build ids, $40 their paused
// columns (Run.Paused), $42 their search_attributes (Run.SearchAttributes,
// copied to run_attributes by trigger); it releases the leases of the runs
// $41 (but of the fenced tasks), and notifies their holders as it does those of cancelled
// tasks. The sub-statements
// share one snapshot, so the cancellations never see the tasks the segment
// enqueues (the applier leaves a cancellation that must see them to a later
// segment). It returns the number of fenced tasks deleted (by their fence
// or by a cancellation, whichever came first: a row deleted by one is
// skipped by the other) and of runs updated (the caller holds all of them
// locked: anything short is a bug), the new task ids in ascending order,
// which is the order of the arrays, and the number of runs whose leased
// tasks the cancellations deleted: each is notified on channel $36 (at
// commit; the fenced tasks, which their holders complete, do not count). A
// commit that cancels no leased task calls no pg_notify.
var writeUpdatesSQL = `WITH f AS (
	DELETE FROM §tasks WHERE id = ANY($1::int8[]) RETURNING id
), c AS (
	DELETE FROM §tasks t USING unnest($2::text[], $3::text[], $4::text[], $5::int8[]) AS m(run_id, kind, step, idx)
	WHERE t.run_id = m.run_id AND (m.kind = '' OR t.kind = m.kind)
		AND (m.step = '' OR t.step = m.step) AND (m.idx < 0 OR t.idx = m.idx)
	RETURNING t.id, t.run_id, t.owner IS NOT NULL AS leased
), rl AS (
	UPDATE §tasks t SET owner = NULL, lease_until = NULL
	WHERE t.run_id = ANY($41::text[]) AND t.owner IS NOT NULL AND t.id <> ALL($1::int8[])
	RETURNING t.run_id
), u AS (
	UPDATE §runs r SET status = x.status, output = x.output::jsonb, error = x.error, state = x.state::jsonb,
		published = x.published::jsonb, condition = x.condition::jsonb, seq = x.seq, updated_at = $16::timestamptz,
		finished_at = x.finished_at, unique_key = x.unique_key, build_id = x.build_id, paused = x.paused::jsonb,
		search_attributes = x.sattrs::jsonb
	FROM unnest(` + unnest(6, "text", "text", "text", "text", "text", "text", "int8", "timestamptz", "text", "text") + `, $39::text[], $40::text[], $42::text[])
		AS x(id, status, output, error, state, published, seq, finished_at, unique_key, condition, build_id, paused, sattrs)
	WHERE r.id = x.id RETURNING r.id, r.tags, r.metadata
), e AS (
	` + historySQL(17, 16) + `
), t AS (
	` + tasksSQL(22, 16, 37, 38, "u") + `
	ORDER BY x.n
	RETURNING id
)
SELECT (SELECT count(*) FROM f) + (SELECT count(*) FROM c WHERE c.id = ANY($1::int8[])),
	(SELECT count(*) FROM u), ARRAY(SELECT id FROM t ORDER BY id),
	(SELECT count(pg_notify($36, x.run_id)) FROM (SELECT run_id FROM c WHERE leased AND c.id <> ALL($1::int8[])
		UNION SELECT run_id FROM rl) AS x)`

// writeCreatesSQL inserts the runs of a segment with their history and
// tasks in one statement: $1-$17 are the runs' columns (tags as a JSON
// array), $18 now, $19-$23 the history, $24-$37 the tasks, $38-$39 the
// fences of creates (run ids and task ids: the caller holds the tasks
// locked and checked their tokens), $40 the runs' concurrency keys, $41 the
// tasks' flow keys, $42 the runs' trace contexts and $43 the tasks', $44
// the runs' build ids, $45 their deadlines, $46 their search_attributes (the
// tasks' tags and metadata are those of the runs inserted). ON
// CONFLICT DO NOTHING covers both the primary key and the business-key
// index: a run that conflicts (with a run of another transaction, or an
// earlier one of the arrays) writes nothing, neither history nor tasks, and
// leaves its fence. It returns the ids of the runs inserted, the ids of the
// new tasks in ascending order with their runs, and the number of fenced
// tasks deleted.
var writeCreatesSQL = `WITH r AS (
	INSERT INTO §runs (id, workflow, version, kind, status, input, output, error, business_id,
		key_scope, unique_key, parent_id, tags, metadata, state, seq, created_at, updated_at, finished_at, concurrency_key,
		trace_context, build_id, deadline, search_attributes)
	SELECT x.id, x.workflow, x.version, x.kind, x.status, x.input::jsonb, x.output::jsonb, x.error, x.business_id,
		x.key_scope, x.unique_key, x.parent_id,
		CASE WHEN x.tags IS NULL THEN '{}'::text[] ELSE ARRAY(SELECT json_array_elements_text(x.tags::json)) END,
		x.metadata::jsonb, x.state::jsonb, x.seq, $18::timestamptz, $18::timestamptz, x.finished_at, x.ckey,
		x.trace, x.build_id, x.deadline, x.sattrs::jsonb
	FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::int8[],
		$17::timestamptz[], $40::text[], $42::text[], $44::text[], $45::timestamptz[], $46::text[]) WITH ORDINALITY AS x(id, workflow, version, kind, status, input, output,
		error, business_id, key_scope, unique_key, parent_id, tags, metadata, state, seq, finished_at, ckey, trace, build_id, deadline,
		sattrs, n)
	ORDER BY x.n
	ON CONFLICT DO NOTHING
	RETURNING id, tags, metadata
), f AS (
	DELETE FROM §tasks t USING unnest($38::text[], $39::int8[]) AS x(run_id, id)
	WHERE t.id = x.id AND x.run_id IN (SELECT id FROM r)
	RETURNING t.id
), e AS (
	` + historySQL(19, 18) + `
	WHERE x.run_id IN (SELECT id FROM r)
), t AS (
	` + tasksSQL(24, 18, 41, 43, "r") + `
	ORDER BY x.n
	RETURNING id, run_id
)
SELECT ARRAY(SELECT id FROM r), ARRAY(SELECT id FROM t ORDER BY id), ARRAY(SELECT run_id FROM t ORDER BY id),
	(SELECT count(*) FROM f)`

// tagsArg is a run's tags as a JSON array, or NULL for none.
func tagsArg(tags []string) *string {
	if len(tags) == 0 {
		return nil
	}
	b, err := json.Marshal(tags)
	if err != nil {
		panic(err) // strings always marshal
	}
	s := string(b)
	return &s
}

// readyAt is when a new task is ready: its ReadyAt, or now when zero.
func readyAt(t store.NewTask, now time.Time) time.Time {
	if t.ReadyAt.IsZero() {
		return now
	}
	return truncate(t.ReadyAt)
}
