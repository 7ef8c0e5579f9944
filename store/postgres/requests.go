package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

const requestCols = "run_id, id, kind, name, args, seq, status, result, code, error, created_at, answered_at"

// requestQueries are the statements of requests, in the store's schema.
type requestQueries struct {
	runOf, insert, create, get, del, fenceHeld, answer, fence, insertTask string
}

func newRequestQueries(schema string) *requestQueries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return &requestQueries{
		// The share lock keeps PruneRuns away until the request and its
		// task are written.
		runOf: s("SELECT workflow, version, seq, trace_context, tags, metadata::text FROM §runs WHERE id = $1 FOR KEY SHARE"),
		insert: s(`INSERT INTO §requests (run_id, id, kind, name, args, seq, status, created_at)
			VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, 'pending', $7) ON CONFLICT (run_id, id) DO NOTHING`),
		// A rejected request's id sent again: recorded anew in its place.
		create: s(`INSERT INTO §requests AS r (run_id, id, kind, name, args, seq, status, created_at)
			VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, 'pending', $7) ON CONFLICT (run_id, id) DO UPDATE
			SET kind = excluded.kind, name = excluded.name, args = excluded.args, seq = excluded.seq, status = 'pending',
				result = NULL, code = '', error = '', created_at = excluded.created_at, answered_at = NULL
			WHERE r.status = 'rejected'`),
		get:       s("SELECT " + requestCols + " FROM §requests WHERE run_id = $1 AND id = $2"),
		del:       s("DELETE FROM §requests WHERE run_id = $1 AND id = $2"),
		fenceHeld: s("SELECT 1 FROM §tasks WHERE id = $1 AND token = $2 AND owner IS NOT NULL FOR UPDATE"),
		answer: s(`UPDATE §requests SET status = $3, result = $4::text::jsonb, code = $5, error = $6, answered_at = $7
			WHERE run_id = $1 AND id = $2`),
		fence: s("DELETE FROM §tasks WHERE id = $1 AND token = $2 AND owner IS NOT NULL"),
		insertTask: s(`INSERT INTO §tasks (run_id, queue, kind, workflow, version, step, idx, attempt, payload, item,
			priority, ready_at, handler, details, created_at, trace_context, tags, metadata)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::text::jsonb, $10::text::jsonb, $11, $12, $13, $14::text::jsonb, $15, $16,
				$17, $18::text::jsonb)`),
	}
}

// rq returns the statements of requests; requests are rare enough that
// building them per call costs nothing that matters.
func (s *Store) rq() *requestQueries { return newRequestQueries(s.schema) }

// jsonText is a JSON value as a text parameter, NULL when absent.
func jsonText(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	v := string(b)
	return &v
}

// CreateRequest records a request and the task that carries it, in one
// transaction, and tells listeners that the task's queue has a ready task.
func (s *Store) CreateRequest(ctx context.Context, p *store.CreateRequestParams) (*store.Request, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("create request: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("create request: %w", err)
	}
	q := s.rq()
	n := &p.Request
	now := truncate(p.Now)
	t := &p.Task
	ready := truncate(t.ReadyAt)
	if ready.IsZero() {
		ready = now
	}
	var out *store.Request
	var refusal error
	// A transaction that fails before COMMIT wrote nothing; one whose
	// COMMIT is lost may have: running it again then finds the request
	// (ErrDuplicateRequest), never records it twice.
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out, refusal = nil, nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var workflow, trace string
			var version, seq int64
			var tags []string
			var meta *string
			err := tx.QueryRow(ctx, q.runOf, n.RunID).Scan(&workflow, &version, &seq, &trace, &tags, &meta)
			if errors.Is(err, pgx.ErrNoRows) {
				refusal = fmt.Errorf("create request %s of run %s: %w", n.ID, n.RunID, store.ErrRunNotFound)
				return nil
			}
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, q.create, n.RunID, n.ID, string(n.Kind), n.Name, jsonText(n.Args), seq, now)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				old, err := scanRequest(tx.QueryRow(ctx, q.get, n.RunID, n.ID))
				if err != nil {
					return err
				}
				out = old
				refusal = fmt.Errorf("create request %s of run %s: %w", n.ID, n.RunID, store.ErrDuplicateRequest)
				return nil
			}
			if _, err := tx.Exec(ctx, q.insertTask, n.RunID, t.Queue, string(t.Kind), workflow, version, t.Step, int64(t.Index),
				int64(t.Attempt), jsonText(t.Payload), jsonText(t.Item), int64(t.Priority), ready, t.Handler, jsonText(t.Details), now, trace,
				nonNil(tags), meta); err != nil {
				return err
			}
			out = &store.Request{RunID: n.RunID, ID: n.ID, Kind: n.Kind, Name: n.Name, Args: orNil(n.Args),
				Seq: seq, Status: store.RequestPending, CreatedAt: now}
			return nil
		})
	})
	if err != nil {
		return nil, s.fail("create request", err)
	}
	if refusal == nil && !ready.After(now) {
		// A hint: a lost one costs latency only.
		_, _ = s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.channel, t.Queue)
	}
	return out, refusal
}

// AnswerRequest answers a request and deletes the task of its fence, in
// one transaction.
func (s *Store) AnswerRequest(ctx context.Context, p *store.AnswerRequestParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("answer request: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("answer request: %w", err)
	}
	q := s.rq()
	now := truncate(p.Now)
	var refusal error
	// Running it again after a lost COMMIT that did commit finds the
	// lease gone (ErrLeaseLost): the caller's answer stands either way.
	err := s.idempotent(ctx, func(ctx context.Context) error {
		refusal = nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var one int
			err := tx.QueryRow(ctx, q.fenceHeld, p.Fence.TaskID, p.Fence.Token).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				refusal = fmt.Errorf("answer request %s of run %s: task %d: %w", p.ID, p.RunID, p.Fence.TaskID, store.ErrLeaseLost)
				return nil
			}
			if err != nil {
				return err
			}
			if r := p.Request; r != nil {
				// It travelled in its task alone: record it first.
				if _, err := tx.Exec(ctx, q.insert, r.RunID, r.ID, string(r.Kind), r.Name, jsonText(r.Args), int64(0), now); err != nil {
					return err
				}
			}
			tag, err := tx.Exec(ctx, q.answer, p.RunID, p.ID, string(p.Status), jsonText(p.Result), p.Code, p.Error, now)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				refusal = fmt.Errorf("answer request %s of run %s: %w", p.ID, p.RunID, store.ErrRequestNotFound)
				return errRefused
			}
			if _, err := tx.Exec(ctx, q.fence, p.Fence.TaskID, p.Fence.Token); err != nil {
				return err
			}
			return nil
		})
	})
	if errors.Is(err, errRefused) {
		return refusal
	}
	if err != nil {
		return s.fail("answer request", err)
	}
	if refusal == nil {
		s.tasksDeleted(1)
	}
	return refusal
}

// errRefused rolls back a transaction whose change was refused.
var errRefused = errors.New("refused")

// GetRequest returns a request of a run by id.
func (s *Store) GetRequest(ctx context.Context, runID, id string) (*store.Request, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get request: %w", err)
	}
	q := s.rq()
	var r *store.Request
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		r, err = scanRequest(s.pool.QueryRow(ctx, q.get, runID, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get request %s of run %s: %w", id, runID, store.ErrRequestNotFound)
	}
	if err != nil {
		return nil, s.fail("get request", err)
	}
	return r, nil
}

func scanRequest(row pgx.Row) (*store.Request, error) {
	var (
		r            store.Request
		kind, status string
		args, result []byte
		answered     *time.Time
	)
	if err := row.Scan(&r.RunID, &r.ID, &kind, &r.Name, &args, &r.Seq, &status, &result, &r.Code, &r.Error, &r.CreatedAt, &answered); err != nil {
		return nil, err
	}
	r.Kind, r.Status = store.RequestKind(kind), store.RequestStatus(status)
	r.Args, r.Result = orNil(args), orNil(result)
	r.CreatedAt = r.CreatedAt.UTC()
	if answered != nil {
		r.AnsweredAt = answered.UTC()
	}
	return &r, nil
}

// DeleteRequest deletes a request of a run, if it is there.
func (s *Store) DeleteRequest(ctx context.Context, runID, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete request: %w", err)
	}
	q := s.rq()
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, q.del, runID, id)
		return err
	})
	if err != nil {
		return s.fail("delete request", err)
	}
	return nil
}
