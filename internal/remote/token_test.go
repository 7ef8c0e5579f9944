package remote

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	k := newToken(42, 7)
	if len(k.secret) != secretSize || bytes.Equal(k.secret, make([]byte, secretSize)) {
		t.Fatalf("secret %x: want %d random bytes", k.secret, secretSize)
	}
	if o := newToken(42, 7); bytes.Equal(o.secret, k.secret) {
		t.Fatal("two tokens of one claim share a secret")
	}
	s := k.encode()
	got, err := decodeToken(s)
	if err != nil {
		t.Fatal(err)
	}
	if got.taskID != 42 || got.fence != 7 || !bytes.Equal(got.secret, k.secret) || !got.matches(k.hash()) {
		t.Fatalf("decoded %+v, want %+v", got, k)
	}
	other := newToken(42, 7)
	if other.matches(k.hash()) {
		t.Fatal("another secret matches the hash")
	}
	for _, bad := range []string{"", "!!", s[:len(s)-2], "Ag", "Aw" + s[2:], strings.Repeat("A", maxToken+1)} {
		if _, err := decodeToken(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("decodeToken(%q): %v, want ErrInvalidToken", bad, err)
		}
	}
}

// A token of the format older servers handed out is refused with a
// message that says what to do.
func TestTokenV1Refused(t *testing.T) {
	v1 := base64.RawURLEncoding.EncodeToString([]byte{1, 84, 14, 2, 2, 2, 'r', 'u', 'n'})
	_, err := decodeToken(v1)
	if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "issued by an older server; claim the task again") {
		t.Fatalf("a version 1 token: %v", err)
	}
}

// Any string decodes to a token or fails with ErrInvalidToken, and a
// token survives encoding.
func FuzzDecodeToken(f *testing.F) {
	f.Add(newToken(1, 1).encode())
	f.Add("garbage")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := decodeToken(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("decodeToken(%q): %v, not ErrInvalidToken", s, err)
			}
			return
		}
		again, err := decodeToken(k.encode())
		if err != nil || again.taskID != k.taskID || again.fence != k.fence || !bytes.Equal(again.secret, k.secret) {
			t.Fatalf("token %q does not survive encoding: %+v, %v", s, again, err)
		}
	})
}
