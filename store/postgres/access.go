package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Admin = (*Store)(nil)

const (
	tokenCols     = "id, name, role, hash, created_at, revoked_at, last_used_at, principal, options"
	auditCols     = "id, at, actor, role, method, path, action, target, status, detail"
	operationCols = "id, action, filter, reason, created_by, status, total, done, failed, errors, cursor, owner, token, " +
		"lease_until, created_at, updated_at"
)

// accessQueries are the statements of store.Admin (migrations
// 0009_access and 0013_principals), in the store's schema.
type accessQueries struct {
	principalInsert, principalGroups, principalGet, principals string
	principalOff, principalTokens, sessionsOf, sessionsExpired string
	sessionInsert, sessionByHash, sessionDelete                string
	tokenInsert, tokenByHash, tokens, tokenRevoke, tokenTouch  string
	auditInsert, audit                                         string
	opInsert, opGet, opList, opListBefore, opClaim, opSave     string
	opExists                                                   string
}

func newAccessQueries(schema string) *accessQueries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return &accessQueries{
		// Inserts a token of an enabled principal ($6), locking the
		// principal's row (FOR SHARE) so that a concurrent disable either
		// revokes the token or runs first and refuses it.
		tokenInsert: s("INSERT INTO §api_tokens (" + tokenCols + ") SELECT $1, $2, $3, $4, $5, NULL, NULL, $6, $7 " +
			"FROM §principals WHERE name = $6 AND disabled_at IS NULL FOR SHARE ON CONFLICT DO NOTHING"),
		principalInsert: s("INSERT INTO §principals (" + principalCols + ") VALUES ($1, $2, $3, $4, $4, NULL) ON CONFLICT DO NOTHING"),
		principalGroups: s("UPDATE §principals SET groups = $2, updated_at = $3 WHERE name = $1"),
		principalGet:    s("SELECT " + principalCols + " FROM §principals WHERE name = $1"),
		principals:      s("SELECT " + principalCols + " FROM §principals ORDER BY name"),
		principalOff:    s("UPDATE §principals SET disabled_at = coalesce(disabled_at, $2), updated_at = $2 WHERE name = $1"),
		principalTokens: s("UPDATE §api_tokens SET revoked_at = $2 WHERE principal = $1 AND revoked_at IS NULL"),
		sessionsOf:      s("DELETE FROM §sessions WHERE principal = $1"),
		sessionsExpired: s("DELETE FROM §sessions WHERE expires_at <= $1"),
		// Inserts a session of an enabled principal ($2), as tokenInsert.
		sessionInsert: s("INSERT INTO §sessions (" + sessionCols + ") SELECT $1, $2, $3, $4, $5, $6, $7 " +
			"FROM §principals WHERE name = $2 AND disabled_at IS NULL FOR SHARE ON CONFLICT DO NOTHING"),
		sessionByHash: s("SELECT " + sessionCols + " FROM §sessions WHERE hash = $1"),
		sessionDelete: s("DELETE FROM §sessions WHERE hash = $1"),
		tokenByHash:   s("SELECT " + tokenCols + " FROM §api_tokens WHERE hash = $1"),
		tokens:        s("SELECT " + tokenCols + " FROM §api_tokens ORDER BY created_at, id"),
		// Revokes a token and ends the sessions signed in with it.
		tokenRevoke: s("WITH ended AS (DELETE FROM §sessions WHERE token_id = $1) " +
			"UPDATE §api_tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1"),
		// Writes last_used_at $2 unless the stored one is $3 (store.TouchInterval
		// before $2) or later: such a touch reads the row and writes nothing.
		tokenTouch: s("UPDATE §api_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)"),
		auditInsert: s("INSERT INTO §audit_log (at, actor, role, method, path, action, target, status, detail) " +
			"VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id"),
		audit: s("SELECT " + auditCols + " FROM §audit_log"),
		opInsert: s("INSERT INTO §operations (" + operationCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', 0, NULL, $12, $12) " +
			"ON CONFLICT DO NOTHING"),
		opGet:        s("SELECT " + operationCols + " FROM §operations WHERE id = $1"),
		opList:       s("SELECT " + operationCols + " FROM §operations ORDER BY created_at DESC, id DESC LIMIT $1"),
		opListBefore: s("SELECT " + operationCols + " FROM §operations WHERE (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $1"),
		// Leases the oldest claimable operation to $1 until $2, at $3.
		// SKIP LOCKED: a concurrent claim takes the next one rather than
		// waiting for this one's row, which it would find taken.
		opClaim: s("UPDATE §operations o SET status = 'running', owner = $1, token = o.token + 1, lease_until = $2, updated_at = $3 " +
			"FROM (SELECT id FROM §operations WHERE status IN ('pending', 'running') AND (status = 'pending' OR lease_until <= $3) " +
			"ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) c WHERE o.id = c.id RETURNING " + prefixed("o.", operationCols)),
		opSave: s("UPDATE §operations SET status = $4, total = $5, done = $6, failed = $7, errors = $8, cursor = $9, " +
			"lease_until = coalesce($10, lease_until), updated_at = $11 WHERE id = $1 AND owner = $2 AND token = $3"),
		opExists: s("SELECT 1 FROM §operations WHERE id = $1"),
	}
}

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
	err = s.once(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.acc.tokenInsert, t.ID, t.Name, t.Role, t.Hash, truncate(t.CreatedAt), t.Principal, string(opts))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return s.fail("create token", err)
	}
	if n == 0 {
		if refusal := s.principalRefusal(ctx, t.Principal); refusal != nil {
			return fmt.Errorf("create token %q (name %q): %w", t.ID, t.Name, refusal)
		}
		return fmt.Errorf("create token %q (name %q): %w", t.ID, t.Name, store.ErrTokenExists)
	}
	return nil
}

func scanToken(row pgx.Row) (*store.Token, error) {
	var t store.Token
	var revoked, used *time.Time
	var opts string
	if err := row.Scan(&t.ID, &t.Name, &t.Role, &t.Hash, &t.CreatedAt, &revoked, &used, &t.Principal, &opts); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(opts), &t.Options); err != nil {
		return nil, fmt.Errorf("token %q: options: %w", t.ID, err)
	}
	t.CreatedAt, t.RevokedAt, t.LastUsedAt = t.CreatedAt.UTC(), fromNull(revoked), fromNull(used)
	return &t, nil
}

// TokenByHash returns the token with a hash.
func (s *Store) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("token by hash: %w", err)
	}
	var out *store.Token
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanToken(s.pool.QueryRow(ctx, s.acc.tokenByHash, hash))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("token by hash: %w", store.ErrTokenNotFound)
	}
	if err != nil {
		return nil, s.fail("token by hash", err)
	}
	return out, nil
}

// ListTokens returns every token by creation time.
func (s *Store) ListTokens(ctx context.Context) ([]*store.Token, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	var out []*store.Token
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.acc.tokens)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Token, error) { return scanToken(row) })
		return err
	})
	if err != nil {
		return nil, s.fail("list tokens", err)
	}
	if out == nil {
		out = []*store.Token{}
	}
	return out, nil
}

// RevokeToken marks a token revoked, keeping an earlier revocation (so
// that running it twice does no harm).
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("revoke token %q: time is zero", id)
	}
	var n int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.acc.tokenRevoke, id, truncate(at))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return s.fail("revoke token", err)
	}
	if n == 0 {
		return fmt.Errorf("revoke token %q: %w", id, store.ErrTokenNotFound)
	}
	return nil
}

// TouchToken records a use of a token, at most once per
// store.TouchInterval.
func (s *Store) TouchToken(ctx context.Context, id string, at time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("touch token: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("touch token %q: time is zero", id)
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.acc.tokenTouch, id, truncate(at), truncate(at).Add(-store.TouchInterval))
		return err
	})
	if err != nil {
		return s.fail("touch token", err)
	}
	return nil
}

// AppendAudit appends entries to the audit log: one batch, which
// PostgreSQL runs as one implicit transaction (one commit).
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
	err := s.once(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		for _, e := range es {
			b.Queue(s.acc.auditInsert, truncate(e.At), e.Actor, e.Role, e.Method, e.Path, e.Action, e.Target, int32(e.Status), e.Detail)
		}
		br := s.pool.SendBatch(ctx, b)
		for i := range es {
			if err := br.QueryRow().Scan(&ids[i]); err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
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
	args := []any{store.AccessLimit(p.Limit)}
	var where []string
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.Before > 0 {
		add("id < $%d", p.Before)
	}
	if p.Actor != "" {
		add("actor = $%d", p.Actor)
	}
	if p.Action != "" {
		add("action = $%d", p.Action)
	}
	q := s.acc.audit
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT $1"
	var out []*store.AuditEntry
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.AuditEntry, error) {
			var e store.AuditEntry
			var status int32
			err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Role, &e.Method, &e.Path, &e.Action, &e.Target, &status, &e.Detail)
			e.At, e.Status = e.At.UTC(), int(status)
			return &e, err
		})
		return err
	})
	if err != nil {
		return nil, s.fail("list audit", err)
	}
	if out == nil {
		out = []*store.AuditEntry{}
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
	err = s.once(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.acc.opInsert, op.ID, op.Action, textArg(op.Filter), op.Reason, op.CreatedBy, store.OperationPending,
			int64(op.Total), int64(op.Done), int64(op.Failed), errs, op.Cursor, created)
		n = tag.RowsAffected()
		return err
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

func scanOperation(row pgx.Row) (*store.Operation, error) {
	var op store.Operation
	var filter *string
	var errs string
	var total, done, failed int64
	var lease *time.Time
	err := row.Scan(&op.ID, &op.Action, &filter, &op.Reason, &op.CreatedBy, &op.Status, &total, &done, &failed, &errs, &op.Cursor,
		&op.Owner, &op.Token, &lease, &op.CreatedAt, &op.UpdatedAt)
	if err != nil {
		return nil, err
	}
	if filter != nil && *filter != "" {
		op.Filter = json.RawMessage(*filter)
	}
	if errs != "" && errs != "[]" {
		if err := json.Unmarshal([]byte(errs), &op.Errors); err != nil {
			return nil, fmt.Errorf("operation %q: errors: %w", op.ID, err)
		}
	}
	op.Total, op.Done, op.Failed = int(total), int(done), int(failed)
	op.LeaseUntil, op.CreatedAt, op.UpdatedAt = fromNull(lease), op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	return &op, nil
}

func (s *Store) queryOperations(ctx context.Context, op, q string, args ...any) ([]*store.Operation, error) {
	var out []*store.Operation
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Operation, error) { return scanOperation(row) })
		return err
	})
	if err != nil {
		return nil, s.fail(op, err)
	}
	if out == nil {
		out = []*store.Operation{}
	}
	return out, nil
}

// GetOperation returns an operation.
func (s *Store) GetOperation(ctx context.Context, id string) (*store.Operation, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get operation: %w", err)
	}
	out, err := s.queryOperations(ctx, "get operation", s.acc.opGet, id)
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
		return s.queryOperations(ctx, "list operations", s.acc.opList, limit)
	}
	return s.queryOperations(ctx, "list operations", s.acc.opListBefore, limit, truncate(p.BeforeCreatedAt), p.BeforeID)
}

// ClaimOperation leases the oldest claimable operation. A lost answer
// leaves the operation leased to p.Owner until its lease ends, when
// another claim takes it.
func (s *Store) ClaimOperation(ctx context.Context, p *store.ClaimOperationParams) (*store.Operation, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim operation: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("claim operation: %w", err)
	}
	now := truncate(p.Now)
	var out *store.Operation
	err := s.once(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanOperation(s.pool.QueryRow(ctx, s.acc.opClaim, p.Owner, now.Add(p.LeaseFor), now))
		if errors.Is(err, pgx.ErrNoRows) {
			out, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, s.fail("claim operation", err)
	}
	return out, nil
}

// SaveOperation records an operation's progress, fenced by its lease.
// Writing the same progress twice does no harm, so a transient failure
// runs it again.
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
	err = s.idempotent(ctx, func(ctx context.Context) error {
		refusal = nil
		tag, err := s.pool.Exec(ctx, s.acc.opSave, p.ID, p.Owner, p.Token, p.Status, int64(p.Total), int64(p.Done), int64(p.Failed),
			errs, p.Cursor, nullTime(p.LeaseUntil), truncate(p.Now))
		if err != nil || tag.RowsAffected() > 0 {
			return err
		}
		var one int
		err = s.pool.QueryRow(ctx, s.acc.opExists, p.ID).Scan(&one)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			refusal = store.ErrOperationNotFound
		case err != nil:
			return err
		default:
			refusal = store.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return s.fail("save operation", err)
	}
	if refusal != nil {
		return fmt.Errorf("save operation %q (owner %q, token %d): %w", p.ID, p.Owner, p.Token, refusal)
	}
	return nil
}
