package codec_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/codec"
)

// secret returns a key of KeySize bytes b.
func secret(b byte) []byte { return bytes.Repeat([]byte{b}, codec.KeySize) }

// b64 returns the base64 of the key secret(b).
func b64(b byte) string { return base64.StdEncoding.EncodeToString(secret(b)) }

// newRing returns a keyring of the keys ids (key i is secret(ids[i][1]),
// so "k1" and "k2" differ), writing with write.
func newRing(t testing.TB, write string, ids ...string) *codec.Keyring {
	t.Helper()
	var keys []codec.Key
	for _, id := range ids {
		keys = append(keys, codec.Key{ID: id, Secret: secret(id[len(id)-1])})
	}
	r, err := codec.NewKeyring(&codec.KeyringConfig{Keys: keys, WriteKey: write})
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return r
}

func newZstd(t testing.TB, cfg *codec.ZstdConfig) *codec.Zstd {
	t.Helper()
	z, err := codec.NewZstd(cfg)
	if err != nil {
		t.Fatalf("NewZstd: %v", err)
	}
	return z
}

func newAES(t testing.TB, r *codec.Keyring) *codec.AESGCM {
	t.Helper()
	a, err := codec.NewAESGCM(r)
	if err != nil {
		t.Fatalf("NewAESGCM: %v", err)
	}
	return a
}

func newChain(t testing.TB, cfg *codec.ChainConfig) *codec.Chain {
	t.Helper()
	c, err := codec.NewChain(cfg)
	if err != nil {
		t.Fatalf("NewChain: %v", err)
	}
	return c
}

// standard returns the chain zstd then aes-gcm over ring.
func standard(t testing.TB, ring *codec.Keyring) *codec.Chain {
	t.Helper()
	return newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil), newAES(t, ring)}})
}

// rawEnvelope is an envelope as tests read and forge it.
type rawEnvelope struct {
	Format string   `json:"$heph"`
	Codecs []string `json:"codecs"`
	Key    string   `json:"key,omitempty"`
	Size   int      `json:"size"`
	Data   []byte   `json:"data"`
}

func parseRaw(t testing.TB, v json.RawMessage) rawEnvelope {
	t.Helper()
	var e rawEnvelope
	if err := json.Unmarshal(v, &e); err != nil {
		t.Fatalf("not an envelope: %v: %.200s", err, v)
	}
	return e
}

func (e rawEnvelope) marshal(t testing.TB) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// xor is a custom codec: it XORs every byte with a constant.
type xor struct {
	name string
	k    byte
}

func (x xor) Name() string { return x.name }

func (x xor) Encode(data []byte, _ codec.Step) (codec.Encoded, error) {
	out := make([]byte, len(data))
	for i, b := range data {
		out[i] = b ^ x.k
	}
	return codec.Encoded{Data: out}, nil
}

func (x xor) Decode(data []byte, _ codec.Step) ([]byte, error) {
	for i := range data {
		data[i] ^= x.k
	}
	return data, nil
}

// genValue returns a random JSON-able value of depth at most depth.
func genValue(r *rand.Rand, depth int) any {
	k := r.IntN(9)
	if depth <= 0 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return r.Int64() - r.Int64()
	case 3:
		return r.NormFloat64() * 1e6
	case 4, 5:
		return genString(r)
	case 6, 7:
		m := map[string]any{}
		for n := r.IntN(8); n > 0; n-- {
			m[genString(r)] = genValue(r, depth-1)
		}
		return m
	default:
		a := make([]any, r.IntN(8))
		for i := range a {
			a[i] = genValue(r, depth-1)
		}
		return a
	}
}

var alphabet = []rune("abcdefghij klmnop \"\\/\n\t\u00e9\u4e16\U0001F600<>&$")

func genString(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(24); n > 0; n-- {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

// records returns a JSON array of n similar records: a compressible
// payload, as business data is.
func records(n int) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"customer":"cust_%05d","email":"user%d@example.com","amount":%d.%02d,"currency":"EUR","status":"paid","tags":["a","b"]}`, i, i*7%10000, i, i*37%1000, i%100)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// recordsOfSize returns a records payload of about size bytes.
func recordsOfSize(size int) json.RawMessage {
	one := len(records(1)) - 2
	return records(max(1, size/(one+1)))
}

// randomString returns a JSON string of n random bytes in base64: a
// payload that does not compress.
func randomString(r *rand.Rand, n int) json.RawMessage {
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	b, _ := json.Marshal(raw)
	return b
}
