package payloadstore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/store"
)

// Values inside a payload are offloaded on their own: in a payload
// longer than Offload.Above (a snapshot excepted), every element of an
// array and member of an object whose JSON text is longer than Above is
// written to the blob store (a leaf: encoded by the chain, and holding no
// reference) and replaced by a reference; what remains is stored inline,
// or offloaded whole when it is still long (its reference says it is
// nested: its blob holds references).
//
// A run's snapshot (store.Run.State) is not split, since the runtime
// reads its structure, and it is read with the references in it in
// place. A flow's state holds the outputs of its steps and the elements
// of its maps, and a map over a thousand elements of a megabyte commits
// its state a thousand times: with references in place of the elements,
// each commit writes kilobytes, not a gigabyte. Those references are the
// ones the runtime put there: a step's output is offloaded before the
// change that records it (Offloader). The runtime copies them into what
// it writes (a task's item or input, a run's output), and every other
// read resolves them (Resolver, for the step outputs a client shows).
//
// A reference read from a snapshot carries a token, an HMAC under a key
// of this process; a reference in a payload written is accepted only
// with a valid token (and stored without it): a caller cannot make the
// store read a blob by putting a reference of its own in an input, an
// output or a signal.

// refKey is the key of the tokens of this process's references.
var refKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("hephaestus: payloadstore: no randomness for the reference key: " + err.Error())
	}
	return k
}()

// token returns r's token (r.Tok not included): it binds the hash and the
// size (what a read checks), the codecs and whether the blob is nested.
func (r *blobRef) token() string {
	b := append([]byte(r.SHA256), '|')
	b = strconv.AppendInt(b, int64(r.Size), 10)
	b = append(append(append(b, '|'), r.Codec...), '|')
	b = strconv.AppendBool(b, r.Nested)
	tokens.Lock()
	defer tokens.Unlock()
	if t, ok := tokens.m[string(b)]; ok {
		return t
	}
	m := hmac.New(sha256.New, refKey)
	m.Write(b)
	t := base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
	if len(tokens.m) >= maxTokens {
		clear(tokens.m)
	}
	tokens.m[string(b)] = t
	return t
}

// tokens holds the tokens computed lately: a snapshot's references are
// read and written again on every change of its run.
var tokens = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

const maxTokens = 1 << 16

// canonical returns r as it is stored: without its token.
func (r *blobRef) canonical() json.RawMessage { return appendRef(nil, r, false) }

// withToken returns r as a snapshot's reader sees it: with its token.
func (r *blobRef) withToken() json.RawMessage { return appendRef(nil, r, true) }

// maxRefLen is the longest object read as a reference.
const maxRefLen = 1024

// markerKey is the key of a reference, as this package writes it.
var markerKey = []byte(`"$heph"`)

// mayHoldRef reports whether v may hold a reference: the marker's key as
// written, or any \u escape (a key may spell "$heph" with escapes).
func mayHoldRef(v []byte) bool {
	return bytes.Contains(v, []byte("$heph")) || bytes.Contains(v, []byte(`\u`))
}

// holdsStoredRef reports whether v, as stored, may hold a reference.
func holdsStoredRef(v []byte) bool { return bytes.Contains(v, markerKey) }

// refIn returns the reference v is, if it is one: an object of at most
// maxRefLen bytes with the key "$heph" (however escaped) whose value is
// "blob/1". A longer object is data wherever it is read (never resolved,
// never refused): a reference is a few hundred bytes, and the walks skip
// the large objects without reading their members twice.
func refIn(v []byte) (*blobRef, bool, error) {
	if len(v) > maxRefLen {
		return nil, false, nil
	}
	found, err := markerIn(v)
	if err != nil || !found {
		return nil, false, err
	}
	r, err := parseRef(v)
	return r, err == nil, err
}

// markerIn reports whether v is an object with the member "$heph":
// "blob/1" (however escaped), whatever its length.
func markerIn(v []byte) (bool, error) {
	if len(v) == 0 || v[0] != '{' || !mayHoldRef(v) {
		return false, nil
	}
	found := false
	err := eachChild(v, func(key, val []byte, _, _ int) error {
		if !found && jsonStringIs(key, "$heph") {
			found = jsonStringIs(val, refFormat)
		}
		return nil
	})
	return found, err
}

// jsonStringIs reports whether the JSON text raw is the string s.
func jsonStringIs(raw []byte, s string) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1:len(raw)-1]) == s
	}
	var got string
	return json.Unmarshal(raw, &got) == nil && got == s
}

// nester rewrites a payload's references and offloads its large values.
type nester struct {
	s     *Store
	ctx   context.Context
	split bool     // offload the large values (else: references only)
	path  []string // where the walk is, for errors
}

func (n *nester) where() string {
	p := "$"
	for _, s := range n.path {
		p += s
	}
	return p
}

// nest returns v (a payload's plaintext) as it is to be stored: each
// reference in it that this process issued without its token, its large
// values offloaded (top: v is the payload itself, which enc offloads
// whole if need be); refs reports whether the result holds references.
func (n *nester) nest(v []byte, top bool) (out []byte, refs bool, err error) {
	r, isRef, err := refIn(v)
	if err != nil {
		return nil, false, fmt.Errorf("at %s: %w", n.where(), err)
	}
	if isRef {
		if r.Tok == "" || !hmac.Equal([]byte(r.Tok), []byte(r.token())) {
			return nil, false, fmt.Errorf("at %s: %w (sha256 %.16s…): a payload may not hold an object with \"$heph\": %q", n.where(), ErrForeignReference, r.SHA256, refFormat)
		}
		return r.canonical(), true, nil
	}
	off := n.s.off
	big := n.split && off != nil && len(v) > off.Above
	out = v
	if len(v) > 0 && (v[0] == '{' || v[0] == '[') && (big || mayHoldRef(v)) {
		if out, refs, err = n.children(v); err != nil {
			return nil, false, err
		}
	}
	if top || !big || len(out) <= off.Above || refs {
		return out, refs, nil
	}
	// A leaf: encoded on its own, and written before the commit.
	leaf := json.RawMessage(out)
	if n.s.chain != nil {
		if leaf, err = n.s.chain.EncodeJSON(out); err != nil {
			return nil, false, fmt.Errorf("at %s: %w", n.where(), err)
		}
	}
	ref, err := off.put(n.ctx, leaf, false)
	if err != nil {
		return nil, false, fmt.Errorf("at %s: %w", n.where(), err)
	}
	return ref, true, nil
}

// children returns container v with each child nested.
func (n *nester) children(v []byte) ([]byte, bool, error) {
	var buf []byte
	last, refs, i := 0, false, 0
	err := eachChild(v, func(key, val []byte, start, end int) error {
		if key != nil && jsonStringIs(key, "$heph") && jsonStringIs(val, refFormat) {
			return errOpaque
		}
		if key != nil {
			k := string(key)
			if bytes.IndexByte(key, '\\') < 0 {
				k = k[1 : len(k)-1]
			}
			n.path = append(n.path, "."+k)
		} else {
			n.path = append(n.path, "["+strconv.Itoa(i)+"]")
		}
		i++
		nv, r, err := n.nest(val, false)
		n.path = n.path[:len(n.path)-1]
		if err != nil {
			return err
		}
		refs = refs || r
		if !bytes.Equal(nv, val) {
			buf = append(append(buf, v[last:start]...), nv...)
			last = end
		}
		return nil
	})
	if errors.Is(err, errOpaque) {
		// An object with the marker longer than a reference is data,
		// kept whole: split, it could read as one.
		return v, false, nil
	}
	if err != nil || buf == nil {
		return v, refs, err
	}
	return append(buf, v[last:]...), refs, nil
}

var errOpaque = errors.New("an object with the marker")

// unnest returns v (a payload's plaintext, as stored) with its
// references resolved (keep false) or given their tokens (keep true).
func (s *Store) unnest(ctx context.Context, v []byte, keep bool) ([]byte, error) {
	if !holdsStoredRef(v) {
		return v, nil
	}
	r, isRef, err := refIn(v)
	if err != nil {
		return nil, err
	}
	if isRef {
		if keep {
			return r.withToken(), nil
		}
		return s.resolve(ctx, v)
	}
	if v[0] != '{' && v[0] != '[' {
		return v, nil
	}
	return mapChildren(v, func(val []byte) ([]byte, error) { return s.unnest(ctx, val, keep) })
}

// mapChildren returns the JSON container v with each child replaced by
// fn's (v itself when none changed).
func mapChildren(v []byte, fn func(val []byte) ([]byte, error)) ([]byte, error) {
	var buf []byte
	last := 0
	err := eachChild(v, func(_, val []byte, start, end int) error {
		nv, err := fn(val)
		if err != nil {
			return err
		}
		if !bytes.Equal(nv, val) {
			buf = append(append(buf, v[last:start]...), nv...)
			last = end
		}
		return nil
	})
	if err != nil || buf == nil {
		return v, err
	}
	return append(buf, v[last:]...), nil
}

// resolve returns the plaintext of the leaf reference ref.
func (s *Store) resolve(ctx context.Context, ref []byte) ([]byte, error) {
	b, err := s.off.get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if s.chain == nil || !codec.IsEncoded(b) {
		return b, nil
	}
	return s.chain.DecodeJSON(b)
}

// eachRef calls fn on every reference in v (a plaintext, as stored).
func eachRef(v []byte, fn func(*blobRef) error) error {
	if !holdsStoredRef(v) {
		return nil
	}
	r, isRef, err := refIn(v)
	if err != nil {
		return err
	}
	if isRef {
		return fn(r)
	}
	if v[0] != '{' && v[0] != '[' {
		return nil
	}
	return eachChild(v, func(_, val []byte, _, _ int) error { return eachRef(val, fn) })
}

// eachChild calls fn on each element (key nil) or member of the JSON
// container v, with the child's bounds in v.
func eachChild(v []byte, fn func(key, val []byte, start, end int) error) error {
	obj := v[0] == '{'
	i := skipSpace(v, 1)
	if i < len(v) && (v[i] == '}' || v[i] == ']') {
		return nil
	}
	for i < len(v) {
		var key []byte
		if obj {
			e := valueEnd(v, i)
			if e < 0 || v[i] != '"' {
				return errBadJSON
			}
			key = v[i:e]
			i = skipSpace(v, e)
			if i >= len(v) || v[i] != ':' {
				return errBadJSON
			}
			i = skipSpace(v, i+1)
		}
		e := valueEnd(v, i)
		if e < 0 {
			return errBadJSON
		}
		if err := fn(key, v[i:e], i, e); err != nil {
			return err
		}
		i = skipSpace(v, e)
		if i >= len(v) {
			return errBadJSON
		}
		if v[i] == '}' || v[i] == ']' {
			return nil
		}
		if v[i] != ',' {
			return errBadJSON
		}
		i = skipSpace(v, i+1)
	}
	return errBadJSON
}

var errBadJSON = fmt.Errorf("the payload is not valid JSON")

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the end of the JSON value starting at v[i], or -1.
func valueEnd(v []byte, i int) int {
	if i >= len(v) {
		return -1
	}
	switch v[i] {
	case '"':
		return stringEnd(v, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(v); j++ {
			switch v[j] {
			case '"':
				e := stringEnd(v, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(v) && !bytes.ContainsRune([]byte(",]} \t\r\n"), rune(v[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// stringEnd returns the end of the JSON string starting at v[i], or -1.
func stringEnd(v []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(v[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		bs := 0
		for b := j - 1; b > i && v[b] == '\\'; b-- {
			bs++
		}
		if bs%2 == 0 {
			return j + 1
		}
		j++
	}
}

// ErrForeignReference is the error of a payload that holds a reference
// this process did not issue.
var ErrForeignReference = errors.New("a reference to an offloaded payload that this process did not issue")

// Offloader returns what a runtime applies to a step's output before the
// change that records it, outside the commit: the output with its values
// longer than the offload threshold offloaded (the whole output, if it is
// one such value) and their references given tokens, as in a snapshot.
// The decision then holds references, not the values, and the commit
// writes no blob. An output that holds a reference of its own fails with
// ErrForeignReference (the commit would refuse it). Nil when s is not a
// wrapped store (it neither offloads nor reads references).
func Offloader(s store.Store) func(ctx context.Context, v json.RawMessage) (json.RawMessage, error) {
	b := baseOf(s)
	if b == nil {
		return nil
	}
	return func(ctx context.Context, v json.RawMessage) (json.RawMessage, error) {
		if (b.off == nil || len(v) <= b.off.Above) && !mayHoldRef(v) {
			return v, nil
		}
		n := &nester{s: b, ctx: ctx, split: true}
		out, _, err := n.nest(v, false)
		if err != nil {
			return nil, err
		}
		return b.unnest(ctx, out, true)
	}
}

// Resolver returns the resolution of the references in a value read from
// a snapshot (a step's output, as a client shows it): the value whole.
// Nil when s is not a wrapped store.
func Resolver(s store.Store) func(ctx context.Context, v json.RawMessage) (json.RawMessage, error) {
	b := baseOf(s)
	if b == nil {
		return nil
	}
	return func(ctx context.Context, v json.RawMessage) (json.RawMessage, error) {
		return b.unnest(ctx, v, false)
	}
}
