package hephaestus_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
)

func secretKeys(t *testing.T, entries ...string) *heph.SecretKeys {
	t.Helper()
	var parts []string
	for _, e := range entries {
		id, b, _ := strings.Cut(e, ":")
		parts = append(parts, id+":"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(b), heph.SecretKeySize)))
	}
	k, err := heph.ParseSecretKeys(strings.Join(parts, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Go step code reads a secret through its context; a missing one fails
// with ErrSecretNotFound.
func TestSecretInGoStep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st := openSQLite(t)
	b := flow.New("uses-secret")
	flow.Step(b, "read", func(ctx context.Context, name string) (int, error) {
		v, err := heph.Secret(ctx, name)
		if errors.Is(err, heph.ErrSecretNotFound) {
			return 0, flow.NonRetryable(err)
		}
		if err != nil {
			return 0, err
		}
		return len(v), nil // never the value itself
	})
	c := startClient(t, ctx, &heph.Config{Store: st, Logger: quietLogger(), SecretKeys: secretKeys(t, "k1:1")}, func(c *heph.Client) error { return c.Register(b.MustBuild()) })
	if _, err := c.SetSecret(ctx, "db_password", []byte("hunter22")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"db_password": `{"read":8}`, "missing": ""} {
		r, err := c.StartRun(ctx, "uses-secret", name, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.WaitRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want != "" && (res.Status != heph.StatusCompleted || string(res.Output) != want):
			t.Errorf("%s: %s %s, want completed %s", name, res.Status, res.Output, want)
		case want == "" && (res.Status != heph.StatusFailed || !strings.Contains(res.Error, `secret "missing"`) || !strings.Contains(res.Error, "not found")):
			t.Errorf("%s: %s %q, want failed naming the secret", name, res.Status, res.Error)
		}
	}
	// Outside a step: unavailable.
	if _, err := heph.Secret(ctx, "db_password"); !errors.Is(err, heph.ErrSecretsUnavailable) {
		t.Errorf("Secret outside a step: %v", err)
	}
}

// Rotation: a ring with a new current key opens the old secrets and
// seals them again; a ring of the new key alone then opens them all, and
// a ring that lacks it fails naming the key id. Bad names and values are
// refused, and a client without keys says how to configure them.
func TestSecretsRotationAndErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openSQLite(t)
	client := func(keys *heph.SecretKeys) *heph.Client {
		c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger(), SecretKeys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := client(secretKeys(t, "k1:1"))
	for _, n := range []string{"a", "b"} {
		if _, err := old.SetSecret(ctx, n, []byte("value-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	both := client(secretKeys(t, "k2:2", "k1:1"))
	res, err := both.RotateSecrets(ctx)
	if err != nil || *res != (heph.RotateResult{KeyID: "k2", Rotated: 2, Total: 2}) {
		t.Fatalf("RotateSecrets = %+v, %v", res, err)
	}
	list, err := both.ListSecrets(ctx)
	if err != nil || len(list) != 2 || list[0].KeyID != "k2" || list[1].KeyID != "k2" {
		t.Fatalf("ListSecrets after rotation = %+v, %v", list, err)
	}
	// The ring of k2 alone opens them (rotation is a no-op there).
	if res, err := client(secretKeys(t, "k2:2")).RotateSecrets(ctx); err != nil || res.Rotated != 0 {
		t.Fatalf("RotateSecrets with k2 alone = %+v, %v", res, err)
	}
	// The ring of k1 alone: every secret names the missing key.
	_, err = old.RotateSecrets(ctx)
	if !errors.Is(err, heph.ErrUnknownSecretKey) || !strings.Contains(err.Error(), `"k2"`) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("RotateSecrets with k1 alone: %v", err)
	}
	// A ciphertext moved to another name does not open.
	var ss store.Secrets = st
	a, _ := ss.GetSecret(ctx, "a")
	if _, err := ss.PutSecret(ctx, &store.PutSecretParams{Name: "moved", KeyID: a.KeyID, Nonce: a.Nonce, Ciphertext: a.Ciphertext, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := both.RotateSecrets(ctx); err != nil {
		t.Fatalf("rotation skips secrets under the current key: %v", err)
	}
	if _, err := client(secretKeys(t, "k3:3", "k2:2")).RotateSecrets(ctx); err == nil || !strings.Contains(err.Error(), `open secret "moved"`) {
		t.Fatalf("a moved ciphertext opened: %v", err)
	}

	for _, tc := range []struct {
		name  string
		value []byte
	}{{"", []byte("v")}, {"a.b", []byte("v")}, {"9a", []byte("v")}, {"ok", nil}, {"ok", make([]byte, store.MaxSecretValue+1)}} {
		if _, err := both.SetSecret(ctx, tc.name, tc.value); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("SetSecret(%q, %d bytes): %v, want ErrInvalidInput", tc.name, len(tc.value), err)
		}
	}
	none := client(nil)
	if _, err := none.SetSecret(ctx, "x", []byte("v")); !errors.Is(err, heph.ErrSecretsUnavailable) || !strings.Contains(err.Error(), "Config.SecretKeys") {
		t.Errorf("SetSecret without keys: %v", err)
	}
	if list, err := none.ListSecrets(ctx); err != nil || len(list) != 3 {
		t.Errorf("ListSecrets without keys = %d, %v", len(list), err)
	}
	if err := none.DeleteSecret(ctx, "moved"); err != nil {
		t.Errorf("DeleteSecret without keys: %v", err)
	}
	if err := none.DeleteSecret(ctx, "moved"); !errors.Is(err, heph.ErrSecretNotFound) {
		t.Errorf("DeleteSecret again: %v", err)
	}
}
