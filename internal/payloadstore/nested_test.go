package payloadstore_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/store"
)

// nestedDoc is a payload of three values longer than 64 bytes among
// short ones.
func nestedDoc() string {
	return `{"a":"` + strings.Repeat("x", 200) + `","b":["` + strings.Repeat("y", 200) + `",1,{"deep":"` +
		strings.Repeat("z", 300) + `"}],"c":"small"}`
}

// The values longer than the threshold inside a payload are offloaded on
// their own, the payload holds their references, and a read resolves
// them; with and without a codec.
func TestNestedOffload(t *testing.T) {
	t.Parallel()
	for _, withCodec := range []bool{false, true} {
		ctx := t.Context()
		raw := openSQLite(t)
		bucket := memBucket(t)
		var chain *codec.Chain
		if withCodec {
			chain = keyChain(t, nil, "k1", "k1")
		}
		w := payloadstore.WrapOffload(raw, chain, &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 64})
		doc := nestedDoc()
		if _, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("r", doc)}}); err != nil {
			t.Fatal(err)
		}
		got, err := w.GetRun(ctx, "r")
		if err != nil || string(got.Input) != doc {
			t.Fatalf("codec %v: input read back %.100s, %v", withCodec, got.Input, err)
		}
		// Three leaves (the input's and the task payload's are the same
		// content without a codec) and the payload offloaded whole.
		if n := len(blobKeys(t, bucket)); (withCodec && n != 8) || (!withCodec && n != 4) {
			t.Errorf("codec %v: %d blobs", withCodec, n)
		}
		var all strings.Builder
		for _, k := range blobKeys(t, bucket) {
			b, err := bucket.ReadAll(ctx, payloadstore.BlobPrefix+k)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		if strings.Contains(all.String(), "yyyy") != !withCodec {
			t.Errorf("codec %v: the blobs hold the plaintext: %v", withCodec, !withCodec)
		}
		ts, err := w.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q"}, Owner: "o", Limit: 1, LeaseFor: time.Minute, Now: t0})
		if err != nil || len(ts) != 1 || string(ts[0].Payload) != doc {
			t.Fatalf("codec %v: claimed %d tasks, %v", withCodec, len(ts), err)
		}
	}
}

// A run's snapshot is not split (its large values stay in place), and
// the references the runtime put in it (a step's output offloaded before
// its change, Offloader) are read in place, each with its token; written
// back (in the snapshot, a task's item, the output), the references are
// stored without the token, and read elsewhere resolved.
func TestSnapshotKeepsReferences(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	w := payloadstore.WrapOffload(raw, keyChain(t, nil, "k1", "k1"), &payloadstore.Offload{Bucket: gocloudblob.New(memBucket(t)), Above: 64})
	whole := create("whole", `1`)
	whole.Create.State = json.RawMessage(`{"out":` + nestedDoc() + `}`)
	out, err := payloadstore.Offloader(w)(ctx, json.RawMessage(nestedDoc()))
	if err != nil || !strings.Contains(string(out), `"tok":`) {
		t.Fatalf("offloaded output %s, %v: want references with tokens", out, err)
	}
	if got, err := payloadstore.Resolver(w)(ctx, out); err != nil || string(got) != nestedDoc() {
		t.Fatalf("the offloaded output resolved: %.100s, %v", got, err)
	}
	c := create("r", `1`)
	c.Create.State = json.RawMessage(`{"out":` + string(out) + `}`)
	if _, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{whole}}); err != nil {
		t.Fatal(err)
	}
	if got, err := w.GetRun(ctx, "whole"); err != nil || string(got.State) != string(whole.Create.State) {
		t.Fatalf("a snapshot without references read back %.100s, %v: want it whole", got.State, err)
	}
	if _, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{c}}); err != nil {
		t.Fatal(err)
	}
	run, err := w.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Out struct {
			A json.RawMessage `json:"a"`
			C string          `json:"c"`
		} `json:"out"`
	}
	if err := json.Unmarshal(run.State, &st); err != nil || st.Out.C != "small" || !strings.Contains(string(st.Out.A), `"tok":`) {
		t.Fatalf("state %s, %v: want the references kept, with tokens", run.State, err)
	}
	res, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{{RunID: "r", Decide: func(r *store.Run) (*store.Update, error) {
		return &store.Update{Status: "completed", State: r.State, Output: json.RawMessage(`{"first":` + string(st.Out.A) + `}`),
			Tasks: []store.NewTask{{Queue: "q2", Kind: store.TaskStep, Step: "m", Index: 0, Item: st.Out.A, ReadyAt: t0}}}, nil
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatalf("write the references back: %v, %v", err, res.Changes[0].Err)
	}
	want := `"` + strings.Repeat("x", 200) + `"`
	if got, err := w.GetRun(ctx, "r"); err != nil || string(got.Output) != `{"first":`+want+`}` {
		t.Fatalf("output %.100s, %v: want the reference resolved", got.Output, err)
	}
	ts, err := w.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q2"}, Owner: "o", Limit: 1, LeaseFor: time.Minute, Now: t0})
	if err != nil || len(ts) != 1 || string(ts[0].Item) != want {
		t.Fatalf("claimed item: %d tasks, %v", len(ts), err)
	}
	stored, err := raw.GetRun(ctx, "r")
	if err != nil || strings.Contains(string(stored.Output), "tok") || strings.Contains(string(stored.Output), "xxxx") {
		t.Fatalf("stored output %s, %v: want the reference without its token", stored.Output, err)
	}
}

// A payload holding a reference this process did not issue is refused,
// saying where: without a token, with another's token, with its key
// spelled with escapes; at the top, deep inside, and with no blob store.
func TestForgedReferencesRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	w := payloadstore.WrapOffload(raw, nil, &payloadstore.Offload{Bucket: gocloudblob.New(memBucket(t)), Above: 64})
	ref := `{"$heph":"blob/1","sha256":"` + strings.Repeat("ab", 32) + `","size":10,"codec":"json"`
	cases := map[string]struct{ input, where string }{
		"top":           {ref + `}`, "at $"},
		"nested":        {`{"x":[1,` + ref + `}]}`, "at $.x[1]"},
		"another token": {`{"x":` + ref + `,"tok":"AAAAAAAAAAAAAAAAAAAAAAAA"}}`, "at $.x"},
		"escaped key":   {`{"x":{"\u0024heph":"blob\/1","sha256":"` + strings.Repeat("ab", 32) + `","size":10,"codec":"json"}}`, "at $.x"},
	}
	for name, c := range cases {
		for _, s := range []store.Store{w, payloadstore.Wrap(raw, keyChain(t, nil, "k", "k"))} {
			res, err := s.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("forged-"+name, c.input)}})
			if err != nil {
				t.Fatal(err)
			}
			if e := res.Changes[0].Err; e == nil || !strings.Contains(e.Error(), "did not issue") || !strings.Contains(e.Error(), c.where) {
				t.Errorf("%s: %v: want it refused %s", name, e, c.where)
			}
		}
	}
	// A value that only looks like one is data, and so is an object
	// longer than any reference (read back as written, not resolved).
	padded := ref + `,"pad":"` + strings.Repeat("p", 1100) + `"}`
	for id, v := range map[string]string{"data": `{"$heph":"other","tok":"x"}`, "padded": padded, "padded-inside": `{"x":` + padded + `}`} {
		res, err := w.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create(id, v)}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatalf("%s: %v, %v: want it taken as data", id, err, res.Changes[0].Err)
		}
		if got, err := w.GetRun(ctx, id); err != nil || string(got.Input) != v {
			t.Fatalf("%s read back: %.100s, %v", id, got.Input, err)
		}
	}
}

// The sweep finds the references inside payloads (inline, encoded, and
// in a blob offloaded whole) and keeps their blobs; once the run is
// deleted, it deletes them all. Re-encryption re-encodes the values
// offloaded on their own.
func TestNestedSweepAndReencode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	bucket := memBucket(t)
	off := &payloadstore.Offload{Bucket: gocloudblob.New(bucket), Above: 64}
	w1 := payloadstore.WrapOffload(raw, keyChain(t, nil, "k1", "k1"), off)
	doc := nestedDoc()
	small := `{"a":"` + strings.Repeat("x", 200) + `"}` // inline, one leaf
	if _, err := w1.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("r", doc), create("s", small)}}); err != nil {
		t.Fatal(err)
	}
	before := len(blobKeys(t, bucket))
	time.Sleep(2 * time.Millisecond)
	res, err := off.Sweep(ctx, time.Nanosecond, payloadstore.Referenced(raw, w1))
	if err != nil || res.Deleted != 0 {
		t.Fatalf("sweep: %+v, %v: want every blob referenced", res, err)
	}
	w2 := payloadstore.WrapOffload(raw, keyChain(t, nil, "k2", "k1", "k2"), off)
	for _, table := range store.PayloadTables {
		if _, err := raw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: table, Rewrite: payloadstore.Reencoder(w2)}); err != nil {
			t.Fatal(err)
		}
	}
	onlyK2 := payloadstore.WrapOffload(raw, keyChain(t, nil, "k2", "k2"), off)
	for id, want := range map[string]string{"r": doc, "s": small} {
		if got, err := onlyK2.GetRun(ctx, id); err != nil || string(got.Input) != want {
			t.Fatalf("run %s read with k2 alone after the re-encryption: %.80s, %v", id, got.Input, err)
		}
	}
	time.Sleep(2 * time.Millisecond)
	res, err = off.Sweep(ctx, time.Nanosecond, payloadstore.Referenced(raw, onlyK2))
	if err != nil || res.Deleted != before {
		t.Fatalf("sweep after the re-encryption: %+v, %v: want the %d k1 blobs deleted", res, err, before)
	}
	for _, id := range []string{"r", "s"} {
		if _, err := w2.DeleteRun(ctx, &store.DeleteRunParams{ID: id, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Millisecond)
	if res, err = off.Sweep(ctx, time.Nanosecond, payloadstore.Referenced(raw, onlyK2)); err != nil || len(blobKeys(t, bucket)) != 0 {
		t.Fatalf("sweep after the runs' deletion: %+v, %v, %d blobs left", res, err, len(blobKeys(t, bucket)))
	}
}
