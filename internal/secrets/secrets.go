// Package secrets seals named secrets with AES-256-GCM under a key ring,
// and carries the resolver of secret values in the contexts of steps.
//
// A key ring is a list of keys, each with an id; the first is the current
// key, which seals every new value. A sealed value records the id of its
// key, so a ring that still holds an older key opens the values sealed
// with it; rotation seals each value again with the current key, after
// which the older keys can be dropped. The secret's name is the additional
// data of the seal: a ciphertext copied to another name does not open.
//
// The text form of a key ring (ParseKeys): keys separated by commas or
// newlines, each "id:key", the key 32 bytes in standard base64 (with or
// without padding); blank lines and lines starting with '#' are ignored.
// An id is 1 to 64 letters, digits, '_' or '-'.
//
//	HEPH_SECRET_KEYS=k2:<base64 of 32 bytes>,k1:<base64 of 32 bytes>
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// ErrUnknownKey is wrapped by Open for a value sealed with a key the ring
// does not hold.
var ErrUnknownKey = hephtype.ErrUnknownSecretKey

// ErrUnavailable is wrapped when secrets are used without a key ring.
var ErrUnavailable = hephtype.ErrSecretsUnavailable

// ErrNotFound is wrapped for a secret name that is not stored.
var ErrNotFound = store.ErrSecretNotFound

// ErrCorrupt is wrapped by Open for a ciphertext that does not
// authenticate: altered, or sealed for another name.
var ErrCorrupt = hephtype.ErrSecretCorrupt

// Keys is a key ring. It is safe for concurrent use.
type Keys struct {
	ids   []string
	aeads map[string]cipher.AEAD
}

// NewKeys returns a key ring of the keys by id, the current one first.
func NewKeys(ids []string, keys [][]byte) (*Keys, error) {
	if len(ids) == 0 || len(ids) != len(keys) {
		return nil, errors.New("secret keys: the ring has no key")
	}
	k := &Keys{aeads: map[string]cipher.AEAD{}}
	for i, id := range ids {
		if err := checkID(id); err != nil {
			return nil, err
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("secret keys: key id %q appears twice", id)
		}
		if len(keys[i]) != KeySize {
			return nil, fmt.Errorf("secret keys: key %q is %d bytes long, want %d (AES-256)", id, len(keys[i]), KeySize)
		}
		block, err := aes.NewCipher(keys[i])
		if err != nil {
			return nil, fmt.Errorf("secret keys: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secret keys: key %q: %w", id, err)
		}
		k.ids = append(k.ids, id)
		k.aeads[id] = aead
	}
	return k, nil
}

func checkID(id string) error {
	if id == "" || len(id) > store.MaxSecretKeyID {
		return fmt.Errorf("secret keys: a key id must be 1 to %d bytes long, not %q", store.MaxSecretKeyID, id)
	}
	for _, r := range id {
		if r != '_' && r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return fmt.Errorf("secret keys: key id %q: write letters, digits, '_' and '-'", id)
		}
	}
	return nil
}

// ParseKeys reads a key ring in its text form (see the package
// documentation). src names the text in errors ("HEPH_SECRET_KEYS", a
// file's path); errors never quote a key.
func ParseKeys(src, text string) (*Keys, error) {
	if src != "" {
		src = " " + src
	}
	var ids []string
	var keys [][]byte
	for n, line := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("secret keys%s: entry %d is not id:<base64 key>", src, n+1)
		}
		id = strings.TrimSpace(id)
		key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(b64), "="))
		if err != nil {
			return nil, fmt.Errorf("secret keys%s: key %q is not base64", src, id)
		}
		ids, keys = append(ids, id), append(keys, key)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("secret keys%s: no key", src)
	}
	k, err := NewKeys(ids, keys)
	if err != nil && src != "" {
		return nil, fmt.Errorf("%s: %w", src[1:], err)
	}
	return k, err
}

// ReadKeys reads a key ring from a file in the text form.
func ReadKeys(path string) (*Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret keys: %w", err)
	}
	return ParseKeys(path, string(b))
}

// Current is the id of the key that seals new values.
func (k *Keys) Current() string { return k.ids[0] }

// IDs returns the ids of the ring's keys, the current one first.
func (k *Keys) IDs() []string { return append([]string(nil), k.ids...) }

// Seal encrypts the value of the secret name with the current key, under
// a random nonce, with the name as additional data.
func (k *Keys) Seal(name string, value []byte) (keyID string, nonce, ciphertext []byte, err error) {
	aead := k.aeads[k.ids[0]]
	nonce = make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, nil, fmt.Errorf("seal secret %q: %w", name, err)
	}
	return k.ids[0], nonce, aead.Seal(nil, nonce, value, []byte(name)), nil
}

// Open decrypts the value of the secret name sealed with the key keyID.
// A key the ring lacks fails with ErrUnknownKey naming it; a ciphertext
// that was altered, or sealed for another name, fails too.
func (k *Keys) Open(name, keyID string, nonce, ciphertext []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("open secret %q: %w %q: add it to the key ring (the ring holds %s)", name, ErrUnknownKey, keyID, strings.Join(k.ids, ", "))
	}
	if len(nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("open secret %q: the nonce is %d bytes long, want %d", name, len(nonce), aead.NonceSize())
	}
	v, err := aead.Open(nil, nonce, ciphertext, []byte(name))
	if err != nil {
		return nil, fmt.Errorf("open secret %q with key %q: %w (altered, or sealed for another name or with another key of that id)", name, keyID, ErrCorrupt)
	}
	return v, nil
}

// Resolver returns the value of a secret by name.
type Resolver interface {
	SecretValue(ctx context.Context, name string) (string, error)
}

type resolverKey struct{}

// WithResolver returns ctx carrying r, for the steps run under it.
func WithResolver(ctx context.Context, r Resolver) context.Context {
	return context.WithValue(ctx, resolverKey{}, r)
}

// Value returns the value of the secret name through the resolver of ctx:
// ErrUnavailable when ctx has none.
func Value(ctx context.Context, name string) (string, error) {
	r, _ := ctx.Value(resolverKey{}).(Resolver)
	if r == nil {
		return "", fmt.Errorf("secret %q: %w", name, ErrUnavailable)
	}
	return r.SecretValue(ctx, name)
}

// observer is a resolver that tells seen of each value it resolves.
type observer struct {
	r    Resolver
	seen func(value string)
}

func (o observer) SecretValue(ctx context.Context, name string) (string, error) {
	v, err := o.r.SecretValue(ctx, name)
	if err == nil {
		o.seen(v)
	}
	return v, err
}

// Observe returns ctx whose resolver (that of ctx, if any) also tells seen
// of every value it returns: a step's log redacts the secrets the step
// read.
func Observe(ctx context.Context, seen func(value string)) context.Context {
	r, _ := ctx.Value(resolverKey{}).(Resolver)
	if r == nil {
		return ctx
	}
	return WithResolver(ctx, observer{r: r, seen: seen})
}
