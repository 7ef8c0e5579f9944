package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/codec"
)

func TestRotation(t *testing.T) {
	t.Parallel()
	small, large := json.RawMessage(`{"order":42}`), records(100)

	// Written with k1.
	c1 := standard(t, newRing(t, "k1", "k1"))
	var old []json.RawMessage
	for _, v := range []json.RawMessage{small, large} {
		enc, err := c1.EncodeJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, enc)
	}

	// k2 becomes the writer; k1 still reads.
	c2 := standard(t, newRing(t, "k2", "k1", "k2"))
	if c2.WriteKey() != "k2" {
		t.Fatalf("WriteKey = %q", c2.WriteKey())
	}
	newer, err := c2.EncodeJSON(large)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := codec.Describe(newer); info.Key != "k2" {
		t.Fatalf("written with %q, want k2", info.Key)
	}
	for i, v := range []json.RawMessage{small, large} {
		if dec, err := c2.DecodeJSON(old[i]); err != nil || !bytes.Equal(dec, v) {
			t.Fatalf("k1 payload read with k2 writing: %v", err)
		}
	}
	if dec, err := c2.DecodeJSON(newer); err != nil || !bytes.Equal(dec, large) {
		t.Fatalf("k2 payload: %v", err)
	}

	// Re-encryption moves k1 payloads to k2, and leaves k2 ones alone.
	var moved []json.RawMessage
	for i, v := range []json.RawMessage{small, large} {
		out, changed, err := c2.Reencode(old[i])
		if err != nil || !changed {
			t.Fatalf("Reencode of a k1 payload = %v, %v", changed, err)
		}
		info, _ := codec.Describe(out)
		if info.Key != "k2" || info.Size != len(v) {
			t.Fatalf("re-encoded to %+v", info)
		}
		moved = append(moved, out)
	}
	if out, changed, err := c2.Reencode(newer); err != nil || changed || !bytes.Equal(out, newer) {
		t.Fatalf("Reencode of a k2 payload = %v, %v: want it unchanged", changed, err)
	}

	// k1 removed: k1 payloads fail, naming the key; moved ones read.
	c3 := standard(t, newRing(t, "k2", "k2"))
	for _, enc := range old {
		_, err := c3.DecodeJSON(enc)
		if !errors.Is(err, codec.ErrKeyNotFound) || !strings.Contains(err.Error(), `key "k1"`) || !strings.Contains(err.Error(), "holds k2") {
			t.Fatalf("k1 payload after k1 was removed: %v, want ErrKeyNotFound naming k1", err)
		}
		if _, _, err := c3.Reencode(enc); !errors.Is(err, codec.ErrKeyNotFound) {
			t.Fatalf("Reencode without k1: %v, want ErrKeyNotFound", err)
		}
	}
	for i, v := range []json.RawMessage{small, large} {
		if dec, err := c3.DecodeJSON(moved[i]); err != nil || !bytes.Equal(dec, v) {
			t.Fatalf("re-encrypted payload with k2 only: %v", err)
		}
	}
}

func TestReencodePlainAndCompressed(t *testing.T) {
	t.Parallel()
	v := records(50)
	plain := json.RawMessage(`{"a":1}`)
	zOnly := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}})
	compressed, err := zOnly.EncodeJSON(v)
	if err != nil || !codec.IsEncoded(compressed) {
		t.Fatalf("EncodeJSON = %.40s, %v", compressed, err)
	}
	// Without a key, plain and compressed payloads stay as they are.
	for _, in := range []json.RawMessage{plain, compressed} {
		if out, changed, err := zOnly.Reencode(in); err != nil || changed || !bytes.Equal(out, in) {
			t.Fatalf("Reencode(%.40s) without a key = %v, %v", in, changed, err)
		}
	}
	// With a key, they are encrypted.
	c := standard(t, newRing(t, "k1", "k1"))
	for _, in := range []json.RawMessage{plain, compressed} {
		out, changed, err := c.Reencode(in)
		if err != nil || !changed {
			t.Fatalf("Reencode(%.40s) = %v, %v", in, changed, err)
		}
		if info, _ := codec.Describe(out); info.Key != "k1" {
			t.Fatalf("Reencode(%.40s) = %+v", in, info)
		}
	}
	// Turning encryption off: an encrypted payload is decrypted.
	enc, _ := c.EncodeJSON(v)
	dec := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}, Decoders: []codec.Codec{newAES(t, newRing(t, "k1", "k1"))}})
	out, changed, err := dec.Reencode(enc)
	if info, _ := codec.Describe(out); err != nil || !changed || info.Key != "" || len(info.Codecs) != 1 {
		t.Fatalf("Reencode to a chain without keys = %+v, %v, %v", info, changed, err)
	}
	if _, _, err := c.Reencode(json.RawMessage(`{"$heph":"enc/1"}`)); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("Reencode of a malformed envelope: %v", err)
	}
}

func TestTamper(t *testing.T) {
	t.Parallel()
	ring := newRing(t, "k1", "k1", "k2")
	noop := xor{"noop", 0}
	c := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil), newAES(t, ring)}, Decoders: []codec.Codec{noop}})
	v := records(30)
	enc, err := c.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	orig := parseRaw(t, enc)
	if strings.Join(orig.Codecs, ",") != "zstd,aes-gcm" || orig.Key != "k1" {
		t.Fatalf("envelope %+v", orig)
	}
	if dec, err := c.DecodeJSON(orig.marshal(t)); err != nil || !bytes.Equal(dec, v) {
		t.Fatalf("the untampered envelope does not decode: %v", err)
	}
	check := func(what string, e rawEnvelope, want error) {
		t.Helper()
		_, err := c.DecodeJSON(e.marshal(t))
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	// Every bit of every byte of data.
	for i := range orig.Data {
		for bit := range 8 {
			e := orig
			e.Data = bytes.Clone(orig.Data)
			e.Data[i] ^= 1 << bit
			check("data", e, codec.ErrDecrypt)
		}
	}
	e := orig
	e.Data = orig.Data[:len(orig.Data)-1]
	check("truncated data", e, codec.ErrDecrypt)
	e.Data = append(bytes.Clone(orig.Data), 0)
	check("extended data", e, codec.ErrDecrypt)

	e = orig
	e.Key = "k2" // a key of the ring, not the one used
	check("key id k2", e, codec.ErrDecrypt)
	e.Key = "k3"
	check("key id k3", e, codec.ErrKeyNotFound)
	e.Key = ""
	check("no key id", e, codec.ErrKeyNotFound)

	for _, codecs := range [][]string{{"aes-gcm"}, {"noop", "zstd", "aes-gcm"}, {"zstd", "noop", "aes-gcm"}, {"zstd", "zstd", "aes-gcm"}} {
		e = orig
		e.Codecs = codecs
		check("codecs "+strings.Join(codecs, ","), e, codec.ErrDecrypt)
	}
	e = orig
	e.Codecs = []string{"aes-gcm", "zstd"}
	check("codecs reversed", e, codec.ErrCorrupt) // zstd reads the ciphertext first

	for _, size := range []int{orig.Size + 1, orig.Size - 1, 0} {
		e = orig
		e.Size = size
		check("size", e, codec.ErrDecrypt)
	}

	// Dropping encryption altogether is not an alteration the codec can
	// see: such an envelope is read as a compressed payload (see
	// docs/payloads.md, Limits).
	if msg := func() string {
		e = orig
		e.Codecs = []string{"zstd"}
		_, err := c.DecodeJSON(e.marshal(t))
		return err.Error()
	}(); !strings.Contains(msg, "zstd") {
		t.Errorf("ciphertext read as zstd: %s", msg)
	}
}
