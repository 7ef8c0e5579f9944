package codec

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// KeySize is the size of a payload key: 32 bytes (AES-256).
const KeySize = 32

// maxKeyID is the longest key id, in bytes.
const maxKeyID = 64

// The environment variables KeyringFromEnv reads.
const (
	// EnvKeys holds keys inline: "id:<base64 key>" entries separated by
	// commas or newlines.
	EnvKeys = "HEPH_PAYLOAD_KEYS"
	// EnvKeyDir names a directory of key files, "<id>.key".
	EnvKeyDir = "HEPH_PAYLOAD_KEY_DIR"
	// EnvKeyFiles names key files, one key each, separated by commas; a
	// key's id is its file's name without the ".key" extension.
	EnvKeyFiles = "HEPH_PAYLOAD_KEY_FILES"
	// EnvWriteKey is the id of the key that encrypts new payloads;
	// required when there are several keys.
	EnvWriteKey = "HEPH_PAYLOAD_WRITE_KEY"
)

// keyHint tells how to make a key, in errors.
const keyHint = "a key is 32 random bytes in base64: openssl rand -base64 32"

// Key is a payload key with its id.
type Key struct {
	// ID names the key in envelopes: 1 to 64 letters, digits, '_' or '-'.
	ID string
	// Secret is the key: KeySize bytes.
	Secret []byte
	// Source says where the key came from, for errors: "HEPH_PAYLOAD_KEYS",
	// a file's path. Optional.
	Source string
}

// KeyringConfig configures a Keyring.
type KeyringConfig struct {
	// Keys are the keys the ring decrypts with; their ids are unique.
	// Required.
	Keys []Key
	// WriteKey is the id of the key that encrypts new payloads, one of
	// Keys. Defaults to the only key when Keys holds one; required
	// otherwise.
	WriteKey string
}

// Keyring holds payload keys by id: all of them decrypt, one encrypts
// (rotation: add a new key, make it the write key, re-encrypt, then
// remove the old one). It is immutable and safe for concurrent use.
type Keyring struct {
	write string
	ids   []string
	keys  map[string][]byte
}

// NewKeyring returns a keyring of the keys of cfg. Errors name the key
// and its source, and never quote a key.
func NewKeyring(cfg *KeyringConfig) (*Keyring, error) {
	if cfg == nil || len(cfg.Keys) == 0 {
		return nil, errors.New("payload keys: KeyringConfig.Keys is empty")
	}
	r := &Keyring{keys: map[string][]byte{}}
	from := map[string]string{}
	for _, k := range cfg.Keys {
		src := ""
		if k.Source != "" {
			src = " (" + k.Source + ")"
		}
		if err := checkKeyID(k.ID); err != nil {
			return nil, fmt.Errorf("payload keys%s: %w", src, err)
		}
		if prev, dup := from[k.ID]; dup {
			return nil, fmt.Errorf("payload keys: key id %q appears twice: in %s and in %s", k.ID, orUnnamed(prev), orUnnamed(k.Source))
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("payload keys: key %q%s is %d bytes long, want %d (AES-256; %s)", k.ID, src, len(k.Secret), KeySize, keyHint)
		}
		from[k.ID] = k.Source
		r.ids = append(r.ids, k.ID)
		r.keys[k.ID] = append([]byte(nil), k.Secret...)
	}
	sort.Strings(r.ids)
	r.write = cfg.WriteKey
	switch {
	case r.write == "" && len(r.ids) == 1:
		r.write = r.ids[0]
	case r.write == "":
		return nil, fmt.Errorf("payload keys: KeyringConfig.WriteKey is required with several keys (%s)", strings.Join(r.ids, ", "))
	case r.keys[r.write] == nil:
		return nil, fmt.Errorf("payload keys: the write key %q is not among the keys (%s)", r.write, strings.Join(r.ids, ", "))
	}
	return r, nil
}

func orUnnamed(src string) string {
	if src == "" {
		return "KeyringConfig.Keys"
	}
	return src
}

// WriteKey is the id of the key that encrypts new payloads.
func (r *Keyring) WriteKey() string { return r.write }

// IDs returns the ids of the keys, sorted.
func (r *Keyring) IDs() []string { return append([]string(nil), r.ids...) }

// decodeKey decodes a key in base64 (standard or URL alphabet, padding
// optional, surrounding space ignored).
func decodeKey(id, src, text string) (Key, error) {
	text = strings.TrimRight(strings.TrimSpace(text), "=")
	if text == "" {
		return Key{}, fmt.Errorf("payload keys: key %q (%s) is empty (%s)", id, src, keyHint)
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(text, "-_") {
		enc = base64.RawURLEncoding
	}
	secret, err := enc.DecodeString(text)
	if err != nil {
		var at base64.CorruptInputError
		if errors.As(err, &at) {
			return Key{}, fmt.Errorf("payload keys: key %q (%s) is not base64: bad character at offset %d (%s)", id, src, int64(at), keyHint)
		}
		return Key{}, fmt.Errorf("payload keys: key %q (%s) is not base64 (%s)", id, src, keyHint)
	}
	if len(secret) != KeySize {
		return Key{}, fmt.Errorf("payload keys: key %q (%s) is %d bytes long, want %d (AES-256; %s)", id, src, len(secret), KeySize, keyHint)
	}
	return Key{ID: id, Secret: secret, Source: src}, nil
}

// ParseKeys reads keys in their text form: entries separated by commas or
// newlines, each "id:<base64 key>"; blank entries and lines starting with
// '#' are ignored. src names the text in errors (EnvKeys, a path).
func ParseKeys(src, text string) ([]Key, error) {
	var keys []Key
	n := 0
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("payload keys (%s): entry %d is not <id>:<base64 key>", src, n)
		}
		id = strings.TrimSpace(id)
		if err := checkKeyID(id); err != nil {
			return nil, fmt.Errorf("payload keys (%s): entry %d: %w", src, n, err)
		}
		k, err := decodeKey(id, src, b64)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("payload keys (%s): no key", src)
	}
	return keys, nil
}

// ReadKeyFile reads a key from a file holding it in base64 (surrounding
// space ignored); its id is the file's name without the ".key" extension:
// /run/secrets/k2.key holds key k2.
func ReadKeyFile(path string) (Key, error) {
	id := strings.TrimSuffix(filepath.Base(path), ".key")
	if err := checkKeyID(id); err != nil {
		return Key{}, fmt.Errorf("payload keys (%s): the file name gives the id: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("payload keys: key %q: %w", id, err)
	}
	return decodeKey(id, path, string(b))
}

// ReadKeyDir reads the key files of dir: the files named "<id>.key"
// (others, and names starting with '.', are ignored; symbolic links are
// followed, as in a Kubernetes secret volume). A directory without key
// files is an error.
func ReadKeyDir(dir string) ([]Key, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("payload keys: %w", err)
	}
	var keys []Key
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".key") || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			continue
		}
		k, err := ReadKeyFile(path)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("payload keys: directory %s holds no key file (<id>.key)", dir)
	}
	return keys, nil
}

// KeyringFromEnv returns the keyring the environment configures: the keys
// of EnvKeys, EnvKeyDir and EnvKeyFiles together (an id defined twice is
// an error), and the write key EnvWriteKey (which defaults to the only
// key when there is one). With none of the three key variables set, it
// returns nil and no error: payloads are not encrypted.
//
//	HEPH_PAYLOAD_KEYS="k1:<base64>,k2:<base64>"
//	HEPH_PAYLOAD_KEY_DIR=/etc/heph/payload-keys   # k1.key, k2.key
//	HEPH_PAYLOAD_KEY_FILES=/run/secrets/k1.key,/run/secrets/k2.key
//	HEPH_PAYLOAD_WRITE_KEY=k2
func KeyringFromEnv() (*Keyring, error) { return KeyringFromLookup(os.Getenv) }

// KeyringFromLookup is KeyringFromEnv with the variables read by getenv
// (a program's flags that stand for them, a test's environment).
func KeyringFromLookup(getenv func(key string) string) (*Keyring, error) {
	var keys []Key
	if text := getenv(EnvKeys); strings.TrimSpace(text) != "" {
		k, err := ParseKeys(EnvKeys, text)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k...)
	}
	if dir := strings.TrimSpace(getenv(EnvKeyDir)); dir != "" {
		k, err := ReadKeyDir(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeyDir, err)
		}
		keys = append(keys, k...)
	}
	if files := getenv(EnvKeyFiles); strings.TrimSpace(files) != "" {
		for _, path := range strings.Split(files, ",") {
			if path = strings.TrimSpace(path); path == "" {
				continue
			}
			k, err := ReadKeyFile(path)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvKeyFiles, err)
			}
			keys = append(keys, k)
		}
	}
	write := strings.TrimSpace(getenv(EnvWriteKey))
	if len(keys) == 0 {
		if write != "" {
			return nil, fmt.Errorf("payload keys: %s is %q but no key is set (%s, %s or %s)", EnvWriteKey, write, EnvKeys, EnvKeyDir, EnvKeyFiles)
		}
		return nil, nil
	}
	ids := make([]string, 0, len(keys))
	found := false
	for _, k := range keys {
		ids = append(ids, k.ID)
		found = found || k.ID == write
	}
	sort.Strings(ids)
	switch {
	case write == "" && len(keys) > 1:
		return nil, fmt.Errorf("payload keys: %s is required with several keys (%s)", EnvWriteKey, strings.Join(ids, ", "))
	case write != "" && !found:
		return nil, fmt.Errorf("payload keys: %s is %q, which is not among the keys (%s)", EnvWriteKey, write, strings.Join(ids, ", "))
	}
	return NewKeyring(&KeyringConfig{Keys: keys, WriteKey: write})
}
