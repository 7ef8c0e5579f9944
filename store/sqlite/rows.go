package sqlite

import (
	"encoding/json"
	"fmt"
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
		r                     store.Run
		kind, status, scope   string
		input, output, state  []byte
		published, tags, meta []byte
		created, updated      int64
		finished              *int64
		businessID            *string
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
		if err := json.Unmarshal(tags, &r.Tags); err != nil {
			return nil, fmt.Errorf("run %s: tags: %w", r.ID, err)
		}
		if len(r.Tags) == 0 {
			r.Tags = nil
		}
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &r.Metadata); err != nil {
			return nil, fmt.Errorf("run %s: metadata: %w", r.ID, err)
		}
	}
	r.CreatedAt = fromMicros(created)
	r.UpdatedAt = fromMicros(updated)
	r.FinishedAt = fromNullMicros(finished)
	return &r, nil
}

func scanTask(sc scanner) (*store.Task, error) {
	var (
		t              store.Task
		kind           string
		payload, item  []byte
		owner          *string
		ready, created int64
		leaseUntil     *int64
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
	t.ReadyAt = fromMicros(ready)
	t.LeaseUntil = fromNullMicros(leaseUntil)
	t.CreatedAt = fromMicros(created)
	return &t, nil
}

func scanEvent(sc scanner) (store.Event, error) {
	var (
		e    store.Event
		kind string
		data []byte
		at   int64
	)
	err := sc.Scan(&e.RunID, &e.Seq, &kind, &e.Step, &e.Index, &e.Attempt, &e.Name, &data, &e.Error, &at)
	e.Kind = hephtype.EventKind(kind)
	e.Data = data
	e.At = fromMicros(at)
	return e, err
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
