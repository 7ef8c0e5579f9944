package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

const requestCols = "run_id, id, kind, name, args, seq, status, result, code, error, created_at, answered_at"

// CreateRequest records a request and the task that carries it, in one
// write transaction.
func (s *Store) CreateRequest(ctx context.Context, p *store.CreateRequestParams) (*store.Request, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("create request: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("create request: %w", err)
	}
	n := &p.Request
	now := truncate(p.Now)
	var out *store.Request
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			out, refusal = nil, nil
			w.arg(n.RunID)
			rows, err := w.query(qRunOf)
			if err != nil {
				return err
			}
			found, err := w.row(rows, 6)
			if err != nil {
				return err
			}
			if !found {
				refusal = fmt.Errorf("create request %s of run %s: %w", n.ID, n.RunID, store.ErrRunNotFound)
				return nil
			}
			run := &store.Run{ID: n.RunID, Workflow: vString(w.dest[0]), Version: int(vInt(w.dest[1])), Seq: vInt(w.dest[2]),
				TraceContext: vString(w.dest[3])}
			attrs := attrCols{tags: vString(w.dest[4]), meta: w.dest[5]}
			old, err := w.request(n.RunID, n.ID)
			if err != nil {
				return err
			}
			if old != nil && old.Status != store.RequestRejected {
				out = old
				refusal = fmt.Errorf("create request %s of run %s: %w", n.ID, n.RunID, store.ErrDuplicateRequest)
				return nil
			}
			q := qInsertRequest
			if old != nil {
				q = qRenewRequest // a rejected request's id is sent again
			}
			w.arg(n.RunID)
			w.arg(n.ID)
			w.arg(string(n.Kind))
			w.arg(n.Name)
			w.arg(jsonArg(n.Args))
			w.arg(run.Seq)
			w.arg(micros(now))
			if _, err := w.exec(q); err != nil {
				return fmt.Errorf("insert request: %w", err)
			}
			a := &applier{w: w, now: now, nowUS: micros(now)}
			a.insertTasks(run, attrs, []store.NewTask{p.Task})
			if err := a.flushTasks(); err != nil {
				return err
			}
			out = &store.Request{RunID: n.RunID, ID: n.ID, Kind: n.Kind, Name: n.Name, Args: orNil(n.Args),
				Seq: run.Seq, Status: store.RequestPending, CreatedAt: now}
			return nil
		})
	})
	if err != nil {
		return nil, s.fail("create request", err)
	}
	return out, refusal
}

// AnswerRequest answers a request and deletes the task of its fence, in
// one write transaction.
func (s *Store) AnswerRequest(ctx context.Context, p *store.AnswerRequestParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("answer request: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("answer request: %w", err)
	}
	now := truncate(p.Now)
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			a := &applier{w: w, now: now, nowUS: micros(now)}
			held, err := a.fenceHeld(&p.Fence)
			if err != nil {
				return err
			}
			if !held {
				refusal = fmt.Errorf("answer request %s of run %s: task %d: %w", p.ID, p.RunID, p.Fence.TaskID, store.ErrLeaseLost)
				return nil
			}
			if r := p.Request; r != nil {
				// It travelled in its task alone: record it first.
				w.arg(r.RunID)
				w.arg(r.ID)
				w.arg(string(r.Kind))
				w.arg(r.Name)
				w.arg(jsonArg(r.Args))
				w.arg(int64(0))
				w.arg(micros(now))
				if _, err := w.exec(qInsertRequestIfMissing); err != nil {
					return fmt.Errorf("insert request: %w", err)
				}
			}
			w.arg(string(p.Status))
			w.arg(jsonArg(p.Result))
			w.arg(p.Code)
			w.arg(p.Error)
			w.arg(micros(now))
			w.arg(p.RunID)
			w.arg(p.ID)
			res, err := w.exec(qAnswerRequest)
			if err != nil {
				return fmt.Errorf("answer request: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n != 1 {
				refusal = fmt.Errorf("answer request %s of run %s: %w", p.ID, p.RunID, store.ErrRequestNotFound)
				return nil
			}
			return a.deleteFence(&p.Fence)
		})
	})
	if err != nil {
		return s.fail("answer request", err)
	}
	return refusal
}

// GetRequest returns a request of a run by id.
func (s *Store) GetRequest(ctx context.Context, runID, id string) (*store.Request, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get request: %w", err)
	}
	row := s.reader.QueryRowContext(ctx, "SELECT "+requestCols+" FROM requests WHERE run_id = ? AND id = ?", runID, id)
	var (
		r            store.Request
		kind, status string
		args, result sql.NullString
		created      int64
		answered     sql.NullInt64
	)
	err := row.Scan(&r.RunID, &r.ID, &kind, &r.Name, &args, &r.Seq, &status, &result, &r.Code, &r.Error, &created, &answered)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get request %s of run %s: %w", id, runID, store.ErrRequestNotFound)
	}
	if err != nil {
		return nil, s.fail("get request", err)
	}
	r.Kind, r.Status = store.RequestKind(kind), store.RequestStatus(status)
	if args.Valid {
		r.Args = []byte(args.String)
	}
	if result.Valid {
		r.Result = []byte(result.String)
	}
	r.CreatedAt = fromMicros(created)
	if answered.Valid {
		r.AnsweredAt = fromMicros(answered.Int64)
	}
	return &r, nil
}

// request reads a request in the write transaction; nil when there is none.
func (w *wconn) request(runID, id string) (*store.Request, error) {
	w.arg(runID)
	w.arg(id)
	rows, err := w.query(qGetRequestW)
	if err != nil {
		return nil, err
	}
	found, err := w.row(rows, 12)
	if err != nil || !found {
		return nil, err
	}
	v := w.dest
	r := &store.Request{
		RunID: vString(v[0]), ID: vString(v[1]), Kind: store.RequestKind(vString(v[2])), Name: vString(v[3]),
		Args: vJSON(v[4]), Seq: vInt(v[5]), Status: store.RequestStatus(vString(v[6])), Result: vJSON(v[7]),
		Code: vString(v[8]), Error: vString(v[9]), CreatedAt: fromMicros(vInt(v[10])),
	}
	if v[11] != nil {
		r.AnsweredAt = fromMicros(vInt(v[11]))
	}
	return r, nil
}

// DeleteRequest deletes a request of a run, if it is there.
func (s *Store) DeleteRequest(ctx context.Context, runID, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete request: %w", err)
	}
	err := s.withWriter(ctx, func(w *wconn) error {
		w.arg(runID)
		w.arg(id)
		_, err := w.exec(qDeleteRequest)
		return err
	})
	if err != nil {
		return s.fail("delete request", err)
	}
	return nil
}
