package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Secrets = (*Store)(nil)

// The statements of store.Secrets (migration 0013_secrets).
const (
	secretCols = "name, key_id, nonce, ciphertext, created_at, updated_at"

	qSecretPut = "INSERT INTO secrets (" + secretCols + ") VALUES (?1, ?2, ?3, ?4, ?5, ?5) " +
		"ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce, " +
		"ciphertext = excluded.ciphertext, updated_at = excluded.updated_at RETURNING created_at"
	qSecretSwap = "UPDATE secrets SET key_id = ?2, nonce = ?3, ciphertext = ?4, updated_at = ?5 " +
		"WHERE name = ?1 AND nonce = ?6 RETURNING created_at"
	qSecretExists = "SELECT 1 FROM secrets WHERE name = ?"
	qSecretDelete = "DELETE FROM secrets WHERE name = ?"
)

// PutSecret creates or replaces a secret, in one write transaction.
func (s *Store) PutSecret(ctx context.Context, p *store.PutSecretParams) (*store.Secret, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put secret: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("put secret: %w", err)
	}
	out := &store.Secret{Name: p.Name, KeyID: p.KeyID, Nonce: clone(p.Nonce), Ciphertext: clone(p.Ciphertext), UpdatedAt: fromMicros(micros(p.At))}
	var missing, changed bool
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range []driver.Value{p.Name, p.KeyID, p.Nonce, p.Ciphertext, micros(p.At)} {
				w.arg(a)
			}
			q := qSecretPut
			if p.IfNonce != nil {
				q = qSecretSwap
				w.arg(p.IfNonce)
			}
			ok, err := w.adhocRow(q, 1)
			if err != nil {
				return err
			}
			if ok {
				out.CreatedAt = fromMicros(vInt(w.dest[0]))
				return nil
			}
			w.arg(p.Name)
			found, err := w.adhocRow(qSecretExists, 1)
			missing, changed = !found, found
			return err
		})
	})
	switch {
	case err != nil:
		return nil, s.fail("put secret", err)
	case missing:
		return nil, fmt.Errorf("put secret %q: %w", p.Name, store.ErrSecretNotFound)
	case changed:
		return nil, fmt.Errorf("put secret %q: %w", p.Name, store.ErrSecretChanged)
	}
	return out, nil
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

func scanSecret(sc scanner) (*store.Secret, error) {
	var x store.Secret
	var created, updated int64
	if err := sc.Scan(&x.Name, &x.KeyID, &x.Nonce, &x.Ciphertext, &created, &updated); err != nil {
		return nil, err
	}
	x.CreatedAt, x.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &x, nil
}

// GetSecret returns a secret.
func (s *Store) GetSecret(ctx context.Context, name string) (*store.Secret, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	x, err := scanSecret(s.reader.QueryRowContext(ctx, "SELECT "+secretCols+" FROM secrets WHERE name = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get secret %q: %w", name, store.ErrSecretNotFound)
	}
	if err != nil {
		return nil, s.fail("get secret", err)
	}
	return x, nil
}

// ListSecrets returns every secret by name.
func (s *Store) ListSecrets(ctx context.Context) ([]*store.Secret, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+secretCols+" FROM secrets ORDER BY name")
	if err != nil {
		return nil, s.fail("list secrets", err)
	}
	defer rows.Close()
	out := []*store.Secret{}
	for rows.Next() {
		x, err := scanSecret(rows)
		if err != nil {
			return nil, s.fail("list secrets", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list secrets", err)
	}
	return out, nil
}

// DeleteSecret deletes a secret.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(name)
			var err error
			n, err = w.adhocExecN(qSecretDelete)
			return err
		})
	})
	if err != nil {
		return s.fail("delete secret", err)
	}
	if n == 0 {
		return fmt.Errorf("delete secret %q: %w", name, store.ErrSecretNotFound)
	}
	return nil
}
