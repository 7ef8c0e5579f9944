package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// The statements of principals and sessions (migration 0011_principals).
const (
	principalCols = "name, kind, groups, created_at, updated_at, disabled_at"
	sessionCols   = "hash, principal, groups, role, token_id, created_at, expires_at"

	qPrincipalInsert = "INSERT INTO principals (" + principalCols + ") VALUES (?, ?, ?, ?, ?, NULL) ON CONFLICT DO NOTHING"
	qPrincipalGroups = "UPDATE principals SET groups = ?, updated_at = ? WHERE name = ?"
	qPrincipalGet    = "SELECT " + principalCols + " FROM principals WHERE name = ?"
	qPrincipalOff    = "UPDATE principals SET disabled_at = COALESCE(disabled_at, ?1), updated_at = ?1 WHERE name = ?2"
	qPrincipalTokens = "UPDATE api_tokens SET revoked_at = ? WHERE principal = ? AND revoked_at IS NULL"
	qSessionsOf      = "DELETE FROM sessions WHERE principal = ?"
	qSessionsExpired = "DELETE FROM sessions WHERE expires_at <= ?"
	qSessionInsert   = "INSERT INTO sessions (" + sessionCols + ") VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)

func groupsArg(groups []string) (string, error) {
	if len(groups) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(groups)
	return string(b), err
}

func parseGroups(s string) ([]string, error) {
	out := []string{}
	if s == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return out, nil
}

// principalEnabled returns nil when the principal exists and is enabled,
// else the store's refusal (ErrPrincipalNotFound or
// ErrPrincipalDisabled). Inside a write transaction.
func (w *wconn) principalEnabled(name string) error {
	w.arg(name)
	found, err := w.adhocRow("SELECT disabled_at FROM principals WHERE name = ?", 1)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("principal %q: %w", name, store.ErrPrincipalNotFound)
	case w.dest[0] != nil:
		return fmt.Errorf("principal %q: %w", name, store.ErrPrincipalDisabled)
	}
	return nil
}

func principalFromValues(v []driver.Value) (*store.Principal, error) {
	groups, err := parseGroups(vString(v[2]))
	if err != nil {
		return nil, err
	}
	return &store.Principal{Name: vString(v[0]), Kind: vString(v[1]), Groups: groups, CreatedAt: vTime(v[3]), UpdatedAt: vTime(v[4]), DisabledAt: vTime(v[5])}, nil
}

func scanPrincipal(sc scanner) (*store.Principal, error) {
	var p store.Principal
	var groups string
	var created, updated int64
	var disabled *int64
	if err := sc.Scan(&p.Name, &p.Kind, &groups, &created, &updated, &disabled); err != nil {
		return nil, err
	}
	var err error
	if p.Groups, err = parseGroups(groups); err != nil {
		return nil, err
	}
	p.CreatedAt, p.UpdatedAt, p.DisabledAt = fromMicros(created), fromMicros(updated), fromNullMicros(disabled)
	return &p, nil
}

// EnsurePrincipal creates a principal or returns (and maybe regroups) the
// stored one, in one write transaction.
func (s *Store) EnsurePrincipal(ctx context.Context, p *store.EnsurePrincipalParams) (*store.Principal, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("ensure principal: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("ensure principal: %w", err)
	}
	groups, err := groupsArg(p.Groups)
	if err != nil {
		return nil, fmt.Errorf("ensure principal %q: %w", p.Name, err)
	}
	now := micros(p.Now)
	var out *store.Principal
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range []driver.Value{p.Name, p.Kind, groups, now, now} {
				w.arg(a)
			}
			n, err := w.adhocExecN(qPrincipalInsert)
			if err != nil {
				return err
			}
			if n == 0 && p.SetGroups {
				w.arg(groups)
				w.arg(now)
				w.arg(p.Name)
				if err := w.adhocExec(qPrincipalGroups); err != nil {
					return err
				}
			}
			w.arg(p.Name)
			if _, err := w.adhocRow(qPrincipalGet, 6); err != nil {
				return err
			}
			out, err = principalFromValues(w.dest)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("ensure principal", err)
	}
	return out, nil
}

// GetPrincipal returns a principal.
func (s *Store) GetPrincipal(ctx context.Context, name string) (*store.Principal, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get principal: %w", err)
	}
	p, err := scanPrincipal(s.reader.QueryRowContext(ctx, qPrincipalGet, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get principal %q: %w", name, store.ErrPrincipalNotFound)
	}
	if err != nil {
		return nil, s.fail("get principal", err)
	}
	return p, nil
}

// ListPrincipals returns every principal by name.
func (s *Store) ListPrincipals(ctx context.Context) ([]*store.Principal, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+principalCols+" FROM principals ORDER BY name")
	if err != nil {
		return nil, s.fail("list principals", err)
	}
	defer rows.Close()
	out := []*store.Principal{}
	for rows.Next() {
		p, err := scanPrincipal(rows)
		if err != nil {
			return nil, s.fail("list principals", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list principals", err)
	}
	return out, nil
}

// DisablePrincipal disables a principal, revokes its tokens and deletes
// its sessions, in one write transaction.
func (s *Store) DisablePrincipal(ctx context.Context, name string, at time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("disable principal: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("disable principal %q: time is zero", name)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(micros(at))
			w.arg(name)
			var err error
			if n, err = w.adhocExecN(qPrincipalOff); err != nil || n == 0 {
				return err
			}
			w.arg(micros(at))
			w.arg(name)
			if err := w.adhocExec(qPrincipalTokens); err != nil {
				return err
			}
			w.arg(name)
			return w.adhocExec(qSessionsOf)
		})
	})
	if err != nil {
		return s.fail("disable principal", err)
	}
	if n == 0 {
		return fmt.Errorf("disable principal %q: %w", name, store.ErrPrincipalNotFound)
	}
	return nil
}

// CreateSession stores a session of an enabled principal, after deleting
// the expired ones.
func (s *Store) CreateSession(ctx context.Context, se *store.Session) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if err := se.Check(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	groups, err := groupsArg(se.Groups)
	if err != nil {
		return fmt.Errorf("create session of %q: %w", se.Principal, err)
	}
	var n int64
	var refusal error
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			if refusal = w.principalEnabled(se.Principal); refusal != nil {
				return nil
			}
			w.arg(micros(se.CreatedAt))
			if err := w.adhocExec(qSessionsExpired); err != nil {
				return err
			}
			for _, a := range []driver.Value{se.Hash, se.Principal, groups, se.Role, se.TokenID, micros(se.CreatedAt), micros(se.ExpiresAt)} {
				w.arg(a)
			}
			var err error
			n, err = w.adhocExecN(qSessionInsert)
			return err
		})
	})
	if err != nil {
		return s.fail("create session", err)
	}
	if refusal != nil {
		return fmt.Errorf("create session: %w", refusal)
	}
	if n == 0 {
		return fmt.Errorf("create session of %q: %w", se.Principal, store.ErrSessionExists)
	}
	se.CreatedAt, se.ExpiresAt = truncate(se.CreatedAt), truncate(se.ExpiresAt)
	return nil
}

// SessionByHash returns a session.
func (s *Store) SessionByHash(ctx context.Context, hash string) (*store.Session, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("session by hash: %w", err)
	}
	var se store.Session
	var groups string
	var created, expires int64
	err := s.reader.QueryRowContext(ctx, "SELECT "+sessionCols+" FROM sessions WHERE hash = ?", hash).
		Scan(&se.Hash, &se.Principal, &groups, &se.Role, &se.TokenID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session by hash: %w", store.ErrSessionNotFound)
	}
	if err != nil {
		return nil, s.fail("session by hash", err)
	}
	if se.Groups, err = parseGroups(groups); err != nil {
		return nil, s.fail("session by hash", err)
	}
	se.CreatedAt, se.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &se, nil
}

// DeleteSession deletes a session.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(hash)
			return w.adhocExec("DELETE FROM sessions WHERE hash = ?")
		})
	})
	if err != nil {
		return s.fail("delete session", err)
	}
	return nil
}
