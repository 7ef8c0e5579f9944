package sqlite

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The columns read by scanRun (and runFromValues), taskFromValues,
// scanEvent and scanWorker, in order.
const (
	runCols    = "id, workflow, version, kind, status, input, output, error, business_id, key_scope, parent_id, tags, metadata, state, published, seq, created_at, updated_at, finished_at, condition, concurrency_key, trace_context, build_id, deadline, paused, search_attributes"
	taskCols   = "id, run_id, queue, kind, workflow, version, step, idx, attempt, payload, item, priority, ready_at, owner, token, lease_until, claims, created_at, handler, details, flow_key, trace_context, tags, metadata"
	eventCols  = "run_id, seq, kind, step, idx, attempt, name, data, error, at, key"
	workerCols = "id, queues, handlers, host, pid, started_at, seen_at, expires_at, build_id"

	numRunCols  = 26
	numTaskCols = 24
	// runCondCol is the index of condition in runCols.
	runCondCol = 19
	// runTagsCol is the index of tags in runCols, metadata's the next.
	runTagsCol = 11
)

type scanner interface{ Scan(dest ...any) error }

// scanRun reads runCols.
func scanRun(sc scanner) (*store.Run, error) {
	var (
		r                     store.Run
		kind, status, scope   string
		input, output, state  []byte
		published, tags, meta []byte
		created, updated      int64
		finished, deadline    *int64
		businessID, cond      *string
		paused, sattrs        []byte
	)
	dest := []any{&r.ID, &r.Workflow, &r.Version, &kind, &status, &input, &output, &r.Error,
		&businessID, &scope, &r.ParentID, &tags, &meta, &state, &published, &r.Seq,
		&created, &updated, &finished, &cond, &r.ConcurrencyKey, &r.TraceContext, &r.BuildID, &deadline, &paused, &sattrs}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	if businessID != nil {
		r.BusinessID = *businessID
	}
	r.Kind = hephtype.RunKind(kind)
	r.Status = hephtype.RunStatus(status)
	r.KeyScope = businesskey.Scope(scope)
	r.Input, r.Output, r.State, r.Published = input, output, state, published
	var err error
	if r.Tags, r.Metadata, err = decodeAttrs(tags, meta); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if cond != nil {
		var err error
		if r.Condition, err = parseCondition(*cond); err != nil {
			return nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
	}
	if r.Paused, err = store.DecodePause(paused); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
	r.FinishedAt = fromNullMicros(finished)
	r.Deadline = fromNullMicros(deadline)
	if r.SearchAttributes, err = store.DecodeAttrs(sattrs); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &r, nil
}

func scanEvent(sc scanner) (store.Event, error) {
	var (
		e    store.Event
		kind string
		data []byte
		at   int64
		key  *string
	)
	err := sc.Scan(&e.RunID, &e.Seq, &kind, &e.Step, &e.Index, &e.Attempt, &e.Name, &data, &e.Error, &at, &key)
	e.Kind = hephtype.EventKind(kind)
	e.Data = data
	e.At = fromMicros(at)
	if key != nil {
		e.Key = *key
	}
	return e, err
}

// scanWorker reads workerCols.
func scanWorker(sc scanner) (*store.Worker, error) {
	var (
		w                        store.Worker
		queues, handlers         string
		started, seen, expiresAt int64
	)
	if err := sc.Scan(&w.ID, &queues, &handlers, &w.Host, &w.PID, &started, &seen, &expiresAt, &w.BuildID); err != nil {
		return nil, err
	}
	var err error
	if w.Queues, err = parseList(queues); err != nil {
		return nil, fmt.Errorf("worker %s: queues: %w", w.ID, err)
	}
	if w.Handlers, err = parseList(handlers); err != nil {
		return nil, fmt.Errorf("worker %s: handlers: %w", w.ID, err)
	}
	w.StartedAt, w.SeenAt, w.ExpiresAt = fromMicros(started), fromMicros(seen), fromMicros(expiresAt)
	return &w, nil
}

// parseList reads a JSON array of strings; an empty one is nil.
func parseList(s string) ([]string, error) {
	if s == "" || s == "[]" {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, err
	}
	if len(l) == 0 {
		l = nil
	}
	return l, nil
}

// conditionArg returns the condition column for c (NULL when c is zero),
// and c as a read of that column returns it: Since in UTC, to the
// microsecond.
func conditionArg(c store.Condition) (any, store.Condition, error) {
	if c.IsZero() {
		return nil, store.Condition{}, nil
	}
	c.Since = truncate(c.Since)
	b, err := json.Marshal(c)
	if err != nil {
		return nil, store.Condition{}, fmt.Errorf("condition: %w", err)
	}
	stored, err := parseCondition(string(b))
	if err != nil {
		return nil, store.Condition{}, err
	}
	return string(b), stored, nil
}

// parseCondition reads the condition column.
func parseCondition(s string) (store.Condition, error) {
	var c store.Condition
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return store.Condition{}, fmt.Errorf("condition: %w", err)
	}
	if !c.Since.IsZero() {
		c.Since = c.Since.UTC()
	}
	return c, nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// nullMicros stores the zero time as NULL.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return fromMicros(*v)
}

// truncate rounds t down to what the database keeps.
func truncate(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return fromMicros(micros(t))
}

// jsonArg stores an empty JSON value as NULL and others as TEXT.
func jsonArg(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func tagsArg(tags []string) (string, error) {
	if len(tags) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(tags)
	return string(b), err
}

func metadataArg(m map[string]json.RawMessage) (any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Values read from the driver directly (the writer's statements): TEXT
// comes as string, INTEGER as int64, NULL as nil.

func vString(v driver.Value) string {
	s, _ := v.(string)
	return s
}

func vInt(v driver.Value) int64 {
	n, _ := v.(int64)
	return n
}

func vJSON(v driver.Value) json.RawMessage {
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil
		}
		return json.RawMessage(x)
	case []byte:
		if len(x) == 0 {
			return nil
		}
		return json.RawMessage(x)
	}
	return nil
}

func vTime(v driver.Value) time.Time {
	if n, ok := v.(int64); ok {
		return fromMicros(n)
	}
	return time.Time{}
}

// runFromValues reads runCols.
func runFromValues(v []driver.Value) (*store.Run, error) {
	r := &store.Run{
		ID: vString(v[0]), Workflow: vString(v[1]), Version: int(vInt(v[2])),
		Kind: hephtype.RunKind(vString(v[3])), Status: hephtype.RunStatus(vString(v[4])),
		Input: vJSON(v[5]), Output: vJSON(v[6]), Error: vString(v[7]), BusinessID: vString(v[8]),
		KeyScope: businesskey.Scope(vString(v[9])), ParentID: vString(v[10]),
		State: vJSON(v[13]), Published: vJSON(v[14]), Seq: vInt(v[15]),
		CreatedAt: vTime(v[16]), UpdatedAt: vTime(v[17]), FinishedAt: vTime(v[18]),
		ConcurrencyKey: vString(v[20]), TraceContext: vString(v[21]), BuildID: vString(v[22]),
		Deadline: vTime(v[23]),
	}
	var err error
	if r.Tags, r.Metadata, err = decodeAttrs([]byte(vString(v[11])), []byte(vString(v[12]))); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if cond, ok := v[runCondCol].(string); ok {
		var err error
		if r.Condition, err = parseCondition(cond); err != nil {
			return nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
	}
	if r.Paused, err = store.DecodePause([]byte(vString(v[24]))); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	if r.SearchAttributes, err = store.DecodeAttrs([]byte(vString(v[25]))); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return r, nil
}

// taskFromValues reads taskCols.
func taskFromValues(v []driver.Value) (*store.Task, error) {
	t := &store.Task{
		ID: vInt(v[0]), RunID: vString(v[1]), Queue: vString(v[2]), Kind: store.TaskKind(vString(v[3])),
		Workflow: vString(v[4]), Version: int(vInt(v[5])), Step: vString(v[6]), Index: int(vInt(v[7])),
		Attempt: int(vInt(v[8])), Payload: vJSON(v[9]), Item: vJSON(v[10]), Priority: int(vInt(v[11])),
		ReadyAt: vTime(v[12]), Owner: vString(v[13]), Token: vInt(v[14]), LeaseUntil: vTime(v[15]),
		Claims: int(vInt(v[16])), CreatedAt: vTime(v[17]), Handler: vString(v[18]), Details: vJSON(v[19]),
		ConcurrencyKey: vString(v[20]), TraceContext: vString(v[21]),
	}
	// Most runs have neither: no conversion, nothing to decode.
	if tags, meta := vString(v[22]), vString(v[23]); tags != "[]" || meta != "" {
		var err error
		if t.Tags, t.Metadata, err = decodeAttrs([]byte(tags), []byte(meta)); err != nil {
			return nil, fmt.Errorf("task %d: %w", t.ID, err)
		}
	}
	return t, nil
}

// decodeAttrs decodes a run's tags and metadata as their columns (of runs
// and of tasks) hold them: a JSON array ("[]", or empty, for none) and a
// JSON object (empty for NULL). None are nil.
func decodeAttrs(tags, meta []byte) ([]string, map[string]json.RawMessage, error) {
	var (
		ts []string
		m  map[string]json.RawMessage
	)
	if len(tags) > 0 && string(tags) != "[]" {
		if err := json.Unmarshal(tags, &ts); err != nil {
			return nil, nil, fmt.Errorf("tags: %w", err)
		}
		if len(ts) == 0 {
			ts = nil
		}
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, nil, fmt.Errorf("metadata: %w", err)
		}
	}
	return ts, m, nil
}
