package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	mrand "math/rand"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/quick"

	"github.com/hephaestus-go/hephaestus/codec"
)

// chains returns the chains the round trips run through, by name.
func chains(t *testing.T) map[string]*codec.Chain {
	ring := newRing(t, "k1", "k1")
	all := func(codecs ...codec.Codec) *codec.Chain {
		return newChain(t, &codec.ChainConfig{Codecs: codecs})
	}
	return map[string]*codec.Chain{
		"empty":            all(),
		"zstd":             all(newZstd(t, nil)),
		"zstd-min-1":       all(newZstd(t, &codec.ZstdConfig{MinSize: 1, Level: 19})),
		"aes-gcm":          all(newAES(t, ring)),
		"zstd,aes-gcm":     all(newZstd(t, nil), newAES(t, ring)),
		"aes-gcm,zstd":     all(newAES(t, ring), newZstd(t, &codec.ZstdConfig{MinSize: 1})),
		"xor,zstd,aes-gcm": all(xor{"xor", 0x5a}, newZstd(t, &codec.ZstdConfig{MinSize: 1}), newAES(t, ring)),
	}
}

func fixedValues() []json.RawMessage {
	vs := []string{
		`null`, `true`, `false`, `0`, `-1.5e300`, `""`, `"a"`, `"\u00e9\"\\"`, `[]`, `{}`,
		`{"a":1,"b":[1,2,{"c":null}]}`, " \n{ \"spaced\" : [ 1 , 2 ] }\n ",
		`[null,"x",3.25,{"$heph":1}]`, `{"nested":{"$heph":"enc/1"}}`,
		`{"$heph":"enc/1","codecs":[],"size":2,"data":"e30="}`, // plain values that read as envelopes
		`{"$heph":"enc/9"}`,
		`"` + strings.Repeat("x", 5000) + `"`,
	}
	out := make([]json.RawMessage, 0, len(vs)+4)
	for _, v := range vs {
		out = append(out, json.RawMessage(v))
	}
	r := rand.New(rand.NewPCG(1, 2))
	return append(out, records(1), records(40), records(5000), randomString(r, 3000))
}

func roundTrip(t *testing.T, c *codec.Chain, v json.RawMessage) json.RawMessage {
	t.Helper()
	enc, err := c.EncodeJSON(v)
	if err != nil {
		t.Fatalf("EncodeJSON(%.80s): %v", v, err)
	}
	if !json.Valid(enc) {
		t.Fatalf("EncodeJSON(%.80s) = %.80s: not JSON", v, enc)
	}
	dec, err := c.DecodeJSON(enc)
	if err != nil {
		t.Fatalf("DecodeJSON(EncodeJSON(%.80s)): %v", v, err)
	}
	if !bytes.Equal(dec, v) {
		t.Fatalf("round trip of %.80s gave %.80s", v, dec)
	}
	return enc
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 11))
	var generated []json.RawMessage
	for range 300 {
		v := genValue(r, 4)
		b, err := json.Marshal(v)
		if r.IntN(3) == 0 {
			b, err = json.MarshalIndent(v, "", "  ")
		}
		if err != nil {
			t.Fatal(err)
		}
		generated = append(generated, b)
	}
	for name, c := range chains(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, v := range append(fixedValues(), generated...) {
				enc := roundTrip(t, c, v)
				if strings.Contains(name, "aes-gcm") && !codec.IsEncoded(enc) {
					t.Fatalf("EncodeJSON(%.80s) with encryption = %.80s: not an envelope", v, enc)
				}
				if info, err := codec.Describe(enc); err == nil && info.Size != len(v) {
					t.Fatalf("Describe(%.80s).Size = %d, want %d", enc, info.Size, len(v))
				}
			}
			// Random bytes, as JSON strings.
			err := quick.Check(func(b []byte) bool {
				v, _ := json.Marshal(string(b))
				enc, err := c.EncodeJSON(v)
				if err != nil {
					return false
				}
				dec, err := c.DecodeJSON(enc)
				return err == nil && bytes.Equal(dec, v)
			}, &quick.Config{MaxCount: 200, Rand: mrand.New(mrand.NewSource(5))})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEmptyValue(t *testing.T) {
	t.Parallel()
	c := standard(t, newRing(t, "k1", "k1"))
	for _, v := range []json.RawMessage{nil, {}} {
		if enc, err := c.EncodeJSON(v); err != nil || len(enc) != 0 {
			t.Fatalf("EncodeJSON(%q) = %q, %v: want it as it is", v, enc, err)
		}
	}
	for _, v := range []string{"{", "nul", `{"a":}`, "1 2", "\xff"} {
		if _, err := c.EncodeJSON(json.RawMessage(v)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Fatalf("EncodeJSON(%q): %v, want a refusal", v, err)
		}
	}
}

func TestMarkerAbsent(t *testing.T) {
	t.Parallel()
	const marker = "MARKER-7f3a9c-card-4242424242424242"
	ring := newRing(t, "k1", "k1")
	small := json.RawMessage(`{"card":"` + marker + `"}`)
	large := json.RawMessage(`{"card":"` + marker + `","rows":` + string(records(200)) + `}`)
	for name, c := range map[string]*codec.Chain{
		"aes-gcm":      newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newAES(t, ring)}}),
		"zstd,aes-gcm": standard(t, ring),
	} {
		for _, v := range []json.RawMessage{small, large} {
			enc := roundTrip(t, c, v)
			raw := parseRaw(t, enc)
			for _, form := range [][]byte{enc, raw.Data} {
				if bytes.Contains(form, []byte(marker)) || bytes.Contains(form, []byte("4242424242")) {
					t.Fatalf("%s: the encoded form of a %d-byte payload holds the marker", name, len(v))
				}
			}
		}
	}
}

func TestCompressionThreshold(t *testing.T) {
	t.Parallel()
	ring := newRing(t, "k1", "k1")
	r := rand.New(rand.NewPCG(3, 4))
	below := json.RawMessage(`"` + strings.Repeat("a", 1000) + `"`) // 1002 bytes, compressible
	above := json.RawMessage(`"` + strings.Repeat("a", 1022) + `"`) // 1024 bytes, compressible
	incompressible := randomString(r, 8000)
	tests := []struct {
		name  string
		chain *codec.Chain
		v     json.RawMessage
		want  []string // nil: stored plain
	}{
		{"zstd below", newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}}), below, nil},
		{"zstd at threshold", newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}}), above, []string{"zstd"}},
		{"zstd incompressible", newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}}), incompressible, nil},
		{"zstd min 100", newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, &codec.ZstdConfig{MinSize: 100})}}), below, []string{"zstd"}},
		{"zstd min 4096", newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, &codec.ZstdConfig{MinSize: 4096})}}), above, nil},
		{"both below", standard(t, ring), below, []string{"aes-gcm"}},
		{"both above", standard(t, ring), above, []string{"zstd", "aes-gcm"}},
		{"both incompressible", standard(t, ring), incompressible, []string{"aes-gcm"}},
	}
	for _, tt := range tests {
		enc := roundTrip(t, tt.chain, tt.v)
		if tt.want == nil {
			if !bytes.Equal(enc, tt.v) {
				t.Errorf("%s: stored %.60s, want the plain value", tt.name, enc)
			}
			continue
		}
		info, err := codec.Describe(enc)
		if err != nil {
			t.Fatalf("%s: Describe: %v", tt.name, err)
		}
		if !reflect.DeepEqual(info.Codecs, tt.want) {
			t.Errorf("%s: codecs %v, want %v", tt.name, info.Codecs, tt.want)
		}
		if len(tt.want) == 1 && tt.want[0] == "zstd" && len(enc) >= len(tt.v) {
			t.Errorf("%s: compressed envelope of %d bytes for a %d-byte value", tt.name, len(enc), len(tt.v))
		}
	}
	// zstd saves bytes, but the base64 of the envelope costs more: the
	// value stays plain (compression is optional), and not when encrypted.
	z := newZstd(t, &codec.ZstdConfig{MinSize: 1})
	v := json.RawMessage(`"` + strings.Repeat("q8Xv2LmP0zR7wKc4nB1tYh6", 3) + `"`)
	if e, err := z.Encode(v, codec.Step{}); err != nil || e.Skipped {
		t.Fatalf("zstd.Encode of %s = %+v, %v: want it compressed", v, e, err)
	}
	if enc := roundTrip(t, newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{z}}), v); !bytes.Equal(enc, v) {
		t.Fatalf("compression that grows the stored value was kept: %s", enc)
	}
}

func TestEnvelopeLookalikes(t *testing.T) {
	t.Parallel()
	// A plain value that reads as an envelope is wrapped, even by a chain
	// that would leave it as it is, so that it decodes to itself.
	z := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}})
	for _, c := range []*codec.Chain{newChain(t, nil), z, new(codec.Chain)} {
		for _, v := range []string{`{"$heph":"enc/1","codecs":[],"size":2,"data":"e30="}`, `{"$heph":"enc/2"}`, ` {"$heph" : "enc/x", "y": 1}`} {
			enc := roundTrip(t, c, json.RawMessage(v))
			if info, err := codec.Describe(enc); err != nil || len(info.Codecs) != 0 {
				t.Fatalf("EncodeJSON(%s) = %s (%+v, %v), want an envelope without codecs", v, enc, info, err)
			}
		}
	}
}

func TestPassThrough(t *testing.T) {
	t.Parallel()
	c := standard(t, newRing(t, "k1", "k1"))
	for _, v := range []string{
		``, `null`, `1`, `"$heph"`, `[{"$heph":"enc/1"}]`, `{"a":{"$heph":"enc/1"}}`, `{"$heph":1}`,
		`{"$heph":null}`, `{"$heph":"plain"}`, `{"$HEPH":"enc/1"}`, `{"\u0024heph":"enc/1"}`,
		`{"a":"\"$heph\":\"enc/1\""}`, `{"a":1,"b":"$heph"}`,
		`not json at all`, `{"$heph"`, `{"$heph":"enc/1`, `{"a" "$heph":"enc/1"}`,
	} {
		out, err := c.DecodeJSON(json.RawMessage(v))
		if err != nil || !bytes.Equal(out, []byte(v)) {
			t.Errorf("DecodeJSON(%s) = %s, %v: want it unchanged", v, out, err)
		}
		if codec.IsEncoded(json.RawMessage(v)) {
			t.Errorf("IsEncoded(%s) = true", v)
		}
		if _, err := codec.Describe(json.RawMessage(v)); !errors.Is(err, codec.ErrNotEncoded) {
			t.Errorf("Describe(%s): %v, want ErrNotEncoded", v, err)
		}
	}
	for _, v := range []string{`{"$heph":"enc/1"}`, ` { "a" : [1,{"b":"}"}], "$heph" : "enc\/1" } `, `{"$heph":"enc/"}`} {
		if !codec.IsEncoded(json.RawMessage(v)) {
			t.Errorf("IsEncoded(%s) = false", v)
		}
	}
}

func TestMalformedEnvelopes(t *testing.T) {
	t.Parallel()
	c := standard(t, newRing(t, "k1", "k1"))
	tests := []struct {
		v    string
		want error
		msg  string
	}{
		{`{"$heph":"enc/1"}`, codec.ErrCorrupt, `no "codecs"`},
		{`{"$heph":"enc/2","codecs":[],"size":0,"data":""}`, codec.ErrCorrupt, `format "enc/2"`},
		{`{"$heph":"enc/1","codecs":[],"size":1,"data":""}`, codec.ErrCorrupt, "size says 1"},
		{`{"$heph":"enc/1","codecs":[],"data":""}`, codec.ErrCorrupt, `no "size"`},
		{`{"$heph":"enc/1","codecs":[],"size":-1,"data":""}`, codec.ErrCorrupt, `negative`},
		{`{"$heph":"enc/1","codecs":[],"size":0}`, codec.ErrCorrupt, `no "data"`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":"!!"}`, codec.ErrCorrupt, "base64"},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":"","extra":1}`, codec.ErrCorrupt, `unknown member "extra"`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":"","KEY":"k1"}`, codec.ErrCorrupt, `unknown member "KEY"`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":"","size":0}`, codec.ErrCorrupt, `member "size" appears twice`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":null}`, codec.ErrCorrupt, `member "data": not a base64 string`},
		{`{"$heph":"enc/1","codecs":[],"size":"0","data":""}`, codec.ErrCorrupt, `member "size"`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":""`, codec.ErrCorrupt, `want ',' or '}'`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":"" x}`, codec.ErrCorrupt, `want ',' or '}'`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data" "",}`, codec.ErrCorrupt, `want ':'`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":"",}`, codec.ErrCorrupt, `want a member name`},
		{`{"$heph":"enc/1","codecs":"zstd","size":0,"data":""}`, codec.ErrCorrupt, "envelope"},
		{`{"$heph":"enc/1","codecs":["Bad Name"],"size":0,"data":""}`, codec.ErrCorrupt, `"Bad Name"`},
		{`{"$heph":"enc/1","codecs":["a","b","c","d","e","f","g","h","i"],"size":0,"data":""}`, codec.ErrCorrupt, "9 codecs"},
		{`{"$heph":"enc/1","codecs":["aes-gcm"],"key":"bad key","size":0,"data":""}`, codec.ErrCorrupt, `"bad key"`},
		{`{"$heph":"enc/1","codecs":[],"key":"k1","size":0,"data":""}`, codec.ErrCorrupt, `key "k1" but no codec`},
		{`{"$heph":"enc/1","codecs":[],"size":0,"data":""} {}`, codec.ErrCorrupt, "after the object"},
		{`{"$heph":"enc/1","codecs":["rot13"],"size":0,"data":""}`, codec.ErrUnknownCodec, `"rot13"`},
		{`{"$heph":"enc/1","codecs":["aes-gcm"],"size":0,"data":""}`, codec.ErrKeyNotFound, "no key id"},
		{`{"$heph":"enc/1","codecs":["aes-gcm"],"key":"k1","size":0,"data":"AAAA"}`, codec.ErrDecrypt, "3 bytes"},
		{`{"$heph":"enc/1","codecs":["zstd"],"size":0,"data":"AAAA"}`, codec.ErrCorrupt, "zstd"},
		{`{"$heph":"enc/1","codecs":[],"size":3,"data":"e319"}`, codec.ErrCorrupt, "not valid JSON"},
		{`{"$heph":"enc/1"`, codec.ErrCorrupt, "envelope"},
	}
	for _, tt := range tests {
		_, err := c.DecodeJSON(json.RawMessage(tt.v))
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("DecodeJSON(%s): %v, want %v saying %q", tt.v, err, tt.want, tt.msg)
		}
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	c := standard(t, newRing(t, "k2", "k1", "k2"))
	v := records(100)
	enc, err := c.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	info, err := codec.Describe(enc)
	if err != nil {
		t.Fatal(err)
	}
	raw := parseRaw(t, enc)
	want := codec.Info{Format: "enc/1", Codecs: []string{"zstd", "aes-gcm"}, Key: "k2", Size: len(v), DataSize: len(raw.Data), StoredSize: len(enc)}
	if !reflect.DeepEqual(info, want) || !info.Encrypted() {
		t.Fatalf("Describe = %+v, want %+v", info, want)
	}
	if info.DataSize >= info.Size {
		t.Fatalf("compressed and encrypted data of %d bytes for %d", info.DataSize, info.Size)
	}
	// Postgres jsonb reorders and spaces the members: still an envelope.
	var m map[string]any
	if err := json.Unmarshal(enc, &m); err != nil {
		t.Fatal(err)
	}
	indented, _ := json.MarshalIndent(m, " ", "   ")
	if dec, err := c.DecodeJSON(indented); err != nil || !bytes.Equal(dec, v) {
		t.Fatalf("DecodeJSON of the reformatted envelope: %v", err)
	}
	// A writer that escapes '/' (and any other character) in strings.
	escaped := bytes.ReplaceAll(enc, []byte("/"), []byte(`\/`))
	escaped = bytes.Replace(escaped, []byte(`"enc\/1"`), []byte(`"\u0065nc/1"`), 1)
	if dec, err := c.DecodeJSON(escaped); err != nil || !bytes.Equal(dec, v) {
		t.Fatalf("DecodeJSON of the escaped envelope: %v", err)
	}
	if _, err := codec.Describe(json.RawMessage(`{"$heph":"enc/1"}`)); !errors.Is(err, codec.ErrCorrupt) {
		t.Fatalf("Describe of a malformed envelope: %v, want ErrCorrupt", err)
	}
}

func TestCustomCodecs(t *testing.T) {
	t.Parallel()
	x := xor{"xor", 0x33}
	c := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{x}})
	v := json.RawMessage(`{"a":"b"}`)
	enc := roundTrip(t, c, v)
	if info, _ := codec.Describe(enc); !reflect.DeepEqual(info.Codecs, []string{"xor"}) || info.Key != "" {
		t.Fatalf("Describe = %+v", info)
	}
	// A chain that no longer writes with xor reads it as a decoder; one
	// that does not know it at all fails, naming it.
	reader := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}, Decoders: []codec.Codec{x}})
	if dec, err := reader.DecodeJSON(enc); err != nil || !bytes.Equal(dec, v) {
		t.Fatalf("DecodeJSON with xor as a decoder = %s, %v", dec, err)
	}
	_, err := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}}).DecodeJSON(enc)
	if !errors.Is(err, codec.ErrUnknownCodec) || !strings.Contains(err.Error(), `codec "xor"`) || !strings.Contains(err.Error(), "knows zstd") {
		t.Fatalf("DecodeJSON without xor: %v", err)
	}
	if _, err := new(codec.Chain).DecodeJSON(enc); !errors.Is(err, codec.ErrUnknownCodec) {
		t.Fatalf("DecodeJSON with the zero chain: %v", err)
	}
	// A failing codec is named.
	_, err = newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{failing{}}}).EncodeJSON(v)
	if err == nil || !strings.Contains(err.Error(), "encode payload: fail: boom") {
		t.Fatalf("EncodeJSON with a failing codec: %v", err)
	}
	// Two codecs that record keys, one of them not Keyed.
	_, err = newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{keyRecorder{}, newAES(t, newRing(t, "k1", "k1"))}}).EncodeJSON(v)
	if err == nil || !strings.Contains(err.Error(), "one key") {
		t.Fatalf("EncodeJSON with two keys: %v", err)
	}
}

type failing struct{}

func (failing) Name() string { return "fail" }
func (failing) Encode([]byte, codec.Step) (codec.Encoded, error) {
	return codec.Encoded{}, errors.New("boom")
}
func (failing) Decode([]byte, codec.Step) ([]byte, error) { return nil, errors.New("boom") }

type keyRecorder struct{}

func (keyRecorder) Name() string { return "rec" }
func (keyRecorder) Encode(b []byte, _ codec.Step) (codec.Encoded, error) {
	return codec.Encoded{Data: b, Key: "other"}, nil
}
func (keyRecorder) Decode(b []byte, _ codec.Step) ([]byte, error) { return b, nil }

func TestChainConfigErrors(t *testing.T) {
	t.Parallel()
	ring := newRing(t, "k1", "k1")
	z := newZstd(t, nil)
	tests := []struct {
		cfg  codec.ChainConfig
		want string
	}{
		{codec.ChainConfig{Codecs: []codec.Codec{z, nil}}, "ChainConfig.Codecs[1] is nil"},
		{codec.ChainConfig{Codecs: []codec.Codec{z, z}}, `ChainConfig.Codecs[1]: codec name "zstd" appears twice`},
		{codec.ChainConfig{Codecs: []codec.Codec{z}, Decoders: []codec.Codec{newZstd(t, nil)}}, `ChainConfig.Decoders[0]: codec name "zstd" appears twice`},
		{codec.ChainConfig{Codecs: []codec.Codec{xor{"Bad", 1}}}, `ChainConfig.Codecs[0]: codec name "Bad"`},
		{codec.ChainConfig{Codecs: []codec.Codec{xor{"", 1}}}, `codec name ""`},
		{codec.ChainConfig{Codecs: []codec.Codec{newAES(t, ring), keyedXor{xor{"x2", 1}}}}, `codecs "aes-gcm" and "x2" both use keys`},
		{codec.ChainConfig{Codecs: make([]codec.Codec, 9)}, "9 codecs, at most 8"},
	}
	for _, tt := range tests {
		if _, err := codec.NewChain(&tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewChain: %v, want %q", err, tt.want)
		}
	}
	for _, cfg := range []codec.ZstdConfig{{MinSize: -1}, {Level: 23}, {Level: -1}, {MaxDecodedSize: -5}} {
		if _, err := codec.NewZstd(&cfg); err == nil || !strings.Contains(err.Error(), "ZstdConfig.") {
			t.Errorf("NewZstd(%+v): %v, want an error naming the field", cfg, err)
		}
	}
	if _, err := codec.NewAESGCM(nil); err == nil {
		t.Error("NewAESGCM(nil) succeeded")
	}
}

type keyedXor struct{ xor }

func (keyedXor) WriteKey() string { return "x" }

func TestConcurrent(t *testing.T) {
	t.Parallel()
	c := standard(t, newRing(t, "k1", "k1"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := range 50 {
				v := records(1 + r.IntN(300))
				if i%2 == 0 {
					v = randomString(r, 2000)
				}
				enc, err := c.EncodeJSON(v)
				if err == nil {
					var dec json.RawMessage
					dec, err = c.DecodeJSON(enc)
					if err == nil && !bytes.Equal(dec, v) {
						err = errors.New("round trip differs")
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestZeroValues(t *testing.T) {
	t.Parallel()
	v := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	for _, cd := range []codec.Codec{new(codec.Zstd), new(codec.AESGCM)} {
		c := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{cd}})
		if _, err := c.EncodeJSON(v); err == nil || !strings.Contains(err.Error(), "make it with New") {
			t.Errorf("EncodeJSON with a zero %s: %v", cd.Name(), err)
		}
		env := rawEnvelope{Format: codec.Format, Codecs: []string{cd.Name()}, Key: "k1", Size: 3, Data: make([]byte, 40)}.marshal(t)
		if _, err := c.DecodeJSON(env); err == nil {
			t.Errorf("DecodeJSON with a zero %s succeeded", cd.Name())
		}
	}
	c := standard(t, newRing(t, "k1", "k1"))
	if out, changed, err := c.Reencode(nil); err != nil || changed || out != nil {
		t.Errorf("Reencode(nil) = %q, %v, %v", out, changed, err)
	}
}
