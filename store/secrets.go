package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Errors of named secrets.
var (
	// ErrSecretNotFound: no secret has the given name.
	ErrSecretNotFound = errors.New("secret not found")
	// ErrSecretChanged: a put with PutSecretParams.IfNonce found the
	// secret stored under another nonce (it was set again, or deleted,
	// since it was read).
	ErrSecretChanged = errors.New("the secret changed since it was read")
)

// Limits of named secrets.
const (
	// MaxSecretName bounds a secret's name, in bytes.
	MaxSecretName = 128
	// MaxSecretValue bounds a secret's value (the plaintext), in bytes.
	MaxSecretValue = 64 << 10
	// MaxSecretCiphertext bounds a stored ciphertext: the value and room
	// for an authentication tag.
	MaxSecretCiphertext = MaxSecretValue + 64
	// MaxSecretKeyID bounds the id of the key a secret is encrypted
	// with, in bytes.
	MaxSecretKeyID = 64
	// MaxSecretNonce bounds a stored nonce, in bytes.
	MaxSecretNonce = 64
)

// Secrets keeps named secrets, encrypted by the caller: the store sees an
// opaque ciphertext, the nonce it was sealed with and the id of the key,
// never a value. The table (SQLite migration 0013_secrets, PostgreSQL
// 0015_secrets) has one row per name; PruneRuns touches none.
type Secrets interface {
	// PutSecret creates the secret p.Name or replaces its key id, nonce
	// and ciphertext, and returns what is stored: CreatedAt is p.At for a
	// new secret and kept for a replaced one, UpdatedAt is p.At. With
	// p.IfNonce set, it replaces only a secret stored under that nonce,
	// and returns ErrSecretChanged otherwise (ErrSecretNotFound when it
	// is gone).
	PutSecret(ctx context.Context, p *PutSecretParams) (*Secret, error)
	// GetSecret returns a secret, or ErrSecretNotFound.
	GetSecret(ctx context.Context, name string) (*Secret, error)
	// ListSecrets returns every secret, by name (bytewise).
	ListSecrets(ctx context.Context) ([]*Secret, error)
	// DeleteSecret deletes a secret, or returns ErrSecretNotFound.
	DeleteSecret(ctx context.Context, name string) error
}

// Secret is a stored secret: its value sealed with the key KeyID.
type Secret struct {
	Name       string
	KeyID      string
	Nonce      []byte
	Ciphertext []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// PutSecretParams are the parameters of Secrets.PutSecret.
type PutSecretParams struct {
	Name       string
	KeyID      string
	Nonce      []byte
	Ciphertext []byte
	// At is the time of the put. Required.
	At time.Time
	// IfNonce, when set, makes the put replace only the secret sealed
	// with this nonce: a compare-and-swap for re-encryption.
	IfNonce []byte
}

// Check validates the parameters (errors wrap hephtype.ErrInvalidInput).
func (p *PutSecretParams) Check() error {
	if err := CheckSecretName(p.Name); err != nil {
		return err
	}
	switch {
	case p.KeyID == "" || len(p.KeyID) > MaxSecretKeyID:
		return fmt.Errorf("%w: secret %q: the key id must be 1 to %d bytes long", hephtype.ErrInvalidInput, p.Name, MaxSecretKeyID)
	case len(p.Nonce) == 0 || len(p.Nonce) > MaxSecretNonce:
		return fmt.Errorf("%w: secret %q: the nonce must be 1 to %d bytes long", hephtype.ErrInvalidInput, p.Name, MaxSecretNonce)
	case len(p.Ciphertext) == 0:
		return fmt.Errorf("%w: secret %q: the ciphertext is empty", hephtype.ErrInvalidInput, p.Name)
	case len(p.Ciphertext) > MaxSecretCiphertext:
		return fmt.Errorf("%w: secret %q: the ciphertext is %d bytes long, more than %d", hephtype.ErrInvalidInput, p.Name, len(p.Ciphertext), MaxSecretCiphertext)
	case p.At.IsZero():
		return fmt.Errorf("%w: secret %q: At is zero", hephtype.ErrInvalidInput, p.Name)
	case p.IfNonce != nil && bytes.Equal(p.IfNonce, p.Nonce):
		return fmt.Errorf("%w: secret %q: the new nonce is IfNonce: seal the value again", hephtype.ErrInvalidInput, p.Name)
	}
	return nil
}

// CheckSecretName reports whether name is a valid secret name: 1 to
// MaxSecretName bytes of ASCII letters, digits, '_' and '-', starting with
// a letter or '_' (so that {{secret.NAME}} reads it). Errors wrap
// hephtype.ErrInvalidInput.
func CheckSecretName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the secret name is empty", hephtype.ErrInvalidInput)
	}
	if len(name) > MaxSecretName {
		return fmt.Errorf("%w: the secret name is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(name), MaxSecretName)
	}
	for i, r := range name {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r == '-' || r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("%w: secret name %q: write letters, digits, '_' and '-', starting with a letter or '_'", hephtype.ErrInvalidInput, name)
		}
	}
	return nil
}
