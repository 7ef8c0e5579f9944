package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The columns read by scanRun, scanTask and scanEvent, in order.
const (
	runCols   = "id, workflow, version, kind, status, input, output, error, business_id, key_scope, parent_id, tags, metadata, state, published, seq, created_at, updated_at, finished_at"
	taskCols  = "id, run_id, queue, kind, workflow, version, step, idx, attempt, payload, item, priority, ready_at, owner, token, lease_until, claims, created_at"
	eventCols = "run_id, seq, kind, step, idx, attempt, name, data, error, at"
)

type scanner interface{ Scan(dest ...any) error }

// scanRun reads runCols, then extra.
func scanRun(sc scanner, extra ...any) (*store.Run, error) {
	var (
		r                    store.Run
		kind, status, scope  string
		input, output, state []byte
		published, meta      []byte
		tags                 []string
		created, updated     time.Time
		finished             *time.Time
		businessID           *string
	)
	dest := []any{&r.ID, &r.Workflow, &r.Version, &kind, &status, &input, &output, &r.Error,
		&businessID, &scope, &r.ParentID, &tags, &meta, &state, &published, &r.Seq,
		&created, &updated, &finished}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	if businessID != nil {
		r.BusinessID = *businessID
	}
	r.Kind = hephtype.RunKind(kind)
	r.Status = hephtype.RunStatus(status)
	r.KeyScope = businesskey.Scope(scope)
	r.Input, r.Output, r.State, r.Published = input, output, state, published
	if len(tags) > 0 {
		r.Tags = tags
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &r.Metadata); err != nil {
			return nil, fmt.Errorf("run %s: metadata: %w", r.ID, err)
		}
	}
	r.CreatedAt = created.UTC()
	r.UpdatedAt = updated.UTC()
	r.FinishedAt = fromNull(finished)
	return &r, nil
}

func scanTask(sc scanner) (*store.Task, error) {
	var (
		t              store.Task
		kind           string
		payload, item  []byte
		owner          *string
		ready, created time.Time
		leaseUntil     *time.Time
	)
	err := sc.Scan(&t.ID, &t.RunID, &t.Queue, &kind, &t.Workflow, &t.Version, &t.Step, &t.Index,
		&t.Attempt, &payload, &item, &t.Priority, &ready, &owner, &t.Token, &leaseUntil, &t.Claims, &created)
	if err != nil {
		return nil, err
	}
	t.Kind = store.TaskKind(kind)
	t.Payload, t.Item = payload, item
	if owner != nil {
		t.Owner = *owner
	}
	t.ReadyAt = ready.UTC()
	t.LeaseUntil = fromNull(leaseUntil)
	t.CreatedAt = created.UTC()
	return &t, nil
}

func scanEvent(sc scanner) (store.Event, error) {
	var (
		e    store.Event
		kind string
		data []byte
		at   time.Time
	)
	err := sc.Scan(&e.RunID, &e.Seq, &kind, &e.Step, &e.Index, &e.Attempt, &e.Name, &data, &e.Error, &at)
	e.Kind = hephtype.EventKind(kind)
	e.Data = data
	e.At = at.UTC()
	return e, err
}

func fromNull(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
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
	loadRuns, loadFenced, createRun, updateRun, lookup string
	claimOne, claimMany, heartbeat, release, nextReady string
	getRun, findRun, runExists, history, prune         string
	listRuns                                           string // up to the WHERE clause
}

func newQueries(schema string) queries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return queries{
		loadRuns: s("SELECT " + runCols + ", unique_key FROM §runs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE"),
		loadFenced: s(`SELECT id, run_id, token, owner IS NOT NULL, kind, step, idx FROM §tasks
			WHERE id = ANY($1::int8[]) ORDER BY id FOR UPDATE`),
		createRun: s(createRunSQL),
		updateRun: s(updateRunSQL),
		lookup:    s("SELECT (SELECT id FROM §runs WHERE id = $1), (SELECT id FROM §runs WHERE unique_key = $2)"),
		claimOne:  s(claimSQL("queue = $1")),
		claimMany: s(claimSQL("queue = ANY($1::text[])")),
		heartbeat: s(leaseSQL("lease_until = $3")),
		release:   s(leaseSQL("owner = NULL, lease_until = NULL")),
		nextReady: s(`SELECT min(least(r.t, l.t)) FROM unnest($1::text[]) AS q(name)
			CROSS JOIN LATERAL (SELECT min(ready_at) FROM §tasks WHERE queue = q.name AND owner IS NULL) AS r(t)
			CROSS JOIN LATERAL (SELECT min(lease_until) FROM §tasks WHERE queue = q.name AND owner IS NOT NULL
				AND ready_at < coalesce(r.t, 'infinity')) AS l(t)`),
		getRun:    s("SELECT " + runCols + " FROM §runs WHERE id = $1"),
		findRun:   s("SELECT " + runCols + " FROM §runs WHERE business_id = $1 AND ($2 = '' OR workflow = $2) ORDER BY created_at DESC, id DESC LIMIT 1"),
		runExists: s("SELECT EXISTS (SELECT 1 FROM §runs WHERE id = $1)"),
		history:   s("SELECT " + eventCols + " FROM §events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"),
		prune: s(`WITH doomed AS (
			SELECT id FROM §runs WHERE finished_at < $1
			AND status IN ('completed', 'failed', 'cancelled', 'continued')
			ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
			DELETE FROM §runs r USING doomed WHERE r.id = doomed.id`),
		listRuns: s("SELECT " + runCols + " FROM §runs"),
	}
}

// claimSQL leases up to $5 tasks of the queues selected by queueCond (over
// $1) to owner $2 until $3, at time $4. Rows locked by others (being
// claimed, or fenced by an Apply) are skipped, never waited for. A task's
// token grows by one at every claim, so its tokens never repeat.
func claimSQL(queueCond string) string {
	return `WITH picked AS (
		SELECT id FROM §tasks
		WHERE ` + queueCond + ` AND ready_at <= $4 AND (lease_until IS NULL OR lease_until <= $4)
		ORDER BY priority DESC, ready_at, id LIMIT $5
		FOR UPDATE SKIP LOCKED)
	UPDATE §tasks t SET owner = $2, token = t.token + 1, lease_until = $3, claims = t.claims + 1
	FROM picked WHERE t.id = picked.id
	RETURNING ` + prefixed("t.", taskCols)
}

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

func prefixed(p, cols string) string {
	parts := strings.Split(cols, ", ")
	for i := range parts {
		parts[i] = p + parts[i]
	}
	return strings.Join(parts, ", ")
}

// createRunSQL inserts a run with its history and tasks in one statement.
// ON CONFLICT DO NOTHING covers both the primary key and the business-key
// index: a conflicting run writes nothing, and the first column says
// whether the run was inserted. Task ids come back in ascending order,
// which is the order of the arrays (the rows are inserted in that order).
//
// $1 id, $2 workflow, $3 version, $4 kind, $5 status, $6 input, $7 output,
// $8 error, $9 business_id, $10 key_scope, $11 unique_key, $12 parent_id,
// $13 tags, $14 metadata, $15 state, $16 seq, $17 now, $18 finished_at;
// history $19-$25; tasks $26-$34.
const createRunSQL = `WITH r AS (
	INSERT INTO §runs (id, workflow, version, kind, status, input, output, error, business_id,
		key_scope, unique_key, parent_id, tags, metadata, state, seq, created_at, updated_at, finished_at)
	VALUES ($1, $2::text, $3::int8, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11, $12, $13::text[],
		$14::jsonb, $15::jsonb, $16, $17::timestamptz, $17::timestamptz, $18::timestamptz)
	ON CONFLICT DO NOTHING
	RETURNING id
), e AS (
	INSERT INTO §events (run_id, seq, kind, step, idx, attempt, name, data, error, at)
	SELECT r.id, x.n, x.kind, x.step, x.idx, x.attempt, x.name, x.data::jsonb, x.error, $17::timestamptz
	FROM r, unnest($19::text[], $20::text[], $21::int8[], $22::int8[], $23::text[], $24::text[], $25::text[])
		WITH ORDINALITY AS x(kind, step, idx, attempt, name, data, error, n)
), t AS (
	INSERT INTO §tasks (run_id, queue, kind, workflow, version, step, idx, attempt, payload, item,
		priority, ready_at, created_at)
	SELECT r.id, x.queue, x.kind, $2::text, $3::int8, x.step, x.idx, x.attempt, x.payload::jsonb,
		x.item::jsonb, x.priority, x.ready_at, $17::timestamptz
	FROM r, unnest($26::text[], $27::text[], $28::text[], $29::int8[], $30::int8[], $31::text[],
		$32::text[], $33::int8[], $34::timestamptz[])
		WITH ORDINALITY AS x(queue, kind, step, idx, attempt, payload, item, priority, ready_at, n)
	ORDER BY x.n
	RETURNING id
)
SELECT (SELECT count(*) FROM r), ARRAY(SELECT id FROM t ORDER BY id)`

// updateRunSQL writes one change of a run in one statement: it deletes
// the fenced task ($2, $3; NULL when unfenced), cancels the tasks that
// match ($4-$6), updates the run ($7-$15), appends the history after seq
// $16 ($17-$23) and enqueues tasks ($24 workflow, $25 version, $26-$34).
// The sub-statements share one snapshot, so the cancellation never sees
// the tasks the same change enqueues. It returns the number of fenced
// tasks deleted and of runs updated (the caller holds both rows locked:
// anything but 1 is a bug), and the new task ids in ascending order.
const updateRunSQL = `WITH f AS (
	DELETE FROM §tasks WHERE id = $2::int8 AND token = $3::int8 RETURNING 1
), c AS (
	DELETE FROM §tasks t USING unnest($4::text[], $5::text[], $6::int8[]) AS m(kind, step, idx)
	WHERE t.run_id = $1 AND (m.kind = '' OR t.kind = m.kind) AND (m.step = '' OR t.step = m.step)
		AND (m.idx < 0 OR t.idx = m.idx)
), u AS (
	UPDATE §runs SET status = $7, output = $8::jsonb, error = $9, state = $10::jsonb,
		published = $11::jsonb, seq = $12, updated_at = $13::timestamptz,
		finished_at = $14::timestamptz, unique_key = $15
	WHERE id = $1 RETURNING 1
), e AS (
	INSERT INTO §events (run_id, seq, kind, step, idx, attempt, name, data, error, at)
	SELECT $1, $16::int8 + x.n, x.kind, x.step, x.idx, x.attempt, x.name, x.data::jsonb, x.error, $13::timestamptz
	FROM unnest($17::text[], $18::text[], $19::int8[], $20::int8[], $21::text[], $22::text[], $23::text[])
		WITH ORDINALITY AS x(kind, step, idx, attempt, name, data, error, n)
), t AS (
	INSERT INTO §tasks (run_id, queue, kind, workflow, version, step, idx, attempt, payload, item,
		priority, ready_at, created_at)
	SELECT $1, x.queue, x.kind, $24::text, $25::int8, x.step, x.idx, x.attempt, x.payload::jsonb, x.item::jsonb,
		x.priority, x.ready_at, $13::timestamptz
	FROM unnest($26::text[], $27::text[], $28::text[], $29::int8[], $30::int8[], $31::text[],
		$32::text[], $33::int8[], $34::timestamptz[])
		WITH ORDINALITY AS x(queue, kind, step, idx, attempt, payload, item, priority, ready_at, n)
	ORDER BY x.n
	RETURNING id
)
SELECT (SELECT count(*) FROM f), (SELECT count(*) FROM u), ARRAY(SELECT id FROM t ORDER BY id)`

// eventArgs are the seven history arrays of createRunSQL and updateRunSQL.
func eventArgs(evs []store.NewEvent) []any {
	n := len(evs)
	kinds, steps, names, errs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	idx, attempts := make([]int64, n), make([]int64, n)
	data := make([]*string, n)
	for i, e := range evs {
		kinds[i], steps[i], names[i], errs[i] = string(e.Kind), e.Step, e.Name, e.Error
		idx[i], attempts[i] = int64(e.Index), int64(e.Attempt)
		data[i] = jsonArg(e.Data)
	}
	return []any{kinds, steps, idx, attempts, names, data, errs}
}

// taskArgs are the nine task arrays of createRunSQL and updateRunSQL,
// with the ready times resolved (zero: now).
func taskArgs(ts []store.NewTask, now time.Time) []any {
	n := len(ts)
	queues, kinds, steps := make([]string, n), make([]string, n), make([]string, n)
	idx, attempts, prios := make([]int64, n), make([]int64, n), make([]int64, n)
	payloads, items := make([]*string, n), make([]*string, n)
	ready := make([]time.Time, n)
	for i, t := range ts {
		queues[i], kinds[i], steps[i] = t.Queue, string(t.Kind), t.Step
		idx[i], attempts[i], prios[i] = int64(t.Index), int64(t.Attempt), int64(t.Priority)
		payloads[i], items[i] = jsonArg(t.Payload), jsonArg(t.Item)
		ready[i] = readyAt(t, now)
	}
	return []any{queues, kinds, steps, idx, attempts, payloads, items, prios, ready}
}

// readyAt is when a new task is ready: its ReadyAt, or now when zero.
func readyAt(t store.NewTask, now time.Time) time.Time {
	if t.ReadyAt.IsZero() {
		return now
	}
	return truncate(t.ReadyAt)
}
