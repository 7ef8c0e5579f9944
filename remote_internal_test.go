package hephaestus

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

func TestRemoteTokenRoundTrip(t *testing.T) {
	claimed := time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.UTC)
	k := &remoteToken{lease: store.Lease{TaskID: 42, Token: 7}, runID: "order::A-1", claimedAt: claimed,
		deadline: claimed.Add(90 * time.Second), leaseFor: 30 * time.Second}
	s := k.encode()
	got, err := decodeToken(s)
	if err != nil {
		t.Fatal(err)
	}
	if got.lease != k.lease || got.runID != k.runID || !got.claimedAt.Equal(k.claimedAt) || !got.deadline.Equal(k.deadline) || got.leaseFor != k.leaseFor {
		t.Fatalf("decoded %+v, want %+v", got, k)
	}
	for _, bad := range []string{"", "!!", s[:len(s)-len("order::A-1")], "AQ", "Ag" + s[2:]} {
		if _, err := decodeToken(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("decodeToken(%q): %v, want ErrInvalidToken", bad, err)
		}
	}
}

// Any string decodes to a token or fails with ErrInvalidToken, and a
// token survives encoding.
func FuzzDecodeToken(f *testing.F) {
	f.Add((&remoteToken{lease: store.Lease{TaskID: 1, Token: 1}, runID: "r", claimedAt: time.Unix(0, 0), deadline: time.Unix(60, 0), leaseFor: time.Second}).encode())
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
		if err != nil || again.lease != k.lease || again.runID != k.runID || !again.deadline.Equal(k.deadline) || again.leaseFor != k.leaseFor {
			t.Fatalf("token %q does not survive encoding: %+v, %v", s, again, err)
		}
	})
}
