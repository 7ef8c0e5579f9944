package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

// The columns of principals and sessions (migration 0013_principals).
const (
	principalCols = "name, kind, groups, created_at, updated_at, disabled_at"
	sessionCols   = "hash, principal, groups, role, token_id, created_at, expires_at"
)

func scanPrincipal(row pgx.Row) (*store.Principal, error) {
	var p store.Principal
	var disabled *time.Time
	if err := row.Scan(&p.Name, &p.Kind, &p.Groups, &p.CreatedAt, &p.UpdatedAt, &disabled); err != nil {
		return nil, err
	}
	if p.Groups == nil {
		p.Groups = []string{}
	}
	p.CreatedAt, p.UpdatedAt, p.DisabledAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC(), fromNull(disabled)
	return &p, nil
}

// principalRefusal says why a principal takes no token or session: not
// found, disabled, or nil when it is enabled.
func (s *Store) principalRefusal(ctx context.Context, name string) error {
	p, err := s.GetPrincipal(ctx, name)
	switch {
	case err != nil:
		return err
	case !p.Enabled():
		return fmt.Errorf("principal %q: %w", name, store.ErrPrincipalDisabled)
	}
	return nil
}

func groupsOrEmpty(g []string) []string {
	if g == nil {
		return []string{}
	}
	return g
}

// EnsurePrincipal creates a principal or returns (and maybe regroups) the
// stored one, in one transaction.
func (s *Store) EnsurePrincipal(ctx context.Context, p *store.EnsurePrincipalParams) (*store.Principal, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("ensure principal: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("ensure principal: %w", err)
	}
	now := truncate(p.Now)
	var out *store.Principal
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, s.acc.principalInsert, p.Name, p.Kind, groupsOrEmpty(p.Groups), now)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 && p.SetGroups {
				if _, err := tx.Exec(ctx, s.acc.principalGroups, p.Name, groupsOrEmpty(p.Groups), now); err != nil {
					return err
				}
			}
			out, err = scanPrincipal(tx.QueryRow(ctx, s.acc.principalGet, p.Name))
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
	var out *store.Principal
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanPrincipal(s.pool.QueryRow(ctx, s.acc.principalGet, name))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get principal %q: %w", name, store.ErrPrincipalNotFound)
	}
	if err != nil {
		return nil, s.fail("get principal", err)
	}
	return out, nil
}

// ListPrincipals returns every principal by name.
func (s *Store) ListPrincipals(ctx context.Context) ([]*store.Principal, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	var out []*store.Principal
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.acc.principals)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Principal, error) { return scanPrincipal(row) })
		return err
	})
	if err != nil {
		return nil, s.fail("list principals", err)
	}
	if out == nil {
		out = []*store.Principal{}
	}
	return out, nil
}

// DisablePrincipal disables a principal, revokes its tokens and deletes
// its sessions, in one transaction. Its UPDATE locks the principal's row
// first, so that a token or session created concurrently (which locks it
// FOR SHARE) is either revoked here or refused.
func (s *Store) DisablePrincipal(ctx context.Context, name string, at time.Time) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("disable principal: %w", err)
	}
	if at.IsZero() {
		return fmt.Errorf("disable principal %q: time is zero", name)
	}
	at = truncate(at)
	var n int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, s.acc.principalOff, name, at)
			if n = tag.RowsAffected(); err != nil || n == 0 {
				return err
			}
			if _, err := tx.Exec(ctx, s.acc.principalTokens, name, at); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, s.acc.sessionsOf, name)
			return err
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
	created, expires := truncate(se.CreatedAt), truncate(se.ExpiresAt)
	var n int64
	err := s.once(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.acc.sessionsExpired, created); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, s.acc.sessionInsert, se.Hash, se.Principal, groupsOrEmpty(se.Groups), se.Role, se.TokenID, created, expires)
			n = tag.RowsAffected()
			return err
		})
	})
	if err != nil {
		return s.fail("create session", err)
	}
	if n == 0 {
		if refusal := s.principalRefusal(ctx, se.Principal); refusal != nil {
			return fmt.Errorf("create session: %w", refusal)
		}
		return fmt.Errorf("create session of %q: %w", se.Principal, store.ErrSessionExists)
	}
	se.CreatedAt, se.ExpiresAt = created, expires
	return nil
}

// SessionByHash returns a session.
func (s *Store) SessionByHash(ctx context.Context, hash string) (*store.Session, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("session by hash: %w", err)
	}
	var se store.Session
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.acc.sessionByHash, hash).
			Scan(&se.Hash, &se.Principal, &se.Groups, &se.Role, &se.TokenID, &se.CreatedAt, &se.ExpiresAt)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session by hash: %w", store.ErrSessionNotFound)
	}
	if err != nil {
		return nil, s.fail("session by hash", err)
	}
	se.Groups = groupsOrEmpty(se.Groups)
	se.CreatedAt, se.ExpiresAt = se.CreatedAt.UTC(), se.ExpiresAt.UTC()
	return &se, nil
}

// DeleteSession deletes a session.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.acc.sessionDelete, hash)
		return err
	})
	if err != nil {
		return s.fail("delete session", err)
	}
	return nil
}
