package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
	"github.com/hephaestus-go/hephaestus/store"
)

// Errors of named secrets.
var (
	// ErrSecretNotFound: no secret has the name.
	ErrSecretNotFound = store.ErrSecretNotFound
	// ErrSecretsUnavailable: the client has no key ring
	// (Config.SecretKeys), or the code runs outside a step of a started
	// client.
	ErrSecretsUnavailable = hephtype.ErrSecretsUnavailable
	// ErrUnknownSecretKey: a secret is sealed with a key that
	// Config.SecretKeys does not hold; the error names the key id.
	ErrUnknownSecretKey = hephtype.ErrUnknownSecretKey
	// ErrSecretCorrupt: a stored secret does not authenticate under its
	// key: altered, or copied from another name.
	ErrSecretCorrupt = hephtype.ErrSecretCorrupt
)

// SecretKeySize is the size of a secret key: 32 bytes (AES-256).
const SecretKeySize = 32

// SecretKeys is a key ring of AES-256-GCM keys with ids; the first is the
// current key, which seals every value set. Each stored secret records
// the id of its key, so a ring that keeps an older key after the current
// one still opens the secrets sealed with it; RotateSecrets seals them
// again with the current key, after which the older key can be dropped.
// Make one with ParseSecretKeys or ReadSecretKeys.
type SecretKeys struct {
	k *secrets.Keys
}

// Current is the id of the key that seals new values.
func (k *SecretKeys) Current() string { return k.k.Current() }

// IDs returns the ids of the ring's keys, the current one first.
func (k *SecretKeys) IDs() []string { return k.k.IDs() }

// ParseSecretKeys reads a key ring from its text form: keys separated by
// commas or newlines, the current one first, each "id:<key>", the key 32
// random bytes in standard base64 (e.g. `openssl rand -base64 32`). An id
// is 1 to 64 letters, digits, '_' or '-'. Blank lines and lines starting
// with '#' are ignored. heph server reads it from HEPH_SECRET_KEYS:
//
//	HEPH_SECRET_KEYS=k2:<base64>,k1:<base64>
//
// Errors never quote a key.
func ParseSecretKeys(text string) (*SecretKeys, error) {
	k, err := secrets.ParseKeys("", text)
	if err != nil {
		return nil, err
	}
	return &SecretKeys{k: k}, nil
}

// ReadSecretKeys reads a key ring from a file in the text form of
// ParseSecretKeys (one key a line).
func ReadSecretKeys(path string) (*SecretKeys, error) {
	k, err := secrets.ReadKeys(path)
	if err != nil {
		return nil, err
	}
	return &SecretKeys{k: k}, nil
}

// SecretInfo describes a stored secret. Its value is never listed.
type SecretInfo struct {
	Name string
	// KeyID is the id of the key that sealed the value.
	KeyID     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func secretInfo(s *store.Secret) *SecretInfo {
	return &SecretInfo{Name: s.Name, KeyID: s.KeyID, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
}

// secretStore returns the store's store.Secrets.
func (c *Client) secretStore() (store.Secrets, error) {
	s, ok := c.cfg.Store.(store.Secrets)
	if !ok {
		return nil, fmt.Errorf("%w: the store (%T) does not keep secrets", ErrSecretsUnavailable, c.cfg.Store)
	}
	return s, nil
}

func (c *Client) secretKeys() (*secrets.Keys, error) {
	if c.cfg.SecretKeys == nil || c.cfg.SecretKeys.k == nil {
		return nil, fmt.Errorf("%w: set Config.SecretKeys (heph server: HEPH_SECRET_KEYS or --secret-keys-file)", ErrSecretsUnavailable)
	}
	return c.cfg.SecretKeys.k, nil
}

// SetSecret creates the secret name, or replaces its value, sealed with
// the current key of Config.SecretKeys. A name is 1 to 128 ASCII letters,
// digits, '_' and '-', starting with a letter or '_'; a value is 1 byte
// to 64 KiB (ErrInvalidInput otherwise). The value is never returned by
// the API, never logged.
func (c *Client) SetSecret(ctx context.Context, name string, value []byte) (*SecretInfo, error) {
	if err := store.CheckSecretName(name); err != nil {
		return nil, fmt.Errorf("set secret: %w", err)
	}
	switch {
	case len(value) == 0:
		return nil, fmt.Errorf("set secret %q: %w: the value is empty", name, ErrInvalidInput)
	case len(value) > store.MaxSecretValue:
		return nil, fmt.Errorf("set secret %q: %w: the value is %d bytes long, more than %d", name, ErrInvalidInput, len(value), store.MaxSecretValue)
	}
	keys, err := c.secretKeys()
	if err != nil {
		return nil, fmt.Errorf("set secret %q: %w", name, err)
	}
	ss, err := c.secretStore()
	if err != nil {
		return nil, fmt.Errorf("set secret %q: %w", name, err)
	}
	id, nonce, ct, err := keys.Seal(name, value)
	if err != nil {
		return nil, err
	}
	s, err := ss.PutSecret(ctx, &store.PutSecretParams{Name: name, KeyID: id, Nonce: nonce, Ciphertext: ct, At: c.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("set secret %q: %w", name, err)
	}
	return secretInfo(s), nil
}

// ListSecrets returns every secret's name, key id and times, by name;
// never a value. It needs no key ring.
func (c *Client) ListSecrets(ctx context.Context) ([]*SecretInfo, error) {
	ss, err := c.secretStore()
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	list, err := ss.ListSecrets(ctx)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]*SecretInfo, 0, len(list))
	for _, s := range list {
		out = append(out, secretInfo(s))
	}
	return out, nil
}

// DeleteSecret deletes a secret, or returns ErrSecretNotFound. It needs
// no key ring. Steps that read it afterwards fail.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	ss, err := c.secretStore()
	if err != nil {
		return fmt.Errorf("delete secret %q: %w", name, err)
	}
	return ss.DeleteSecret(ctx, name)
}

// RotateResult is what RotateSecrets did.
type RotateResult struct {
	// KeyID is the current key, which now seals every secret.
	KeyID string
	// Rotated counts the secrets sealed again; the others were sealed
	// with the current key already (or were set or deleted meanwhile).
	Rotated int
	// Total counts the secrets stored.
	Total int
}

// RotateSecrets seals every secret that an older key of
// Config.SecretKeys sealed again with the current key, each with a
// compare-and-swap, so that a secret set meanwhile keeps its new value.
// After it, the older keys can be dropped from the ring. A secret sealed
// with a key the ring lacks fails it (ErrUnknownSecretKey, naming the
// secret and the key id); it rotates the others first.
func (c *Client) RotateSecrets(ctx context.Context) (*RotateResult, error) {
	keys, err := c.secretKeys()
	if err != nil {
		return nil, fmt.Errorf("rotate secrets: %w", err)
	}
	ss, err := c.secretStore()
	if err != nil {
		return nil, fmt.Errorf("rotate secrets: %w", err)
	}
	list, err := ss.ListSecrets(ctx)
	if err != nil {
		return nil, fmt.Errorf("rotate secrets: %w", err)
	}
	res := &RotateResult{KeyID: keys.Current(), Total: len(list)}
	var errs []error
	for _, s := range list {
		if s.KeyID == keys.Current() {
			continue
		}
		v, err := keys.Open(s.Name, s.KeyID, s.Nonce, s.Ciphertext)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		id, nonce, ct, err := keys.Seal(s.Name, v)
		clear(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = ss.PutSecret(ctx, &store.PutSecretParams{Name: s.Name, KeyID: id, Nonce: nonce, Ciphertext: ct, At: c.cfg.Clock.Now(), IfNonce: s.Nonce})
		switch {
		case errors.Is(err, store.ErrSecretChanged) || errors.Is(err, store.ErrSecretNotFound):
		case err != nil:
			errs = append(errs, err)
		default:
			res.Rotated++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("rotate secrets: %w", err)
	}
	return res, nil
}

// secretValue opens the secret name.
func (c *Client) secretValue(ctx context.Context, name string) (string, error) {
	if err := store.CheckSecretName(name); err != nil {
		return "", fmt.Errorf("secret: %w", err)
	}
	keys, err := c.secretKeys()
	if err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	ss, err := c.secretStore()
	if err != nil {
		return "", fmt.Errorf("secret %q: %w", name, err)
	}
	s, err := ss.GetSecret(ctx, name)
	if err != nil {
		return "", err
	}
	v, err := keys.Open(s.Name, s.KeyID, s.Nonce, s.Ciphertext)
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// secretResolver is the client as the resolver of its steps' secrets.
type secretResolver struct{ c *Client }

func (r secretResolver) SecretValue(ctx context.Context, name string) (string, error) {
	return r.c.secretValue(ctx, name)
}

// Secret returns the value of the secret name to step code (a flow step,
// a workflow activity, a job) run by a started Client: it reads ctx, the
// step's context. It fails with ErrSecretNotFound for a name not stored,
// ErrSecretsUnavailable without Config.SecretKeys or outside a step, and
// ErrUnknownSecretKey for a secret sealed with a key the ring lacks. The
// value is the step's to guard: do not return it as output, log it or put
// it in an error, which the history keeps.
func Secret(ctx context.Context, name string) (string, error) {
	return secrets.Value(ctx, name)
}
