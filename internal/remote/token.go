package remote

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// A task token is a capability: base64url (no padding) of a versioned
// record of the task's id, the claim's fence token and a random secret
// of secretSize bytes. The server keeps everything else about the claim
// (store.RemoteClaim: the secret's SHA-256, who claimed, the attempt's
// times); a report is accepted only when the secret's hash matches the
// task's current record. The fence names which claim the token was made
// for, so that an earlier claim's token is told apart from a forged one:
// it fails with ErrTaskLost, as it did when tokens had no secret, while a
// token of the current claim with the wrong secret (or used by another
// identity) is ErrInvalidToken.
//
// Version 1 tokens (no secret; the claim's times in the token) are
// refused: their holder claims the task again.
type token struct {
	taskID int64
	fence  int64
	secret []byte
}

const (
	tokenV1    = 1
	tokenV2    = 2
	secretSize = 32 // 256 bits
	// maxToken bounds the text of a token (a v2 token is about 60 bytes).
	maxToken = 1024
)

// newToken returns a token with a fresh secret for a claim.
func newToken(taskID, fence int64) *token {
	k := &token{taskID: taskID, fence: fence, secret: make([]byte, secretSize)}
	// crypto/rand.Read never fails (it panics if the system's source
	// does, and returns no error).
	_, _ = rand.Read(k.secret)
	return k
}

func (k *token) encode() string {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+secretSize)
	b = append(b, tokenV2)
	b = binary.AppendVarint(b, k.taskID)
	b = binary.AppendVarint(b, k.fence)
	b = append(b, k.secret...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is what the server keeps of the secret.
func (k *token) hash() []byte {
	h := sha256.Sum256(k.secret)
	return h[:]
}

// matches compares the secret with a stored hash in constant time.
func (k *token) matches(hash []byte) bool {
	return subtle.ConstantTimeCompare(k.hash(), hash) == 1
}

// decodeToken reads a token; anything that is not one is ErrInvalidToken.
func decodeToken(s string) (*token, error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrInvalidToken, why) }
	if s == "" {
		return nil, bad("the token is empty")
	}
	if len(s) > maxToken {
		return nil, bad("the token is too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad("not base64url")
	}
	switch {
	case len(b) == 0:
		return nil, bad("the token is empty")
	case b[0] == tokenV1:
		return nil, bad("issued by an older server; claim the task again")
	case b[0] != tokenV2:
		return nil, bad("unknown token version")
	}
	b = b[1:]
	var vals [2]int64
	for i := range vals {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, bad("truncated")
		}
		vals[i], b = v, b[n:]
	}
	if vals[0] <= 0 || len(b) != secretSize {
		return nil, bad("malformed")
	}
	return &token{taskID: vals[0], fence: vals[1], secret: b}, nil
}
