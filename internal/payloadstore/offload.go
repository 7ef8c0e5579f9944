package payloadstore

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/blobstore"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/store"
)

// Offload moves large payloads out of the database: a payload whose
// stored form (after the codec chain) is longer than Above bytes is
// written to Bucket, under its content's SHA-256, before the commit that
// refers to it, and the row holds a reference in its place:
//
//	{"$heph":"blob/1","sha256":"<hex>","size":N,"codec":"zstd,aes-gcm"}
//
// (codec is "json" for a payload stored as it was given). The blob holds
// the stored form, so with an encrypting chain the bucket holds
// ciphertext only. Reads fetch the blob and check its hash and size.
// A retried commit writes the same blob again under the same name: no
// new object. Blobs no row refers to any more (runs deleted, commits that
// crashed after the blob was written) are deleted by Sweep.
type Offload struct {
	Bucket blobstore.Store
	// Above is the size in bytes above which a payload is offloaded.
	Above int

	mu sync.Mutex
	// written holds when this process last wrote each blob: a blob
	// written less than rewriteAfter ago is not written again (the same
	// bytes in several rows of one commit, a retried commit).
	written map[string]time.Time
	pruned  time.Time // when written was last pruned
	// cache holds blobs read or written lately, by hash (content never
	// changes under a name), up to cacheBytes in all, the least recently
	// used evicted first (lru).
	cache      map[string]*list.Element
	lru        *list.List
	cacheBytes int
}

// rewriteAfter is how long a blob this process wrote is taken as fresh:
// within it, the same content is not written again. The sweep's grace
// must exceed it plus the longest commit.
const rewriteAfter = time.Minute

// maxCacheBytes bounds the blobs an Offload keeps in memory; a blob
// larger than a quarter of it is not kept.
const maxCacheBytes = 64 << 20

// fresh reports whether this process wrote blob h less than rewriteAfter
// ago.
func (o *Offload) fresh(h string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.written[h]
	return ok && now.Sub(at) < rewriteAfter
}

// remember notes blob h (of content b) as written at now (zero: read),
// and keeps it in the cache when it is small enough.
func (o *Offload) remember(h string, b []byte, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !now.IsZero() {
		if o.written == nil {
			o.written = map[string]time.Time{}
		}
		if now.Sub(o.pruned) >= rewriteAfter { // at most once a period
			for k, at := range o.written {
				if now.Sub(at) >= rewriteAfter {
					delete(o.written, k)
				}
			}
			o.pruned = now
		}
		o.written[h] = now
	}
	if len(b) > maxCacheBytes/4 {
		return
	}
	if o.cache == nil {
		o.cache = map[string]*list.Element{}
		o.lru = list.New()
	}
	if e, ok := o.cache[h]; ok {
		o.lru.MoveToFront(e)
		return
	}
	for o.cacheBytes+len(b) > maxCacheBytes { // the least recently used first
		e := o.lru.Back()
		c := e.Value.(*cachedBlob)
		o.lru.Remove(e)
		delete(o.cache, c.h)
		o.cacheBytes -= len(c.b)
	}
	o.cache[h] = o.lru.PushFront(&cachedBlob{h: h, b: b})
	o.cacheBytes += len(b)
}

type cachedBlob struct {
	h string
	b []byte
}

// forget drops what o knows of blob h (deleted).
func (o *Offload) forget(h string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.written, h)
	if e, ok := o.cache[h]; ok {
		delete(o.cache, h)
		o.lru.Remove(e)
		o.cacheBytes -= len(e.Value.(*cachedBlob).b)
	}
}

func (o *Offload) cached(h string) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.cache[h]
	if !ok {
		return nil, false
	}
	o.lru.MoveToFront(e)
	return e.Value.(*cachedBlob).b, true
}

// DefaultOffloadAbove is the default of Offload.Above: 256 KiB.
const DefaultOffloadAbove = 256 << 10

// BlobPrefix is where in the bucket the blobs are, each named by the hex
// SHA-256 of its content.
const BlobPrefix = "heph/sha256/"

// refFormat is the "$heph" value of a blob reference.
const refFormat = "blob/1"

// refPrefix starts every blob reference as this package writes it (a
// database may store it reordered and spaced: IsBlobRef reads either).
var refPrefix = []byte(`{"$heph":"` + refFormat + `"`)

// blobRef is a reference to an offloaded payload.
type blobRef struct {
	Format string `json:"$heph"`
	SHA256 string `json:"sha256"`
	Size   int    `json:"size"`
	Codec  string `json:"codec"`
	// Nested: the blob holds references (a payload offloaded whole
	// after its large values were offloaded on their own).
	Nested bool `json:"nested,omitempty"`
	// Tok: the token of a reference read from a snapshot (nested.go).
	Tok string `json:"tok,omitempty"`
}

// IsBlobRef reports whether v is a reference to an offloaded payload.
func IsBlobRef(v []byte) bool {
	if len(v) > maxRefLen {
		return false
	}
	if bytes.HasPrefix(v, refPrefix) {
		return true
	}
	f, ok := codec.Marker(v)
	return ok && f == refFormat
}

// parseRef reads the reference v: its members by name (the last of a
// name that repeats, others ignored), as encoding/json would, without its
// cost (a snapshot holds thousands).
func parseRef(v []byte) (*blobRef, error) {
	var r blobRef
	bad := false
	str := func(val []byte) string {
		if len(val) < 2 || val[0] != '"' {
			bad = true
			return ""
		}
		if bytes.IndexByte(val, '\\') < 0 {
			return string(val[1 : len(val)-1])
		}
		var out string
		if json.Unmarshal(val, &out) != nil {
			bad = true
		}
		return out
	}
	if len(v) == 0 || v[0] != '{' {
		return nil, fmt.Errorf("blob reference %.200s: not an object", v)
	}
	err := eachChild(v, func(key, val []byte, _, _ int) error {
		switch str(key) {
		case "$heph":
			r.Format = str(val)
		case "sha256":
			r.SHA256 = str(val)
		case "codec":
			r.Codec = str(val)
		case "tok":
			r.Tok = str(val)
		case "size":
			n, err := strconv.Atoi(string(val))
			r.Size, bad = n, bad || err != nil
		case "nested":
			r.Nested, bad = string(val) == "true", bad || (string(val) != "true" && string(val) != "false")
		}
		return nil
	})
	if err != nil || bad {
		return nil, fmt.Errorf("blob reference %.200s: malformed", v)
	}
	if r.Format != refFormat || len(r.SHA256) != 64 || r.Size < 0 {
		return nil, fmt.Errorf("blob reference %.200s: malformed", v)
	}
	if _, err := hex.DecodeString(r.SHA256); err != nil {
		return nil, fmt.Errorf("blob reference %.200s: malformed hash", v)
	}
	return &r, nil
}

// appendRef appends r as JSON (with its token when tok).
func appendRef(b []byte, r *blobRef, tok bool) []byte {
	b = append(b, `{"$heph":"`+refFormat+`","sha256":"`...)
	b = append(b, r.SHA256...)
	b = append(b, `","size":`...)
	b = strconv.AppendInt(b, int64(r.Size), 10)
	b = append(b, `,"codec":`...)
	q, _ := json.Marshal(r.Codec)
	b = append(b, q...)
	if r.Nested {
		b = append(b, `,"nested":true`...)
	}
	if tok {
		b = append(b, `,"tok":"`...)
		b = append(b, r.token()...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// BlobRefs returns the hashes of the blobs a stored payload refers to:
// itself when it is a reference, and none otherwise.
func BlobRefs(v []byte) []string {
	if !IsBlobRef(v) {
		return nil
	}
	r, err := parseRef(v)
	if err != nil {
		return nil
	}
	return []string{r.SHA256}
}

// put writes v (a payload in its stored form) to the bucket and returns
// the reference to it.
func (o *Offload) put(ctx context.Context, v json.RawMessage, nested bool) (json.RawMessage, error) {
	sum := sha256.Sum256(v)
	h := hex.EncodeToString(sum[:])
	// Written even when it exists (unless this process wrote it within
	// rewriteAfter): the write refreshes the blob's time, so that a sweep
	// that saw it unreferenced and old does not delete it under the
	// commit about to refer to it.
	if now := time.Now(); !o.fresh(h, now) {
		if err := o.write(ctx, h, v); err != nil {
			return nil, fmt.Errorf("offload %d bytes to the blob store: %w", len(v), err)
		}
		o.remember(h, v, now)
	}
	codecs := "json"
	if codec.IsEncoded(v) {
		if info, err := codec.Describe(v); err == nil {
			codecs = strings.Join(info.Codecs, ",")
		}
	}
	return appendRef(nil, &blobRef{Format: refFormat, SHA256: h, Size: len(v), Codec: codecs, Nested: nested}, false), nil
}

// get reads the payload a reference refers to, in its stored form.
func (o *Offload) get(ctx context.Context, v json.RawMessage) (json.RawMessage, error) {
	r, err := parseRef(v)
	if err != nil {
		return nil, err
	}
	if o == nil || o.Bucket == nil {
		return nil, fmt.Errorf("the payload (%d bytes) is in a blob store (sha256 %s), and this process has none (Config.PayloadBlobs)", r.Size, r.SHA256)
	}
	if b, ok := o.cached(r.SHA256); ok {
		return b, nil
	}
	b, err := o.Bucket.Read(ctx, BlobPrefix+r.SHA256)
	if err != nil {
		if errors.Is(err, blobstore.ErrNotFound) {
			return nil, fmt.Errorf("the payload's blob sha256 %s (%d bytes) is missing from the blob store", r.SHA256, r.Size)
		}
		return nil, fmt.Errorf("read the payload's blob sha256 %s: %w", r.SHA256, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != r.SHA256 || len(b) != r.Size {
		return nil, fmt.Errorf("the payload's blob sha256 %s is corrupt: %d bytes read, %d expected, or another hash", r.SHA256, len(b), r.Size)
	}
	o.remember(r.SHA256, b, time.Time{})
	return b, nil
}

// write writes blob h.
func (o *Offload) write(ctx context.Context, h string, v []byte) error {
	return o.Bucket.Write(ctx, BlobPrefix+h, v)
}

// SweepResult is what a sweep of the blob store did.
type SweepResult struct {
	// Blobs seen, Old enough to be deleted if unreferenced, and Deleted.
	Blobs, Old, Deleted int
	// Bytes deleted.
	Bytes int64
}

// Sweep deletes the blobs of bucket older than grace that no payload of
// the store refers to any more: those of runs deleted (retention,
// DeleteRuns) and those written by commits that did not happen (a crash
// between the blob's write and the commit). refs walks every stored
// payload (Referenced). A blob younger than grace is kept, referenced or
// not: a commit may be about to refer to it (grace must exceed the
// longest commit, an hour by default).
func Sweep(ctx context.Context, bucket blobstore.Store, grace time.Duration, referenced func(ctx context.Context) (map[string]bool, error)) (*SweepResult, error) {
	return sweep(ctx, &Offload{Bucket: bucket}, grace, referenced)
}

// Sweep is the package's Sweep of o's bucket; the blobs it deletes this
// process writes again when it needs them (however lately it wrote them).
func (o *Offload) Sweep(ctx context.Context, grace time.Duration, referenced func(ctx context.Context) (map[string]bool, error)) (*SweepResult, error) {
	return sweep(ctx, o, grace, referenced)
}

func sweep(ctx context.Context, o *Offload, grace time.Duration, referenced func(ctx context.Context) (map[string]bool, error)) (*SweepResult, error) {
	bucket := o.Bucket
	res := &SweepResult{}
	cutoff := time.Now().Add(-grace)
	old := map[string]int64{}
	err := bucket.List(ctx, BlobPrefix, func(obj blobstore.Object) error {
		res.Blobs++
		if obj.ModTime.Before(cutoff) {
			old[strings.TrimPrefix(obj.Key, BlobPrefix)] = obj.Size
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("sweep blobs: list: %w", err)
	}
	res.Old = len(old)
	if len(old) == 0 {
		return res, nil
	}
	refs, err := referenced(ctx)
	if err != nil {
		return res, fmt.Errorf("sweep blobs: %w", err)
	}
	for h, size := range old {
		if refs[h] {
			continue
		}
		// Written again since the listing (a commit about to refer to
		// it): kept.
		a, err := bucket.Attributes(ctx, BlobPrefix+h)
		if err != nil || !a.ModTime.Before(cutoff) {
			continue
		}
		if err := bucket.Delete(ctx, BlobPrefix+h); err != nil {
			return res, fmt.Errorf("sweep blobs: delete %s: %w", h, err)
		}
		o.forget(h)
		res.Deleted++
		res.Bytes += size
	}
	return res, nil
}

// Reencoder returns the rewrite of a stored payload that
// Client.ReencodePayloads applies: the payload in its stored form as the
// codec chain and the offload of the wrapped store s write it now. An
// offloaded payload is read from its blob, re-encoded, and written to a
// new blob (or inline, if it is now small enough); an inline payload
// re-encoded to more than Offload.Above is offloaded. The values offloaded
// on their own inside a payload are re-encoded to new blobs, and the
// payload that refers to them with them.
func Reencoder(s store.Store) func(v json.RawMessage) (json.RawMessage, bool, error) {
	b := baseOf(s)
	if b == nil || b.chain == nil {
		return nil
	}
	ctx := context.Background()
	return func(v json.RawMessage) (json.RawMessage, bool, error) {
		stored := v
		if IsBlobRef(v) {
			var err error
			if stored, err = b.off.get(ctx, v); err != nil {
				return nil, false, err
			}
		}
		plain, leaves, err := b.reencodeLeaves(ctx, stored)
		if err != nil {
			return nil, false, err
		}
		var out json.RawMessage
		changed := leaves
		if leaves {
			out, err = b.chain.EncodeJSON(plain)
		} else {
			out, changed, err = b.chain.Reencode(stored)
		}
		if err != nil || !changed {
			return v, false, err
		}
		if b.off != nil && len(out) > b.off.Above {
			if out, err = b.off.put(ctx, out, holdsStoredRef(plain)); err != nil {
				return nil, false, err
			}
		}
		return out, true, nil
	}
}

// reencodeLeaves re-encodes the values offloaded on their own inside
// stored (a payload's stored form, not a reference): it returns the
// plaintext with the new references, and whether any changed (nil
// plaintext when stored holds no reference).
func (s *Store) reencodeLeaves(ctx context.Context, stored json.RawMessage) (json.RawMessage, bool, error) {
	plain := stored
	if codec.IsEncoded(stored) {
		var err error
		if plain, err = s.chain.DecodeJSON(stored); err != nil {
			return nil, false, err
		}
	}
	if !holdsStoredRef(plain) {
		return nil, false, nil
	}
	changed := false
	var ferr error
	out, err := rewriteRefs(plain, func(r *blobRef) json.RawMessage {
		leaf, err := s.off.get(ctx, r.canonical())
		if err == nil {
			var next json.RawMessage
			var ch bool
			if next, ch, err = s.chain.Reencode(leaf); err == nil && ch {
				changed = true
				var ref json.RawMessage
				if ref, err = s.off.put(ctx, next, false); err == nil {
					return ref
				}
			}
		}
		if err != nil && ferr == nil {
			ferr = err
		}
		return r.canonical()
	})
	if ferr != nil {
		return nil, false, ferr
	}
	return out, changed, err
}

// rewriteRefs returns v with every reference in it replaced by fn's.
func rewriteRefs(v []byte, fn func(*blobRef) json.RawMessage) ([]byte, error) {
	r, isRef, err := refIn(v)
	if err != nil {
		return nil, err
	}
	if isRef {
		return fn(r), nil
	}
	if len(v) == 0 || (v[0] != '{' && v[0] != '[') || !holdsStoredRef(v) {
		return v, nil
	}
	return mapChildren(v, func(val []byte) ([]byte, error) { return rewriteRefs(val, fn) })
}

// Referenced returns the walk of every payload of rw that Sweep needs:
// the hashes of the blobs they refer to, those inside the payloads
// included (read with the codec chain and offload of s, the wrapped
// store, or none).
func Referenced(rw store.PayloadRewriter, s store.Store) func(ctx context.Context) (map[string]bool, error) {
	b := baseOf(s)
	if b == nil {
		b = &Store{}
	}
	return func(ctx context.Context) (map[string]bool, error) {
		refs := map[string]bool{}
		note := func(v json.RawMessage) (json.RawMessage, bool, error) {
			return v, false, b.noteRefs(ctx, v, refs)
		}
		for _, table := range store.PayloadTables {
			after := ""
			for {
				res, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: table, After: after, Limit: 5000, Rewrite: note})
				if err != nil {
					return nil, fmt.Errorf("walk %s: %w", table, err)
				}
				if after = res.Next; after == "" {
					break
				}
			}
		}
		return refs, nil
	}
}

// noteRefs adds to refs the blobs stored payload v refers to.
func (s *Store) noteRefs(ctx context.Context, v json.RawMessage, refs map[string]bool) error {
	stored := v
	if IsBlobRef(v) {
		r, err := parseRef(v)
		if err != nil {
			return err
		}
		refs[r.SHA256] = true
		if !r.Nested {
			return nil
		}
		if stored, err = s.off.get(ctx, v); err != nil {
			return err
		}
	}
	if codec.IsEncoded(stored) {
		if s.chain == nil {
			return errors.New("a payload is encoded, and the references in it cannot be read without the codec chain")
		}
		var err error
		if stored, err = s.chain.DecodeJSON(stored); err != nil {
			return err
		}
	}
	return eachRef(stored, func(r *blobRef) error {
		refs[r.SHA256] = true
		return nil
	})
}
