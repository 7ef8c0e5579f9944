package codec_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hephaestus-go/hephaestus/codec"
)

// BenchmarkCodec measures EncodeJSON and DecodeJSON of JSON records
// (synthetic and repetitive: they compress 15 to 30 times from 64 KiB; the
// 1 KiB payload is just under the compression threshold) and of random
// data (which does not compress), through zstd then AES-GCM, and through
// each alone. b.SetBytes is the plain size: MB/s is of plain JSON;
// stored/plain is the size of what the store would hold. A zstd-only
// chain stores incompressible payloads plain, so their decode measures
// the pass-through.
func BenchmarkCodec(b *testing.B) {
	ring := newRing(b, "k1", "k1")
	chains := []struct {
		name string
		c    *codec.Chain
	}{
		{"zstd+aes", standard(b, ring)},
		{"aes", newChain(b, &codec.ChainConfig{Codecs: []codec.Codec{newAES(b, ring)}})},
		{"zstd", newChain(b, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(b, nil)}})},
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		payloads := []struct {
			name string
			v    json.RawMessage
		}{
			{"records", recordsOfSize(size)},
			{"random", randomString(r, size)},
		}
		for _, p := range payloads {
			for _, ch := range chains {
				enc, err := ch.c.EncodeJSON(p.v)
				if err != nil {
					b.Fatal(err)
				}
				name := fmt.Sprintf("%s/%s/%dKiB", ch.name, p.name, size>>10)
				b.Run("encode/"+name, func(b *testing.B) {
					b.SetBytes(int64(len(p.v)))
					for b.Loop() {
						if _, err := ch.c.EncodeJSON(p.v); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(len(enc))/float64(len(p.v)), "stored/plain")
				})
				b.Run("decode/"+name, func(b *testing.B) {
					b.SetBytes(int64(len(p.v)))
					for b.Loop() {
						if _, err := ch.c.DecodeJSON(enc); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
