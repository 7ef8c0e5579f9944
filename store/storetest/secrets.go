package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// RunSecrets is the conformance suite of store.Secrets: newStore returns
// a fresh, empty store for each test.
func RunSecrets(t *testing.T, newStore func(t *testing.T) store.Secrets) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Secrets)
	}{
		{"PutGetListDelete", testSecretsCRUD},
		{"Swap", testSecretsSwap},
		{"Invalid", testSecretsInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func putSecret(t *testing.T, s store.Secrets, p *store.PutSecretParams) *store.Secret {
	t.Helper()
	x, err := s.PutSecret(t.Context(), p)
	if err != nil {
		t.Fatalf("PutSecret %q: %v", p.Name, err)
	}
	return x
}

// Secrets: a put creates, a second replaces (keeping CreatedAt), get and
// list return the stored bytes as they were given, delete removes.
func testSecretsCRUD(t *testing.T, s store.Secrets) {
	ctx := t.Context()
	if _, err := s.GetSecret(ctx, "stripe_key"); !errors.Is(err, store.ErrSecretNotFound) {
		t.Fatalf("GetSecret of none: %v, want ErrSecretNotFound", err)
	}
	if got, err := s.ListSecrets(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ListSecrets of none = %v, %v", got, err)
	}
	// Bytes a text column would mangle: NUL, invalid UTF-8.
	ct := []byte{0, 1, 0xff, 0xfe, 'x', 0}
	a := putSecret(t, s, &store.PutSecretParams{Name: "stripe_key", KeyID: "k1", Nonce: []byte{9, 0, 8}, Ciphertext: ct, At: at(time.Second)})
	want := &store.Secret{Name: "stripe_key", KeyID: "k1", Nonce: []byte{9, 0, 8}, Ciphertext: ct, CreatedAt: at(time.Second), UpdatedAt: at(time.Second)}
	diff(t, "PutSecret (create)", want, a)
	got, err := s.GetSecret(ctx, "stripe_key")
	if err != nil {
		t.Fatalf("GetSecret: %v", err)
	}
	diff(t, "GetSecret", want, got)

	b := putSecret(t, s, &store.PutSecretParams{Name: "stripe_key", KeyID: "k2", Nonce: []byte{7}, Ciphertext: []byte("other"), At: at(time.Minute)})
	want = &store.Secret{Name: "stripe_key", KeyID: "k2", Nonce: []byte{7}, Ciphertext: []byte("other"), CreatedAt: at(time.Second), UpdatedAt: at(time.Minute)}
	diff(t, "PutSecret (replace)", want, b)
	putSecret(t, s, &store.PutSecretParams{Name: "A-first", KeyID: "k1", Nonce: []byte{1}, Ciphertext: []byte{2}, At: at(time.Hour)})
	putSecret(t, s, &store.PutSecretParams{Name: "_z", KeyID: "k1", Nonce: []byte{1}, Ciphertext: []byte{3}, At: at(time.Hour)})
	list, err := s.ListSecrets(ctx)
	if err != nil {
		t.Fatalf("ListSecrets: %v", err)
	}
	var names []string
	for _, x := range list {
		names = append(names, x.Name)
	}
	diff(t, "ListSecrets names (bytewise)", []string{"A-first", "_z", "stripe_key"}, names)
	diff(t, "ListSecrets last", want, list[2])

	if err := s.DeleteSecret(ctx, "stripe_key"); err != nil {
		t.Fatalf("DeleteSecret: %v", err)
	}
	if err := s.DeleteSecret(ctx, "stripe_key"); !errors.Is(err, store.ErrSecretNotFound) {
		t.Fatalf("DeleteSecret again: %v, want ErrSecretNotFound", err)
	}
	if _, err := s.GetSecret(ctx, "stripe_key"); !errors.Is(err, store.ErrSecretNotFound) {
		t.Fatalf("GetSecret after delete: %v, want ErrSecretNotFound", err)
	}
}

// A put with IfNonce replaces only the secret sealed with that nonce.
func testSecretsSwap(t *testing.T, s store.Secrets) {
	ctx := t.Context()
	putSecret(t, s, &store.PutSecretParams{Name: "db", KeyID: "k1", Nonce: []byte{1}, Ciphertext: []byte("v1"), At: at(time.Second)})
	_, err := s.PutSecret(ctx, &store.PutSecretParams{Name: "db", KeyID: "k2", Nonce: []byte{3}, Ciphertext: []byte("v3"), At: at(time.Minute), IfNonce: []byte{2}})
	if !errors.Is(err, store.ErrSecretChanged) {
		t.Fatalf("swap on a stale nonce: %v, want ErrSecretChanged", err)
	}
	x := putSecret(t, s, &store.PutSecretParams{Name: "db", KeyID: "k2", Nonce: []byte{3}, Ciphertext: []byte("v3"), At: at(time.Minute), IfNonce: []byte{1}})
	diff(t, "swap", &store.Secret{Name: "db", KeyID: "k2", Nonce: []byte{3}, Ciphertext: []byte("v3"), CreatedAt: at(time.Second), UpdatedAt: at(time.Minute)}, x)
	_, err = s.PutSecret(ctx, &store.PutSecretParams{Name: "gone", KeyID: "k2", Nonce: []byte{3}, Ciphertext: []byte("v3"), At: at(time.Minute), IfNonce: []byte{1}})
	if !errors.Is(err, store.ErrSecretNotFound) {
		t.Fatalf("swap of a missing secret: %v, want ErrSecretNotFound", err)
	}
	if _, err := s.GetSecret(ctx, "gone"); !errors.Is(err, store.ErrSecretNotFound) {
		t.Fatalf("a failed swap created the secret: %v", err)
	}
}

// Bad parameters fail with ErrInvalidInput and store nothing.
func testSecretsInvalid(t *testing.T, s store.Secrets) {
	ctx := t.Context()
	ok := func() *store.PutSecretParams {
		return &store.PutSecretParams{Name: "ok", KeyID: "k1", Nonce: []byte{1}, Ciphertext: []byte{2}, At: at(time.Second)}
	}
	for _, tc := range []struct {
		what string
		edit func(p *store.PutSecretParams)
	}{
		{"empty name", func(p *store.PutSecretParams) { p.Name = "" }},
		{"dot in name", func(p *store.PutSecretParams) { p.Name = "a.b" }},
		{"digit first", func(p *store.PutSecretParams) { p.Name = "1abc" }},
		{"long name", func(p *store.PutSecretParams) { p.Name = strings.Repeat("a", store.MaxSecretName+1) }},
		{"no key id", func(p *store.PutSecretParams) { p.KeyID = "" }},
		{"no nonce", func(p *store.PutSecretParams) { p.Nonce = nil }},
		{"no ciphertext", func(p *store.PutSecretParams) { p.Ciphertext = nil }},
		{"big ciphertext", func(p *store.PutSecretParams) { p.Ciphertext = make([]byte, store.MaxSecretCiphertext+1) }},
		{"zero time", func(p *store.PutSecretParams) { p.At = time.Time{} }},
	} {
		p := ok()
		tc.edit(p)
		if _, err := s.PutSecret(ctx, p); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", tc.what, err)
		}
	}
	if got, err := s.ListSecrets(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ListSecrets after refusals = %d, %v", len(got), err)
	}
	p := ok()
	p.Name = strings.Repeat("a", store.MaxSecretName)
	p.Ciphertext = make([]byte, store.MaxSecretCiphertext)
	putSecret(t, s, p)
}
