package secrets_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/secrets"
)

func key(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, secrets.KeySize))
}

func mustParse(t *testing.T, text string) *secrets.Keys {
	t.Helper()
	k, err := secrets.ParseKeys("test", text)
	if err != nil {
		t.Fatalf("ParseKeys: %v", err)
	}
	return k
}

func TestRoundTrip(t *testing.T) {
	k := mustParse(t, "k1:"+key(1))
	id, nonce, ct, err := k.Seal("stripe_key", []byte("sk_live_123"))
	if err != nil {
		t.Fatal(err)
	}
	if id != "k1" || bytes.Contains(ct, []byte("sk_live_123")) {
		t.Fatalf("Seal = %q, %x: want key k1 and no plaintext", id, ct)
	}
	_, nonce2, _, _ := k.Seal("stripe_key", []byte("sk_live_123"))
	if bytes.Equal(nonce, nonce2) {
		t.Fatal("two seals used one nonce")
	}
	v, err := k.Open("stripe_key", id, nonce, ct)
	if err != nil || string(v) != "sk_live_123" {
		t.Fatalf("Open = %q, %v", v, err)
	}
	// Moved to another name: the name is the additional data.
	if _, err := k.Open("other", id, nonce, ct); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("Open under another name: %v, want a refusal naming it", err)
	}
	// Tampered.
	bad := bytes.Clone(ct)
	bad[0] ^= 1
	if _, err := k.Open("stripe_key", id, nonce, bad); err == nil {
		t.Fatal("Open of an altered ciphertext succeeded")
	}
	// Unknown key id.
	if _, err := k.Open("stripe_key", "k9", nonce, ct); !errors.Is(err, secrets.ErrUnknownKey) || !strings.Contains(err.Error(), `"k9"`) {
		t.Fatalf("Open with an unknown key: %v, want ErrUnknownKey naming k9", err)
	}
	// Another key under the same id.
	other := mustParse(t, "k1:"+key(2))
	if _, err := other.Open("stripe_key", id, nonce, ct); err == nil {
		t.Fatal("Open with another key of the same id succeeded")
	}
}

// A ring k2,k1 seals with k2 and opens what k1 sealed; a ring of k2 alone
// no longer opens it.
func TestRotationRing(t *testing.T) {
	old := mustParse(t, "k1:"+key(1))
	_, nonce, ct, _ := old.Seal("db", []byte("pw"))
	ring := mustParse(t, "# comment\nk2:"+key(2)+"\n\nk1:"+strings.TrimRight(key(1), "=")+"\n")
	if ring.Current() != "k2" || strings.Join(ring.IDs(), ",") != "k2,k1" {
		t.Fatalf("ring = %v", ring.IDs())
	}
	if v, err := ring.Open("db", "k1", nonce, ct); err != nil || string(v) != "pw" {
		t.Fatalf("Open with the old key = %q, %v", v, err)
	}
	id, nonce2, ct2, _ := ring.Seal("db", []byte("pw"))
	if id != "k2" {
		t.Fatalf("sealed with %q, want the current k2", id)
	}
	only := mustParse(t, "k2:"+key(2))
	if _, err := only.Open("db", "k1", nonce, ct); !errors.Is(err, secrets.ErrUnknownKey) {
		t.Fatalf("Open after dropping k1: %v", err)
	}
	if v, err := only.Open("db", id, nonce2, ct2); err != nil || string(v) != "pw" {
		t.Fatalf("Open of the re-sealed value = %q, %v", v, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "no key"},
		{"k1", "not id:<base64 key>"},
		{"k1:!!!", "not base64"},
		{"k1:" + base64.StdEncoding.EncodeToString([]byte("short")), "5 bytes long"},
		{"k1:" + key(1) + ",k1:" + key(2), "appears twice"},
		{"a.b:" + key(1), `key id "a.b"`},
		{":" + key(1), "1 to 64 bytes"},
	} {
		_, err := secrets.ParseKeys("HEPH_SECRET_KEYS", tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "HEPH_SECRET_KEYS") {
			t.Errorf("ParseKeys(%q) = %v, want an error naming the source and %q", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), key(1)) {
			t.Errorf("ParseKeys(%q): the error quotes a key: %v", tc.text, err)
		}
	}
}

func TestReadKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("k1:"+key(1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := secrets.ReadKeys(path)
	if err != nil || k.Current() != "k1" {
		t.Fatalf("ReadKeys = %v, %v", k, err)
	}
	if _, err := secrets.ReadKeys(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("ReadKeys of a missing file succeeded")
	}
}

type fixed map[string]string

func (f fixed) SecretValue(_ context.Context, name string) (string, error) {
	v, ok := f[name]
	if !ok {
		return "", secrets.ErrNotFound
	}
	return v, nil
}

func TestValue(t *testing.T) {
	if _, err := secrets.Value(t.Context(), "x"); !errors.Is(err, secrets.ErrUnavailable) {
		t.Fatalf("Value without a resolver: %v", err)
	}
	ctx := secrets.WithResolver(t.Context(), fixed{"x": "1"})
	if v, err := secrets.Value(ctx, "x"); err != nil || v != "1" {
		t.Fatalf("Value = %q, %v", v, err)
	}
}
