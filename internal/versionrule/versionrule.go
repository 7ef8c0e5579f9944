// Package versionrule is the pure core of version rules (seed 000's
// version_for(input)): which version of a definition with several
// versions a new run gets. A rule is pinned (every start gets one
// version), a percentage split (chosen by a stable hash of a key: the run
// id or the business value, so a retried start picks the same version)
// or a lookup of an input field (a value maps to a version, with a
// default). The package does no I/O; the root package reads the rule and
// the versions' states from the store and calls Choose.
package versionrule

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The types of rule.
const (
	Pinned     = "pinned"
	Percentage = "percentage"
	Field      = "field"
)

// Limits of a rule.
const (
	// MaxEntries bounds the versions of a split and the values of a
	// field's map.
	MaxEntries = 100
	// MaxField bounds the dotted path of a field rule, and each value of
	// its map, in bytes.
	MaxField = 200
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid version rule")

// Error is a validation error: Field names the rule's field at fault
// ("split", "map", …; "" for the rule as a whole). It wraps ErrInvalid.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return ErrInvalid.Error() + ": " + e.Msg
	}
	return ErrInvalid.Error() + ": " + e.Field + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// badRule formats a validation error whose message starts with the
// field at fault ("split: …").
func badRule(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for _, f := range []string{"type", "version", "split", "field", "map", "default"} {
		if rest, ok := strings.CutPrefix(msg, f+": "); ok {
			return &Error{Field: f, Msg: rest}
		}
	}
	return &Error{Msg: msg}
}

// Rule is a version rule as stored (JSON).
type Rule struct {
	// Type is Pinned, Percentage or Field.
	Type string `json:"type"`
	// Version is the version of a pinned rule.
	Version int `json:"version,omitempty"`
	// Split maps versions to weights (percent, summing to 100) for a
	// percentage rule.
	Split map[int]int `json:"split,omitempty"`
	// Field is the dotted path into the input of a field rule
	// ("customer.plan").
	Field string `json:"field,omitempty"`
	// Map maps the field's value to a version; a string matches the
	// string it holds, a number or a boolean its JSON text.
	Map map[string]int `json:"map,omitempty"`
	// Default is the version of a field rule when the value is missing or
	// not in Map.
	Default int `json:"default,omitempty"`
}

// Validate checks a rule; errors wrap ErrInvalid and name the field at
// fault.
func (r *Rule) Validate() error {
	if r == nil {
		return &Error{Msg: "no rule"}
	}
	bad := badRule
	switch r.Type {
	case Pinned:
		if r.Version < 1 {
			return bad("version: a pinned rule needs a version of 1 or more, not %d", r.Version)
		}
		if len(r.Split) > 0 || r.Field != "" || len(r.Map) > 0 || r.Default != 0 {
			return bad("a pinned rule has only a version; split, field, map and default must be empty")
		}
	case Percentage:
		return r.validateSplit(bad)
	case Field:
		return r.validateField(bad)
	case "":
		return bad("type: missing; give %q, %q or %q", Pinned, Percentage, Field)
	default:
		return bad("type: %q is not %q, %q or %q", r.Type, Pinned, Percentage, Field)
	}
	return nil
}

func (r *Rule) validateSplit(bad func(string, ...any) error) error {
	if r.Version != 0 || r.Field != "" || len(r.Map) > 0 || r.Default != 0 {
		return bad("a percentage rule has only a split; version, field, map and default must be empty")
	}
	if len(r.Split) < 1 {
		return bad("split: a percentage rule needs at least one version")
	}
	if len(r.Split) > MaxEntries {
		return bad("split: %d versions, more than %d", len(r.Split), MaxEntries)
	}
	sum := 0
	for _, v := range slices.Sorted(maps.Keys(r.Split)) {
		w := r.Split[v]
		if v < 1 {
			return bad("split: version %d: versions count from 1", v)
		}
		if w < 1 || w > 100 {
			return bad("split: version %d: weight %d is not between 1 and 100", v, w)
		}
		sum += w
	}
	if sum != 100 {
		return bad("split: the weights sum to %d, not 100", sum)
	}
	return nil
}

func (r *Rule) validateField(bad func(string, ...any) error) error {
	if r.Version != 0 || len(r.Split) > 0 {
		return bad("a field rule has a field, a map and a default; version and split must be empty")
	}
	if err := checkPath(r.Field); err != nil {
		return bad("field: %v", err)
	}
	if r.Default < 1 {
		return bad("default: a field rule needs a default version of 1 or more, not %d", r.Default)
	}
	if len(r.Map) > MaxEntries {
		return bad("map: %d values, more than %d", len(r.Map), MaxEntries)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Map)) {
		if len(k) > MaxField {
			return bad("map: value %.20q… is %d bytes long, more than %d", k, len(k), MaxField)
		}
		if v := r.Map[k]; v < 1 {
			return bad("map: value %q: version %d; versions count from 1", k, v)
		}
	}
	return nil
}

// checkPath checks a dotted path: non-empty segments, at most MaxField
// bytes.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty; give a dotted path into the input, like plan or customer.plan")
	case len(p) > MaxField:
		return fmt.Errorf("%d bytes long, more than %d", len(p), MaxField)
	}
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" {
			return fmt.Errorf("%q has an empty segment", p)
		}
	}
	return nil
}

// Targets returns the versions a rule can choose, ascending, without
// repeats.
func (r *Rule) Targets() []int {
	var vs []int
	switch r.Type {
	case Pinned:
		vs = []int{r.Version}
	case Percentage:
		vs = slices.Collect(maps.Keys(r.Split))
	case Field:
		vs = append(slices.Collect(maps.Values(r.Map)), r.Default)
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

// String describes a rule in one line ("pinned 2", "percentage 1=90,2=10",
// "field plan: enterprise=3, default 2").
func (r *Rule) String() string {
	switch r.Type {
	case Pinned:
		return "pinned " + strconv.Itoa(r.Version)
	case Percentage:
		parts := make([]string, 0, len(r.Split))
		for _, v := range slices.Sorted(maps.Keys(r.Split)) {
			parts = append(parts, fmt.Sprintf("%d=%d", v, r.Split[v]))
		}
		return "percentage " + strings.Join(parts, ",")
	case Field:
		parts := make([]string, 0, len(r.Map))
		for _, k := range slices.Sorted(maps.Keys(r.Map)) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, r.Map[k]))
		}
		return fmt.Sprintf("field %s: %s, default %d", r.Field, strings.Join(parts, ","), r.Default)
	}
	return r.Type
}

// Choose returns the version a rule gives a start with input (JSON; nil
// or invalid JSON reads as no input) and key (the run id or business
// value: the percentage rule's hash), and why: "pinned", "percentage",
// "field plan=enterprise" or "field plan default". The rule must be
// valid.
func Choose(r *Rule, input json.RawMessage, key string) (version int, why string) {
	switch r.Type {
	case Pinned:
		return r.Version, Pinned
	case Percentage:
		return Bucket(r.Split, key), Percentage
	case Field:
		val, ok := Lookup(input, r.Field)
		if ok {
			if v, hit := r.Map[val]; hit {
				return v, fmt.Sprintf("field %s=%s", r.Field, val)
			}
		}
		return r.Default, fmt.Sprintf("field %s default", r.Field)
	}
	return 0, r.Type
}

// Bucket chooses a version of a split by a stable hash of key: the first
// 8 bytes of its SHA-256 modulo 100 fall in the versions' weights laid out
// in ascending version order.
func Bucket(split map[int]int, key string) int {
	sum := sha256.Sum256([]byte(key))
	point := int(binary.BigEndian.Uint64(sum[:8]) % 100)
	versions := slices.Sorted(maps.Keys(split))
	for _, v := range versions {
		point -= split[v]
		if point < 0 {
			return v
		}
	}
	return versions[len(versions)-1] // weights below 100: the last takes the rest
}

// Lookup reads the value at a dotted path of a JSON document as the
// text a field rule's map matches: a string as the string it holds, a
// number or a boolean as its JSON text. ok is false when the path is
// missing or leads to null, an object or an array.
func Lookup(input json.RawMessage, path string) (string, bool) {
	cur := bytes.TrimSpace(input)
	for seg := range strings.SplitSeq(path, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return "", false
		}
		next, ok := obj[seg]
		if !ok {
			return "", false
		}
		cur = bytes.TrimSpace(next)
	}
	if len(cur) == 0 {
		return "", false
	}
	switch cur[0] {
	case '"':
		var s string
		if json.Unmarshal(cur, &s) != nil {
			return "", false
		}
		return s, true
	case '{', '[', 'n':
		return "", false
	}
	return string(cur), true
}
