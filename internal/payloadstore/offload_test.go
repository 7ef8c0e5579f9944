package payloadstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

func memBucket(t *testing.T) *blob.Bucket {
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// blobKeys lists the blobs of b.
func blobKeys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(&blob.ListOptions{Prefix: payloadstore.BlobPrefix})
	for {
		obj, err := it.Next(t.Context())
		if err != nil {
			return out
		}
		out = append(out, strings.TrimPrefix(obj.Key, payloadstore.BlobPrefix))
	}
}

// Every payload above 8 bytes offloaded, without a codec: the
// conformance suite reads every one back through the blob store.
func TestConformanceOffloadSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return payloadstore.WrapOffload(openSQLite(t), nil, &payloadstore.Offload{Bucket: gocloudblob.New(memBucket(t)), Above: 8})
	}, storetest.WithTx(sqliteTx))
}

// A large payload, encrypted then offloaded: the row holds a reference,
// the blob the envelope (no plaintext anywhere), reads give the value
// back; a blob missing or corrupt, or a process without the blob store,
// fails naming the blob; a payload in the form of a reference is refused.
func TestOffload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	bucket := memBucket(t)
	chain := keyChain(t, nil, "k1", "k1")
	w := payloadstore.WrapOffload(raw, chain, &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 1024})
	big := `"` + strings.Repeat("secret-marker ", 1000) + `"`
	res, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("big", big), create("small", `"tiny"`),
		create("forged", `{"$heph":"blob/1","sha256":"`+strings.Repeat("0", 64)+`","size":1,"codec":"json"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes[0].Err != nil || res.Changes[1].Err != nil || string(res.Changes[0].Run.Input) != big {
		t.Fatalf("results %v, %v; input read back %.40s", res.Changes[0].Err, res.Changes[1].Err, res.Changes[0].Run.Input)
	}
	if err := res.Changes[2].Err; err == nil || !strings.Contains(err.Error(), "reference to an offloaded payload") {
		t.Fatalf("a payload in the form of a reference: %v", err)
	}
	stored, err := raw.GetRun(ctx, "big")
	if err != nil || !payloadstore.IsBlobRef(stored.Input) {
		t.Fatalf("stored input %.100s, %v: want a reference", stored.Input, err)
	}
	small, err := raw.GetRun(ctx, "small")
	if err != nil || payloadstore.IsBlobRef(small.Input) || !codec.IsEncoded(small.Input) {
		t.Fatalf("small input stored as %s, %v: want an envelope inline", small.Input, err)
	}
	// The run's input and its task's payload: the same value, encrypted
	// twice (two nonces), so two blobs.
	if keys := blobKeys(t, bucket); len(keys) != 2 {
		t.Fatalf("blobs %v: want two", keys)
	}
	keys := payloadstore.BlobRefs(stored.Input)
	data, err := bucket.ReadAll(ctx, payloadstore.BlobPrefix+keys[0])
	if err != nil || !codec.IsEncoded(data) || bytes.Contains(data, []byte("secret-marker")) {
		t.Fatalf("blob %.80s, %v: want an envelope without the marker", data, err)
	}
	got, err := w.GetRun(ctx, "big")
	if err != nil || string(got.Input) != big {
		t.Fatalf("GetRun: %.40s, %v", got.Input, err)
	}

	noBlobs := payloadstore.Wrap(raw, chain)
	if _, err := noBlobs.GetRun(ctx, "big"); err == nil || !strings.Contains(err.Error(), "Config.PayloadBlobs") {
		t.Fatalf("without a blob store: %v", err)
	}
	if err := bucket.WriteAll(ctx, payloadstore.BlobPrefix+keys[0], append(data, ' '), nil); err != nil {
		t.Fatal(err)
	}
	// Another process (this one keeps what it wrote and read in memory).
	other := func() store.Store {
		return payloadstore.WrapOffload(raw, chain, &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 1024})
	}
	if _, err := other().GetRun(ctx, "big"); err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), keys[0]) {
		t.Fatalf("a corrupt blob: %v", err)
	}
	if err := bucket.Delete(ctx, payloadstore.BlobPrefix+keys[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := other().GetRun(ctx, "big"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing blob: %v", err)
	}
}

// The same payload offloaded twice (a retried commit, or the same bytes
// in two rows) is one blob.
func TestOffloadContentAddressed(t *testing.T) {
	t.Parallel()
	bucket := memBucket(t)
	w := payloadstore.WrapOffload(openSQLite(t), nil, &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 16})
	big := `"` + strings.Repeat("x", 100) + `"`
	if _, err := w.Apply(t.Context(), &store.ApplyParams{Now: t0, Changes: []store.Change{create("a", big), create("b", big)}}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(big))
	if keys := blobKeys(t, bucket); len(keys) != 1 || keys[0] != hex.EncodeToString(sum[:]) {
		t.Fatalf("blobs %v: want the one named by the payload's hash", keys)
	}
}

// The sweep deletes the blobs no row refers to (an orphan of a commit
// that did not happen; the blob of a run deleted), only once older than
// the grace, and keeps the referenced ones.
func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	bucket := memBucket(t)
	w := payloadstore.WrapOffload(raw, nil, &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 16})
	big := func(c string) string { return `"` + strings.Repeat(c, 100) + `"` }
	if _, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("kept", big("k"))}}); err != nil {
		t.Fatal(err)
	}
	orphan := []byte(big("o"))
	sum := sha256.Sum256(orphan)
	if err := bucket.WriteAll(ctx, payloadstore.BlobPrefix+hex.EncodeToString(sum[:]), orphan, nil); err != nil {
		t.Fatal(err)
	}
	refs := payloadstore.Referenced(raw, w)
	res, err := payloadstore.Sweep(ctx, gocloudblob.New(bucket), time.Hour, refs)
	if err != nil || res.Blobs != 2 || res.Old != 0 || res.Deleted != 0 {
		t.Fatalf("sweep within the grace: %+v, %v: want nothing deleted", res, err)
	}
	time.Sleep(2 * time.Millisecond) // the blobs' times are the system's
	res, err = payloadstore.Sweep(ctx, gocloudblob.New(bucket), time.Nanosecond, refs)
	if err != nil || res.Blobs != 2 || res.Deleted != 1 || res.Bytes != int64(len(orphan)) {
		t.Fatalf("sweep: %+v, %v: want the orphan deleted", res, err)
	}
	if got, err := w.GetRun(ctx, "kept"); err != nil || string(got.Input) != big("k") {
		t.Fatalf("the referenced payload after the sweep: %v", err)
	}
}

// Re-encryption after a rotation re-encodes the offloaded payloads into
// new blobs; the old ones are left to the sweep.
func TestReencodeOffloaded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	bucket := memBucket(t)
	off := &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 256}
	w1 := payloadstore.WrapOffload(raw, keyChain(t, nil, "k1", "k1"), off)
	big := `"` + strings.Repeat("z", 1000) + `"`
	if _, err := w1.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("r", big)}}); err != nil {
		t.Fatal(err)
	}
	w2 := payloadstore.WrapOffload(raw, keyChain(t, nil, "k2", "k1", "k2"), off)
	for _, table := range store.PayloadTables {
		if _, err := raw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: table, Rewrite: payloadstore.Reencoder(w2)}); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := raw.GetRun(ctx, "r")
	if err != nil || !payloadstore.IsBlobRef(stored.Input) {
		t.Fatalf("stored %.80s, %v: want a reference still", stored.Input, err)
	}
	onlyK2 := payloadstore.WrapOffload(raw, keyChain(t, nil, "k2", "k2"), off)
	got, err := onlyK2.GetRun(ctx, "r")
	if err != nil || string(got.Input) != big {
		t.Fatalf("read with k2 alone after the re-encryption: %v", err)
	}
	var ref struct{ Codec string }
	if err := json.Unmarshal(stored.Input, &ref); err != nil || ref.Codec == "json" {
		t.Fatalf("reference %s: want the codecs named", stored.Input)
	}
	time.Sleep(2 * time.Millisecond)
	res, err := payloadstore.Sweep(context.Background(), gocloudblob.New(bucket), time.Nanosecond, payloadstore.Referenced(raw, w2))
	if err != nil || res.Deleted != 2 || len(blobKeys(t, bucket)) != 2 {
		t.Fatalf("sweep after the re-encryption: %+v, %v: want the two k1 blobs (input, task payload) gone", res, err)
	}
}

// A reference reads as one however the database wrote it back (jsonb:
// members reordered and spaced); a value that merely mentions the marker
// does not.
func TestIsBlobRef(t *testing.T) {
	t.Parallel()
	h := strings.Repeat("ab", 32)
	for v, want := range map[string]bool{
		`{"$heph":"blob/1","sha256":"` + h + `","size":3,"codec":"json"}`:        true,
		`{"size": 3, "codec": "json", "$heph": "blob/1", "sha256": "` + h + `"}`: true,
		`{"$heph":"enc/1","data":"AAAA"}`:                                        false,
		`{"note":{"$heph":"blob/1"}}`:                                            false,
		`"{\"$heph\":\"blob/1\"}"`:                                               false,
		`[1,2]`:                                                                  false,
	} {
		if got := payloadstore.IsBlobRef([]byte(v)); got != want {
			t.Errorf("IsBlobRef(%s) = %v, want %v", v, got, want)
		}
	}
	if refs := payloadstore.BlobRefs([]byte(`{"size": 3, "codec": "json", "$heph": "blob/1", "sha256": "` + h + `"}`)); len(refs) != 1 || refs[0] != h {
		t.Errorf("BlobRefs of a jsonb reference: %v", refs)
	}
}

// A blob this process wrote a moment ago is not written again for the
// same content; once its own sweep deleted it, it is.
func TestOffloadWrittenAgainAfterSweep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	bucket := memBucket(t)
	off := &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 16}
	w := payloadstore.WrapOffload(raw, nil, off)
	big := `"` + strings.Repeat("s", 100) + `"`
	if _, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("a", big)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.DeleteRun(ctx, &store.DeleteRunParams{ID: "a", Force: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	res, err := off.Sweep(ctx, time.Nanosecond, payloadstore.Referenced(raw, w))
	if err != nil || res.Deleted != 1 || len(blobKeys(t, bucket)) != 0 {
		t.Fatalf("sweep of the deleted run's blob: %+v, %v", res, err)
	}
	if _, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("b", big)}}); err != nil {
		t.Fatal(err)
	}
	fresh := payloadstore.WrapOffload(raw, nil, &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 16})
	if got, err := fresh.GetRun(ctx, "b"); err != nil || string(got.Input) != big {
		t.Fatalf("the same content after the sweep: %v", err)
	}
}
