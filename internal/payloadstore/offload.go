package payloadstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	// changes under a name), up to cacheBytes in all.
	cache      map[string][]byte
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
		o.cache = map[string][]byte{}
	}
	if _, ok := o.cache[h]; ok {
		return
	}
	for k, v := range o.cache { // evict any, until it fits
		if o.cacheBytes+len(b) <= maxCacheBytes {
			break
		}
		delete(o.cache, k)
		o.cacheBytes -= len(v)
	}
	o.cache[h] = b
	o.cacheBytes += len(b)
}

// forget drops what o knows of blob h (deleted).
func (o *Offload) forget(h string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.written, h)
	if b, ok := o.cache[h]; ok {
		delete(o.cache, h)
		o.cacheBytes -= len(b)
	}
}

func (o *Offload) cached(h string) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.cache[h]
	return b, ok
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
}

// IsBlobRef reports whether v is a reference to an offloaded payload.
func IsBlobRef(v []byte) bool {
	if bytes.HasPrefix(v, refPrefix) {
		return true
	}
	f, ok := codec.Marker(v)
	return ok && f == refFormat
}

func parseRef(v []byte) (*blobRef, error) {
	var r blobRef
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("blob reference: %w", err)
	}
	if r.Format != refFormat || len(r.SHA256) != 64 || r.Size < 0 {
		return nil, fmt.Errorf("blob reference %.200s: malformed", v)
	}
	if _, err := hex.DecodeString(r.SHA256); err != nil {
		return nil, fmt.Errorf("blob reference %.200s: malformed hash", v)
	}
	return &r, nil
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
func (o *Offload) put(ctx context.Context, v json.RawMessage) (json.RawMessage, error) {
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
	return json.Marshal(blobRef{Format: refFormat, SHA256: h, Size: len(v), Codec: codecs})
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
// re-encoded to more than Offload.Above is offloaded.
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
		out, changed, err := b.chain.Reencode(stored)
		if err != nil || !changed {
			return v, false, err
		}
		if b.off != nil && len(out) > b.off.Above {
			if out, err = b.off.put(ctx, out); err != nil {
				return nil, false, err
			}
		}
		return out, true, nil
	}
}

// Referenced returns the walk of every payload of rw that Sweep needs:
// the hashes of the blobs they refer to.
func Referenced(rw store.PayloadRewriter) func(ctx context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		refs := map[string]bool{}
		note := func(v json.RawMessage) (json.RawMessage, bool, error) {
			for _, h := range BlobRefs(v) {
				refs[h] = true
			}
			return v, false, nil
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
