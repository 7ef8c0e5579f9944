package codec_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/codec"
)

// writeFile writes text to dir/name.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// short is the base64 of 16 bytes: a key of the wrong length.
var short = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))

// noKeyIn fails when err quotes key material.
func noKeyIn(t *testing.T, err error, material ...string) {
	t.Helper()
	for _, m := range material {
		if m != "" && strings.Contains(err.Error(), strings.TrimRight(m, "=")) {
			t.Errorf("the error quotes a key: %v", err)
		}
	}
}

func TestReadKeyDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "k1.key", b64(1)+"\n")
	writeFile(t, dir, "k2.key", "  "+strings.TrimRight(base64.URLEncoding.EncodeToString(secret(2)), "=")+"  ")
	writeFile(t, dir, "README.md", "not a key")
	writeFile(t, dir, ".hidden.key", "not a key")
	if err := os.Mkdir(filepath.Join(dir, "sub.key"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A Kubernetes secret volume: the key files are links.
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "..data"), "k3.key", b64(3))
	if err := os.Symlink(filepath.Join("..data", "k3.key"), filepath.Join(dir, "k3.key")); err != nil {
		t.Fatal(err)
	}
	keys, err := codec.ReadKeyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, k := range keys {
		ids = append(ids, k.ID)
		if !reflect.DeepEqual(k.Secret, secret(byte(i+1))) || k.Source != filepath.Join(dir, k.ID+".key") {
			t.Errorf("key %q = %+v", k.ID, k)
		}
	}
	if !reflect.DeepEqual(ids, []string{"k1", "k2", "k3"}) {
		t.Fatalf("ids %v", ids)
	}
	ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: keys, WriteKey: "k3"})
	if err != nil || ring.WriteKey() != "k3" || !reflect.DeepEqual(ring.IDs(), ids) {
		t.Fatalf("NewKeyring = %v, %v", ring, err)
	}
	// A file of its own.
	k, err := codec.ReadKeyFile(writeFile(t, t.TempDir(), "payments", b64(9)))
	if err != nil || k.ID != "payments" {
		t.Fatalf("ReadKeyFile = %+v, %v", k, err)
	}
}

func TestReadKeyDirErrors(t *testing.T) {
	t.Parallel()
	bad := "not/base64!!"
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"empty", nil, []string{"holds no key file"}},
		{"only others", map[string]string{"k1.txt": b64(1)}, []string{"holds no key file"}},
		{"short key", map[string]string{"k1.key": short}, []string{`key "k1"`, "k1.key", "16 bytes long, want 32"}},
		{"long key", map[string]string{"k1.key": base64.StdEncoding.EncodeToString(make([]byte, 48))}, []string{`key "k1"`, "48 bytes long"}},
		{"hex key", map[string]string{"k1.key": strings.Repeat("ab", 32)}, []string{`key "k1"`, "48 bytes long"}},
		{"bad base64", map[string]string{"k1.key": bad}, []string{`key "k1"`, "k1.key", "not base64", "offset 10"}},
		{"empty file", map[string]string{"k1.key": "\n"}, []string{`key "k1"`, "is empty"}},
		{"bad id", map[string]string{"my key.key": b64(1)}, []string{`"my key"`, "file name gives the id"}},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		for name, text := range tt.files {
			writeFile(t, dir, name, text)
		}
		_, err := codec.ReadKeyDir(dir)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", tt.name, err, w)
			}
		}
		noKeyIn(t, err, short, bad, strings.Repeat("ab", 32))
	}
	if _, err := codec.ReadKeyDir(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := codec.ReadKeyFile(filepath.Join(t.TempDir(), "k1.key")); err == nil || !strings.Contains(err.Error(), `key "k1"`) {
		t.Errorf("missing file: %v", err)
	}
}

func TestNewKeyringErrors(t *testing.T) {
	t.Parallel()
	k1 := codec.Key{ID: "k1", Secret: secret(1), Source: "a"}
	tests := []struct {
		cfg  *codec.KeyringConfig
		want string
	}{
		{nil, "Keys is empty"},
		{&codec.KeyringConfig{}, "Keys is empty"},
		{&codec.KeyringConfig{Keys: []codec.Key{k1, {ID: "k1", Secret: secret(2), Source: "b"}}, WriteKey: "k1"}, `key id "k1" appears twice: in a and in b`},
		{&codec.KeyringConfig{Keys: []codec.Key{{ID: "k1", Secret: secret(1)[:31]}}}, `key "k1" is 31 bytes long, want 32`},
		{&codec.KeyringConfig{Keys: []codec.Key{{ID: "", Secret: secret(1)}}}, `key id ""`},
		{&codec.KeyringConfig{Keys: []codec.Key{{ID: strings.Repeat("k", 65), Secret: secret(1)}}}, "1 to 64 bytes"},
		{&codec.KeyringConfig{Keys: []codec.Key{{ID: "k.1", Secret: secret(1)}}}, `key id "k.1": write letters`},
		{&codec.KeyringConfig{Keys: []codec.Key{k1, {ID: "k2", Secret: secret(2)}}}, "WriteKey is required with several keys (k1, k2)"},
		{&codec.KeyringConfig{Keys: []codec.Key{k1}, WriteKey: "k9"}, `the write key "k9" is not among the keys (k1)`},
	}
	for _, tt := range tests {
		if _, err := codec.NewKeyring(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewKeyring(%+v): %v, want %q", tt.cfg, err, tt.want)
		}
	}
	// The ring keeps its own copy of the keys.
	s := secret(1)
	r, err := codec.NewKeyring(&codec.KeyringConfig{Keys: []codec.Key{{ID: "k1", Secret: s}}})
	if err != nil || r.WriteKey() != "k1" {
		t.Fatalf("NewKeyring of one key = %v, %v", r, err)
	}
	c := standard(t, r)
	enc, _ := c.EncodeJSON([]byte(`1`))
	s[0] ^= 1
	if _, err := c.DecodeJSON(enc); err != nil {
		t.Fatalf("changing the caller's key slice changed the ring: %v", err)
	}
}

func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{codec.EnvKeys, codec.EnvKeyDir, codec.EnvKeyFiles, codec.EnvWriteKey} {
		t.Setenv(k, env[k])
	}
}

func TestKeyringFromEnv(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "k3.key", b64(3))
	writeFile(t, dir, "k4.key", b64(4))
	single := writeFile(t, t.TempDir(), "k5.key", b64(5))
	other := writeFile(t, t.TempDir(), "k6.key", b64(6))

	setEnv(t, map[string]string{
		codec.EnvKeys:     "k1:" + b64(1) + ",\n # a comment\n k2 : " + b64(2) + " ,",
		codec.EnvKeyDir:   dir,
		codec.EnvKeyFiles: single + ", " + other,
		codec.EnvWriteKey: "k2",
	})
	r, err := codec.KeyringFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if r.WriteKey() != "k2" || !reflect.DeepEqual(r.IDs(), []string{"k1", "k2", "k3", "k4", "k5", "k6"}) {
		t.Fatalf("keyring %v, writing with %s", r.IDs(), r.WriteKey())
	}
	// The keys are the right ones: a payload written under k3 from the
	// directory reads with the ring.
	k3ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: []codec.Key{{ID: "k3", Secret: secret(3)}}})
	if err != nil {
		t.Fatal(err)
	}
	k3 := standard(t, k3ring)
	enc, _ := k3.EncodeJSON([]byte(`"x"`))
	if _, err := standard(t, r).DecodeJSON(enc); err != nil {
		t.Fatalf("k3 from the directory: %v", err)
	}

	// Nothing set: no keyring, no error.
	setEnv(t, nil)
	if r, err := codec.KeyringFromEnv(); r != nil || err != nil {
		t.Fatalf("KeyringFromEnv with nothing set = %v, %v", r, err)
	}
	// One key: it writes.
	setEnv(t, map[string]string{codec.EnvKeys: "solo:" + b64(1)})
	if r, err := codec.KeyringFromEnv(); err != nil || r.WriteKey() != "solo" {
		t.Fatalf("one key = %v, %v", r, err)
	}
}

func TestKeyringFromEnvErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "k1.key", b64(1))
	file := writeFile(t, t.TempDir(), "k2.key", b64(2))
	bad := "@@notbase64@@"
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no colon", map[string]string{codec.EnvKeys: "k1:" + b64(1) + "," + b64(2)}, []string{"HEPH_PAYLOAD_KEYS", "entry 2 is not <id>:<base64 key>"}},
		{"bad base64", map[string]string{codec.EnvKeys: "k1:" + bad}, []string{"HEPH_PAYLOAD_KEYS", `key "k1"`, "not base64"}},
		{"wrong length", map[string]string{codec.EnvKeys: "k1:" + short}, []string{"HEPH_PAYLOAD_KEYS", `key "k1"`, "16 bytes long, want 32"}},
		{"bad id", map[string]string{codec.EnvKeys: "k 1:" + b64(1)}, []string{"HEPH_PAYLOAD_KEYS", "entry 1", `"k 1"`}},
		{"empty id", map[string]string{codec.EnvKeys: ":" + b64(1)}, []string{"entry 1", `key id ""`}},
		{"only comments", map[string]string{codec.EnvKeys: "# k1:x\n,"}, []string{"HEPH_PAYLOAD_KEYS", "no key"}},
		{"duplicate", map[string]string{codec.EnvKeys: "k1:" + b64(1) + ",k1:" + b64(2), codec.EnvWriteKey: "k1"}, []string{`key id "k1" appears twice: in HEPH_PAYLOAD_KEYS and in HEPH_PAYLOAD_KEYS`}},
		{"duplicate across sources", map[string]string{codec.EnvKeys: "k1:" + b64(1), codec.EnvKeyDir: dir, codec.EnvWriteKey: "k1"}, []string{`key id "k1" appears twice: in HEPH_PAYLOAD_KEYS and in ` + filepath.Join(dir, "k1.key")}},
		{"no write key", map[string]string{codec.EnvKeyDir: dir, codec.EnvKeyFiles: file}, []string{"HEPH_PAYLOAD_WRITE_KEY is required with several keys (k1, k2)"}},
		{"absent write key", map[string]string{codec.EnvKeyDir: dir, codec.EnvWriteKey: "k9"}, []string{`HEPH_PAYLOAD_WRITE_KEY is "k9", which is not among the keys (k1)`}},
		{"write key alone", map[string]string{codec.EnvWriteKey: "k1"}, []string{"HEPH_PAYLOAD_WRITE_KEY", "no key is set"}},
		{"missing dir", map[string]string{codec.EnvKeyDir: filepath.Join(dir, "nope")}, []string{"HEPH_PAYLOAD_KEY_DIR", "nope"}},
		{"missing file", map[string]string{codec.EnvKeyFiles: filepath.Join(dir, "k7.key")}, []string{"HEPH_PAYLOAD_KEY_FILES", `key "k7"`}},
	}
	for _, tt := range tests {
		setEnv(t, tt.env)
		r, err := codec.KeyringFromEnv()
		if err == nil {
			t.Errorf("%s: no error, keyring %v", tt.name, r.IDs())
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", tt.name, err, w)
			}
		}
		noKeyIn(t, err, b64(1), b64(2), short, bad)
	}
}
