package codec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/klauspost/compress/zstd"
)

// zstdEnvelope returns an envelope whose data is the zstd frame(s) given.
func zstdEnvelope(t *testing.T, size int, data []byte) json.RawMessage {
	return rawEnvelope{Format: codec.Format, Codecs: []string{"zstd"}, Size: size, Data: data}.marshal(t)
}

func TestDecompressionBomb(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	c := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, &codec.ZstdConfig{MaxDecodedSize: limit})}})

	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = enc.Close() }()
	zeros := make([]byte, 32<<20)
	// A frame that declares its size (EncodeAll).
	declared := enc.EncodeAll(zeros, nil)
	// A frame that does not (a stream), so the decoder finds out as it
	// goes.
	var streamed bytes.Buffer
	w, err := zstd.NewWriter(&streamed, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Frames each under the limit, together over it.
	half := enc.EncodeAll(zeros[:limit*3/4], nil)
	multi := append(bytes.Clone(half), half...)

	for name, data := range map[string][]byte{"declared": declared, "streamed": streamed.Bytes(), "multi-frame": multi} {
		if len(data) > 64<<10 {
			t.Fatalf("%s: a bomb of %d bytes is no bomb", name, len(data))
		}
		_, err := c.DecodeJSON(zstdEnvelope(t, len(zeros), data))
		if !errors.Is(err, codec.ErrTooLarge) || !strings.Contains(err.Error(), "more than 1048576 bytes") || !strings.Contains(err.Error(), "zstd") {
			t.Errorf("%s bomb (%d bytes): %v, want ErrTooLarge naming zstd and the limit", name, len(data), err)
		}
	}

	// A payload of exactly the limit decodes.
	v := json.RawMessage(`"` + strings.Repeat("z", limit-2) + `"`)
	if len(v) != limit {
		t.Fatal("bad test payload")
	}
	out, err := c.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := c.DecodeJSON(out); err != nil || !bytes.Equal(dec, v) {
		t.Fatalf("payload of the limit: %v", err)
	}
	// One more byte: encoded fine, refused on decode.
	v = json.RawMessage(`"` + strings.Repeat("z", limit-1) + `"`)
	out, err = c.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DecodeJSON(out); !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("payload over the limit: %v, want ErrTooLarge", err)
	}
}

func TestZstdCorrupt(t *testing.T) {
	t.Parallel()
	c := newChain(t, &codec.ChainConfig{Codecs: []codec.Codec{newZstd(t, nil)}})
	v := records(40)
	enc, err := c.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	orig := parseRaw(t, enc)
	// Flipping bytes of a frame: the checksum (or the frame's structure)
	// catches it; never a panic, never another value.
	for i := range orig.Data {
		e := orig
		e.Data = bytes.Clone(orig.Data)
		e.Data[i] ^= 0xff
		dec, err := c.DecodeJSON(e.marshal(t))
		if err == nil && !bytes.Equal(dec, v) {
			t.Fatalf("byte %d flipped: decoded to another value", i)
		}
		if err != nil && !errors.Is(err, codec.ErrCorrupt) && !errors.Is(err, codec.ErrTooLarge) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
}
