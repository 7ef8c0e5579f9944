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

var _ store.Secrets = (*Store)(nil)

const secretCols = "name, key_id, nonce, ciphertext, created_at, updated_at"

// The statements of store.Secrets (migration 0015_secrets); § stands for
// the store's schema.
const (
	qSecretPut = "INSERT INTO §secrets (" + secretCols + ") VALUES ($1, $2, $3, $4, $5, $5) " +
		"ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce, " +
		"ciphertext = excluded.ciphertext, updated_at = excluded.updated_at RETURNING created_at"
	qSecretSwap = "UPDATE §secrets SET key_id = $2, nonce = $3, ciphertext = $4, updated_at = $5 " +
		"WHERE name = $1 AND nonce = $6 RETURNING created_at"
	qSecretExists = "SELECT EXISTS (SELECT 1 FROM §secrets WHERE name = $1)"
	qSecretGet    = "SELECT " + secretCols + " FROM §secrets WHERE name = $1"
	qSecretList   = "SELECT " + secretCols + " FROM §secrets ORDER BY name"
	qSecretDelete = "DELETE FROM §secrets WHERE name = $1"
)

// secretQ puts the store's schema into a statement of store.Secrets.
func (s *Store) secretQ(q string) string { return strings.ReplaceAll(q, "§", `"`+s.schema+`".`) }

// PutSecret creates or replaces a secret in one statement (a swap on the
// nonce with IfNonce).
func (s *Store) PutSecret(ctx context.Context, p *store.PutSecretParams) (*store.Secret, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put secret: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("put secret: %w", err)
	}
	at := truncate(p.At)
	out := &store.Secret{Name: p.Name, KeyID: p.KeyID, Nonce: clone(p.Nonce), Ciphertext: clone(p.Ciphertext), UpdatedAt: at}
	var found bool
	// once: a swap retried after its commit was lost would find its own
	// nonce and report a change.
	err := s.once(ctx, func(ctx context.Context) error {
		var err error
		if p.IfNonce == nil {
			err = s.pool.QueryRow(ctx, s.secretQ(qSecretPut), p.Name, p.KeyID, p.Nonce, p.Ciphertext, at).Scan(&out.CreatedAt)
		} else {
			err = s.pool.QueryRow(ctx, s.secretQ(qSecretSwap), p.Name, p.KeyID, p.Nonce, p.Ciphertext, at, p.IfNonce).Scan(&out.CreatedAt)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			if err := s.pool.QueryRow(ctx, s.secretQ(qSecretExists), p.Name).Scan(&found); err != nil {
				return err
			}
			return pgx.ErrNoRows
		}
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows) && found:
		return nil, fmt.Errorf("put secret %q: %w", p.Name, store.ErrSecretChanged)
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("put secret %q: %w", p.Name, store.ErrSecretNotFound)
	case err != nil:
		return nil, s.fail("put secret", err)
	}
	out.CreatedAt = out.CreatedAt.UTC()
	return out, nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

func scanSecret(row pgx.Row) (*store.Secret, error) {
	var x store.Secret
	var created, updated time.Time
	if err := row.Scan(&x.Name, &x.KeyID, &x.Nonce, &x.Ciphertext, &created, &updated); err != nil {
		return nil, err
	}
	x.CreatedAt, x.UpdatedAt = created.UTC(), updated.UTC()
	return &x, nil
}

// GetSecret returns a secret.
func (s *Store) GetSecret(ctx context.Context, name string) (*store.Secret, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	var out *store.Secret
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanSecret(s.pool.QueryRow(ctx, s.secretQ(qSecretGet), name))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get secret %q: %w", name, store.ErrSecretNotFound)
	}
	if err != nil {
		return nil, s.fail("get secret", err)
	}
	return out, nil
}

// ListSecrets returns every secret by name.
func (s *Store) ListSecrets(ctx context.Context) ([]*store.Secret, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	var out []*store.Secret
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.secretQ(qSecretList))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Secret, error) { return scanSecret(row) })
		return err
	})
	if err != nil {
		return nil, s.fail("list secrets", err)
	}
	if out == nil {
		out = []*store.Secret{}
	}
	return out, nil
}

// DeleteSecret deletes a secret.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	var n int64
	err := s.once(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.secretQ(qSecretDelete), name)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return s.fail("delete secret", err)
	}
	if n == 0 {
		return fmt.Errorf("delete secret %q: %w", name, store.ErrSecretNotFound)
	}
	return nil
}
