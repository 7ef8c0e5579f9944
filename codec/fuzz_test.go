package codec_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hephaestus-go/hephaestus/codec"
)

// FuzzDecodeJSON: DecodeJSON, Describe, IsEncoded and Reencode never
// panic; a value that is not an envelope comes back unchanged; what
// decodes is JSON; what Reencode changes decodes to the same value.
func FuzzDecodeJSON(f *testing.F) {
	ring := newRing(f, "k1", "k1", "k2")
	c := newChain(f, &codec.ChainConfig{
		Codecs:   []codec.Codec{newZstd(f, &codec.ZstdConfig{MinSize: 1, MaxDecodedSize: 1 << 20}), newAES(f, ring)},
		Decoders: []codec.Codec{xor{"xor", 0x5a}},
	})
	zOnly := newChain(f, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(f, &codec.ZstdConfig{MinSize: 1})}})
	for _, v := range []json.RawMessage{[]byte(`{"a":[1,2,3]}`), records(20), []byte(`"x"`), []byte(`{"$heph":"enc/2"}`)} {
		for _, ch := range []*codec.Chain{c, zOnly, new(codec.Chain)} {
			enc, err := ch.EncodeJSON(v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add([]byte(enc))
		}
		f.Add([]byte(v))
	}
	for _, s := range []string{
		``, `{`, `{"$heph"`, `{"$heph":"enc/1"`, `{"$heph":"enc/1"}`, `{"$heph":"enc/1","codecs":["xor"],"size":2,"data":"ISc="}`,
		`{"$heph":"enc/1","codecs":["zstd"],"size":5,"data":"KLUv/QQAAAAAAAAAAA=="}`, `{"a":"\\","$heph":"enc/1"}`, `{"$heph":"enc/1","codecs":[],"size":2,"data":"e30="}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		isEnc := codec.IsEncoded(in)
		out, err := c.DecodeJSON(in)
		switch {
		case !isEnc && (err != nil || !bytes.Equal(out, in)):
			t.Fatalf("DecodeJSON of a plain value = %q, %v", out, err)
		case isEnc && err == nil && !json.Valid(out):
			t.Fatalf("DecodeJSON(%q) = %q: not JSON", in, out)
		}
		if _, err := codec.Describe(in); err == nil && !isEnc {
			t.Fatalf("Describe of a plain value succeeded")
		}
		if r, changed, err := c.Reencode(in); err == nil && changed {
			back, err := c.DecodeJSON(r)
			if err != nil {
				t.Fatalf("Reencode(%q) = %q, which does not decode: %v", in, r, err)
			}
			if want, _ := c.DecodeJSON(in); !bytes.Equal(back, want) {
				t.Fatalf("Reencode(%q) decodes to %q, want %q", in, back, want)
			}
		}
		if json.Valid(in) {
			enc, err := zOnly.EncodeJSON(in)
			if err != nil {
				t.Fatalf("EncodeJSON(%q): %v", in, err)
			}
			if dec, err := zOnly.DecodeJSON(enc); err != nil || !bytes.Equal(dec, in) {
				t.Fatalf("round trip of %q = %q, %v", in, dec, err)
			}
		}
	})
}
