// Package businesskey builds and checks the run ids of flows that declare a
// business key.
//
// A flow that declares the key "orderid" gives its runs ids such as
// "orderid::1234" or "orderid::5f0c…-uuid": the key, "::", and a value the
// caller passes. Callers then address runs by their business value rather
// than by a generated id. The scope decides how many runs may share an id:
//
//   - ScopeActive (the default): at most one pending, running or waiting
//     run per id; a new run may start once the previous one has finished.
//   - ScopeForever: one run per id, ever.
//   - ScopeNone: no uniqueness; a random suffix keeps ids distinct
//     ("orderid::1234::9f86d081").
package businesskey

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Separator joins the parts of an id.
const Separator = "::"

// Scope is the uniqueness scope of a business key.
type Scope string

// The scopes.
const (
	ScopeActive  Scope = "active"
	ScopeForever Scope = "forever"
	ScopeNone    Scope = "none"
)

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool {
	return s == ScopeActive || s == ScopeForever || s == ScopeNone
}

// ErrInvalid is wrapped by every error this package returns about an
// invalid key, value, scope or id. (BuildWithSuffix's errors reading the
// random source wrap the reader's error instead.)
var ErrInvalid = errors.New("invalid business key")

// Limits of key names and values, the same on every backend: they keep a
// business id (with its workflow's name) well inside what the stores index.
const (
	// MaxKeyLen bounds a key name, in bytes.
	MaxKeyLen = 64
	// MaxValueLen bounds a value, in bytes.
	MaxValueLen = 200
)

// ValidateKey checks a key name: one to MaxKeyLen of [a-z0-9].
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key name is empty; use lower-case letters and digits, e.g. \"orderid\"", ErrInvalid)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key name %.20q… is %d bytes long; the limit is %d", ErrInvalid, key, len(key), MaxKeyLen)
	}
	if i := badKeyChar(key); i >= 0 {
		return fmt.Errorf("%w: key name %q has %s at position %d; use only lower-case letters a-z and digits 0-9", ErrInvalid, key, charAt(key, i), i)
	}
	return nil
}

// ValidateValue checks a business value: one to MaxValueLen bytes of
// letters, digits, '.', '_' and '-' ("order-42", "ORD-1", "user_7", a
// UUID). ':' is not allowed: "::" separates the parts of an id.
func ValidateValue(value string) error {
	if value == "" {
		return fmt.Errorf("%w: the value is empty; pass letters, digits, '.', '_' or '-' (such as \"order-42\"), or a UUID", ErrInvalid)
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("%w: value %.20q… is %d bytes long; the limit is %d bytes", ErrInvalid, value, len(value), MaxValueLen)
	}
	if i := badValueChar(value); i >= 0 {
		hint := "use only letters, digits, '.', '_' and '-'"
		if value[i] == ':' {
			hint += " (\"::\" is reserved: it separates the parts of a business id)"
		}
		return fmt.Errorf("%w: value %q has %s at position %d; %s", ErrInvalid, value, charAt(value, i), i, hint)
	}
	return nil
}

// Build returns the id "key::value" after checking both parts.
func Build(key, value string) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if err := ValidateValue(value); err != nil {
		return "", err
	}
	return key + Separator + value, nil
}

// BuildWithSuffix returns "key::value::suffix" with eight random hex digits
// read from rnd (crypto/rand when nil): the id of a run whose scope is
// ScopeNone.
func BuildWithSuffix(key, value string, rnd io.Reader) (string, error) {
	id, err := Build(key, value)
	if err != nil {
		return "", err
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [4]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("business key suffix: %w", err)
	}
	return id + Separator + hex.EncodeToString(b[:]), nil
}

// New returns the id of a new run under scope: Build for ScopeActive and
// ScopeForever, BuildWithSuffix for ScopeNone.
func New(key, value string, scope Scope, rnd io.Reader) (string, error) {
	switch scope {
	case ScopeActive, ScopeForever, "":
		return Build(key, value)
	case ScopeNone:
		return BuildWithSuffix(key, value, rnd)
	}
	return "", fmt.Errorf("%w: unknown scope %q (use %q, %q or %q)", ErrInvalid, scope, ScopeActive, ScopeForever, ScopeNone)
}

// Parse splits an id into its key and value (dropping any suffix).
func Parse(id string) (key, value string, err error) {
	parts := strings.Split(id, Separator)
	if len(parts) < 2 || len(parts) > 3 {
		return "", "", fmt.Errorf("%w: id %q is not of the form key::value", ErrInvalid, id)
	}
	if err := ValidateKey(parts[0]); err != nil {
		return "", "", err
	}
	if err := ValidateValue(parts[1]); err != nil {
		return "", "", err
	}
	if len(parts) == 3 && !isSuffix(parts[2]) {
		return "", "", fmt.Errorf("%w: id %q has the suffix %q; a suffix is eight lower-case hex digits, as BuildWithSuffix makes", ErrInvalid, id, parts[2])
	}
	return parts[0], parts[1], nil
}

func isSuffix(s string) bool {
	if len(s) != 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// charAt quotes the character that starts at byte i of s. Every byte
// before i is ASCII (see badKeyChar), so i is also its position in runes.
func charAt(s string, i int) string {
	r, size := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && size <= 1 {
		return fmt.Sprintf("the byte %#02x", s[i])
	}
	return strconv.QuoteRune(r)
}

// badKeyChar returns the index of the first byte outside [a-z0-9], or -1.
func badKeyChar(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return i
		}
	}
	return -1
}

// badValueChar returns the index of the first byte outside
// [A-Za-z0-9._-], or -1.
func badValueChar(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return i
		}
	}
	return -1
}
