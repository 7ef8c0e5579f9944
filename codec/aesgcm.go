package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
)

// AESGCMName is the name of the AES-GCM codec in envelopes.
const AESGCMName = "aes-gcm"

// Sizes of the AES-GCM codec's output: data is the nonce, then the
// ciphertext, then the tag.
const (
	gcmNonceSize = 12
	gcmTagSize   = 16
)

// AESGCM is a codec that encrypts payloads with AES-256-GCM under the
// write key of a keyring, with a random 12-byte nonce per payload, and
// records the key's id; it decrypts with the key the envelope names. The
// additional data (Step.AdditionalData) binds the envelope's format, size,
// key id and codecs up to this one. Its data is nonce || ciphertext || tag.
// It is safe for concurrent use.
type AESGCM struct {
	write string
	ids   string // for errors
	aeads map[string]cipher.AEAD
}

var (
	_ Codec = (*AESGCM)(nil)
	_ Keyed = (*AESGCM)(nil)
)

// NewAESGCM returns an AES-GCM codec over the keys of ring. A keyring is
// fixed: to rotate, make a new keyring, codec and chain.
func NewAESGCM(ring *Keyring) (*AESGCM, error) {
	if ring == nil {
		return nil, errors.New("aes-gcm: the keyring is nil")
	}
	c := &AESGCM{write: ring.write, ids: strings.Join(ring.ids, ", "), aeads: map[string]cipher.AEAD{}}
	for id, key := range ring.keys {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("aes-gcm: key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("aes-gcm: key %q: %w", id, err)
		}
		c.aeads[id] = aead
	}
	return c, nil
}

// Name returns AESGCMName.
func (c *AESGCM) Name() string { return AESGCMName }

// WriteKey is the id of the key Encode uses: the keyring's write key.
func (c *AESGCM) WriteKey() string { return c.write }

// Encode encrypts data with the write key.
func (c *AESGCM) Encode(data []byte, s Step) (Encoded, error) {
	aead := c.aeads[c.write]
	if aead == nil {
		return Encoded{}, errors.New("the codec has no write key: make it with NewAESGCM")
	}
	out := make([]byte, gcmNonceSize, gcmNonceSize+len(data)+gcmTagSize)
	if _, err := rand.Read(out); err != nil {
		return Encoded{}, fmt.Errorf("key %q: nonce: %w", c.write, err)
	}
	return Encoded{Data: aead.Seal(out, out, data, s.AdditionalData(c.write)), Key: c.write}, nil
}

// Decode decrypts data, in place, with the key s.Key: ErrKeyNotFound when
// the keyring lacks it, ErrDecrypt when data does not authenticate.
func (c *AESGCM) Decode(data []byte, s Step) ([]byte, error) {
	if s.Key == "" {
		return nil, fmt.Errorf("the envelope records no key id: %w", ErrKeyNotFound)
	}
	aead, ok := c.aeads[s.Key]
	if !ok {
		return nil, fmt.Errorf("key %q: %w (the keyring holds %s)", s.Key, ErrKeyNotFound, c.ids)
	}
	if len(data) < gcmNonceSize+gcmTagSize {
		return nil, fmt.Errorf("key %q: %w: %d bytes of data, fewer than a nonce and a tag (%d)", s.Key, ErrDecrypt, len(data), gcmNonceSize+gcmTagSize)
	}
	nonce, ct := data[:gcmNonceSize], data[gcmNonceSize:]
	out, err := aead.Open(ct[:0], nonce, ct, s.AdditionalData(s.Key))
	if err != nil {
		return nil, fmt.Errorf("key %q: %w: the data or the envelope's codecs, key id or size were altered, or key %q is not the key that encrypted it", s.Key, ErrDecrypt, s.Key)
	}
	return out, nil
}
