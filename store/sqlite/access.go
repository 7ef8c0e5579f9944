package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Admin = (*Store)(nil)

// The statements of store.Admin (migrations 0007_access, 0011_principals).
const (
	tokenCols     = "id, name, role, hash, created_at, revoked_at, last_used_at, principal, options"
	auditCols     = "id, at, actor, role, method, path, action, target, status, detail"
	operationCols = "id, action, filter, reason, created_by, status, total, done, failed, errors, cursor, owner, token, " +
		"lease_until, created_at, updated_at"

	qTokenInsert = "INSERT INTO api_tokens (" + tokenCols + ") VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, ?) ON CONFLICT DO NOTHING"
	qTokenRevoke = "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?"
	// Writes last_used_at (?1) unless the stored one is less than
	// store.TouchInterval (?3 microseconds) older.
	qTokenTouch  = "UPDATE api_tokens SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at < ?1 - ?3)"
	qAuditInsert = "INSERT INTO audit_log (at, actor, role, method, path, action, target, status, detail) " +
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
	qOperationInsert = "INSERT INTO operations (" + operationCols + ") " +
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0, NULL, ?, ?) ON CONFLICT DO NOTHING"
	// Leases the oldest claimable operation to $1 until $2, at $3.
	qOperationClaim = "UPDATE operations SET status = 'running', owner = ?1, token = token + 1, lease_until = ?2, updated_at = ?3 " +
		"WHERE id = (SELECT id FROM operations WHERE status IN ('pending', 'running') AND (status = 'pending' OR lease_until <= ?3) " +
		"ORDER BY created_at, id LIMIT 1) RETURNING " + operationCols
	qOperationSave = "UPDATE operations SET status = ?, total = ?, done = ?, failed = ?, errors = ?, cursor = ?, " +
		"lease_until = COALESCE(?, lease_until), updated_at = ? WHERE id = ? AND owner = ? AND token = ?"
	qOperationExists = "SELECT 1 FROM operations WHERE id = ?"
)

// CreateToken stores a new token; the primary key and the unique indexes
// on the hash and on active names refuse a conflicting one.
func (s *Store) CreateToken(ctx context.Context, t *store.Token) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	opts, err := json.Marshal(t.Options)
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	var n int64
	var refusal error
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			if refusal = w.principalEnabled(t.Principal); refusal != nil {
				return nil
			}
			for _, a := range []driver.Value{t.ID, t.Name, t.Role, t.Hash, micros(t.CreatedAt), t.Principal, string(opts)} {
				w.arg(a)
			}
			var err error
			n, err = w.adhocExecN(qTokenInsert)
			return err
		})
	})
	if err != nil {
		return s.fail("create token", err)
	}
	if refusal != nil {
		return fmt.Errorf("create token %q (name %q): %w", t.ID, t.Name, refusal)
	}
	if n == 0 {
		return fmt.Errorf("create token %q (name %q): %w", t.ID, t.Name, store.ErrTokenExists)
	}
	return nil
}

func scanToken(sc scanner) (*store.Token, error) {
	var t store.Token
	var created int64
	var revoked, used *int64
	var opts string
	if err := sc.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &created, &revoked, &used, &t.Principal, &opts); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(opts), &t.Options); err != nil {
		return nil, fmt.Errorf("token %q: options: %w", t.ID, err)
	}
	t.CreatedAt, t.RevokedAt, t.LastUsedAt = fromMicros(created), fromNullMicros(revoked), fromNullMicros(used)
	return &t, nil
}

// TokenByHash returns the token with a hash.
func (s *Store) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("token by hash: %w", err)
	}
	t, err := scanToken(s.reader.QueryRowContext(ctx, "SELECT "+tokenCols+" FROM api_tokens WHERE hash = ?", hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("token by hash: %w", store.ErrTokenNotFound)
	}
	if err != nil {
		return nil, s.fail("token by hash", err)
	}
	return t, nil
}

// ListTokens returns every token by creation time.
func (s *Store) ListTokens(ctx context.Context) ([]*store.Token, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+tokenCols+" FROM api_tokens ORDER BY created_at, id")
	if err != nil {
		return nil, s.fail("list tokens", err)
	}
	defer rows.Close()
	out := []*store.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, s.fail("list tokens", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list tokens", err)
	}
	return out, nil
}

// RevokeToken marks a token revoked, keeping an earlier revocation.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("revoke token %q: time is zero", id)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(micros(at))
			w.arg(id)
			var err error
			if n, err = w.adhocExecN(qTokenRevoke); err != nil {
				return err
			}
			w.arg(id)
			return w.adhocExec("DELETE FROM sessions WHERE token_id = ?")
		})
	})
	if err != nil {
		return s.fail("revoke token", err)
	}
	if n == 0 {
		return fmt.Errorf("revoke token %q: %w", id, store.ErrTokenNotFound)
	}
	return nil
}

// TouchToken records a use of a token. It reads the stored time first,
// so that most calls do not queue for the writer.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("touch token: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("touch token %q: time is zero", id)
	}
	var used *int64
	err := s.reader.QueryRowContext(ctx, "SELECT last_used_at FROM api_tokens WHERE id = ?", id).Scan(&used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return s.fail("touch token", err)
	case used != nil && *used >= micros(at)-store.TouchInterval.Microseconds():
		return nil
	}
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(micros(at))
			w.arg(id)
			w.arg(store.TouchInterval.Microseconds())
			return w.adhocExec(qTokenTouch)
		})
	})
	if err != nil {
		return s.fail("touch token", err)
	}
	return nil
}

// AppendAudit appends entries to the audit log in one transaction.
func (s *Store) AppendAudit(ctx context.Context, es ...*store.AuditEntry) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := store.CheckAudit(es); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if len(es) == 0 {
		return nil
	}
	ids := make([]int64, len(es))
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for i, e := range es {
				for _, a := range []driver.Value{micros(e.At), e.Actor, e.Role, e.Method, e.Path, e.Action, e.Target, int64(e.Status), e.Detail} {
					w.arg(a)
				}
				if _, err := w.adhocRow(qAuditInsert, 1); err != nil {
					return err
				}
				ids[i] = vInt(w.dest[0])
			}
			return nil
		})
	})
	if err != nil {
		return s.fail("append audit", err)
	}
	for i, e := range es {
		e.ID = ids[i]
	}
	return nil
}

// ListAudit returns audit entries newest first.
func (s *Store) ListAudit(ctx context.Context, p *store.ListAuditParams) ([]*store.AuditEntry, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	var where []string
	var args []any
	if p.Before > 0 {
		where, args = append(where, "id < ?"), append(args, p.Before)
	}
	if p.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, p.Actor)
	}
	if p.Action != "" {
		where, args = append(where, "action = ?"), append(args, p.Action)
	}
	q := "SELECT " + auditCols + " FROM audit_log"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	rows, err := s.reader.QueryContext(ctx, q, append(args, store.AccessLimit(p.Limit))...)
	if err != nil {
		return nil, s.fail("list audit", err)
	}
	defer rows.Close()
	out := []*store.AuditEntry{}
	for rows.Next() {
		var e store.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Role, &e.Method, &e.Path, &e.Action, &e.Target, &e.Status, &e.Detail); err != nil {
			return nil, s.fail("list audit", err)
		}
		e.At = fromMicros(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list audit", err)
	}
	return out, nil
}

func errorsArg(errs []string) (string, error) {
	errs = store.KeptErrors(errs)
	if len(errs) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(errs)
	return string(b), err
}

func parseErrors(s string) ([]string, error) {
	var out []string
	if s == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("operation errors: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// CreateOperation stores a new, pending operation.
func (s *Store) CreateOperation(ctx context.Context, op *store.Operation) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("create operation: %w", err)
	}
	if err := op.Check(); err != nil {
		return fmt.Errorf("create operation: %w", err)
	}
	errs, err := errorsArg(op.Errors)
	if err != nil {
		return fmt.Errorf("create operation: %w", err)
	}
	created := truncate(op.CreatedAt)
	var n int64
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range []driver.Value{op.ID, op.Action, jsonArg(op.Filter), op.Reason, op.CreatedBy, store.OperationPending,
				int64(op.Total), int64(op.Done), int64(op.Failed), errs, op.Cursor, micros(created), micros(created)} {
				w.arg(a)
			}
			var err error
			n, err = w.adhocExecN(qOperationInsert)
			return err
		})
	})
	if err != nil {
		return s.fail("create operation", err)
	}
	if n == 0 {
		return fmt.Errorf("create operation %q: %w", op.ID, store.ErrOperationExists)
	}
	op.Status, op.Owner, op.Token, op.LeaseUntil = store.OperationPending, "", 0, time.Time{}
	op.Errors = store.KeptErrors(op.Errors)
	op.CreatedAt, op.UpdatedAt = created, created
	return nil
}

func scanOperation(sc scanner) (*store.Operation, error) {
	var op store.Operation
	var filter sql.NullString
	var errs string
	var total, done, failed, created, updated int64
	var lease *int64
	err := sc.Scan(&op.ID, &op.Action, &filter, &op.Reason, &op.CreatedBy, &op.Status, &total, &done, &failed, &errs, &op.Cursor,
		&op.Owner, &op.Token, &lease, &created, &updated)
	if err != nil {
		return nil, err
	}
	if filter.Valid && filter.String != "" {
		op.Filter = json.RawMessage(filter.String)
	}
	if op.Errors, err = parseErrors(errs); err != nil {
		return nil, err
	}
	op.Total, op.Done, op.Failed = int(total), int(done), int(failed)
	op.LeaseUntil, op.CreatedAt, op.UpdatedAt = fromNullMicros(lease), fromMicros(created), fromMicros(updated)
	return &op, nil
}

// operationFromValues reads operationCols from the writer's row.
func operationFromValues(v []driver.Value) (*store.Operation, error) {
	op := &store.Operation{
		ID: vString(v[0]), Action: vString(v[1]), Filter: vJSON(v[2]), Reason: vString(v[3]), CreatedBy: vString(v[4]),
		Status: vString(v[5]), Total: int(vInt(v[6])), Done: int(vInt(v[7])), Failed: int(vInt(v[8])), Cursor: vString(v[10]),
		Owner: vString(v[11]), Token: vInt(v[12]), LeaseUntil: vTime(v[13]), CreatedAt: vTime(v[14]), UpdatedAt: vTime(v[15]),
	}
	var err error
	op.Errors, err = parseErrors(vString(v[9]))
	return op, err
}

func (s *Store) queryOperations(ctx context.Context, op, q string, args ...any) ([]*store.Operation, error) {
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail(op, err)
	}
	defer rows.Close()
	out := []*store.Operation{}
	for rows.Next() {
		o, err := scanOperation(rows)
		if err != nil {
			return nil, s.fail(op, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

// GetOperation returns an operation.
func (s *Store) GetOperation(ctx context.Context, id string) (*store.Operation, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get operation: %w", err)
	}
	out, err := s.queryOperations(ctx, "get operation", "SELECT "+operationCols+" FROM operations WHERE id = ?", id)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("get operation %q: %w", id, store.ErrOperationNotFound)
	}
	return out[0], nil
}

// ListOperations returns operations newest first.
func (s *Store) ListOperations(ctx context.Context, p *store.ListOperationsParams) ([]*store.Operation, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	limit := store.AccessLimit(p.Limit)
	if p.BeforeCreatedAt.IsZero() {
		return s.queryOperations(ctx, "list operations", "SELECT "+operationCols+" FROM operations ORDER BY created_at DESC, id DESC LIMIT ?", limit)
	}
	return s.queryOperations(ctx, "list operations", "SELECT "+operationCols+" FROM operations WHERE (created_at, id) < (?, ?) "+
		"ORDER BY created_at DESC, id DESC LIMIT ?", micros(p.BeforeCreatedAt), p.BeforeID, limit)
}

// ClaimOperation leases the oldest claimable operation. The writer is one
// connection and its transactions are IMMEDIATE, so two claims (of this
// process or another) never pick the same one.
func (s *Store) ClaimOperation(ctx context.Context, p *store.ClaimOperationParams) (*store.Operation, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim operation: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("claim operation: %w", err)
	}
	now := truncate(p.Now)
	var out *store.Operation
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			out = nil
			w.arg(p.Owner)
			w.arg(micros(now.Add(p.LeaseFor)))
			w.arg(micros(now))
			found, err := w.adhocRow(qOperationClaim, 16)
			if err != nil || !found {
				return err
			}
			out, err = operationFromValues(w.dest)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("claim operation", err)
	}
	return out, nil
}

// SaveOperation records an operation's progress, fenced by its lease.
func (s *Store) SaveOperation(ctx context.Context, p *store.SaveOperationParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("save operation: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("save operation: %w", err)
	}
	errs, err := errorsArg(p.Errors)
	if err != nil {
		return fmt.Errorf("save operation: %w", err)
	}
	var refusal error
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			for _, a := range []driver.Value{p.Status, int64(p.Total), int64(p.Done), int64(p.Failed), errs, p.Cursor,
				nullMicros(p.LeaseUntil), micros(p.Now), p.ID, p.Owner, p.Token} {
				w.arg(a)
			}
			n, err := w.adhocExecN(qOperationSave)
			if err != nil || n > 0 {
				return err
			}
			w.arg(p.ID)
			found, err := w.adhocRow(qOperationExists, 1)
			if err != nil {
				return err
			}
			refusal = store.ErrOperationNotFound
			if found {
				refusal = store.ErrLeaseLost
			}
			return nil
		})
	})
	if err != nil {
		return s.fail("save operation", err)
	}
	if refusal != nil {
		return fmt.Errorf("save operation %q (owner %q, token %d): %w", p.ID, p.Owner, p.Token, refusal)
	}
	return nil
}
