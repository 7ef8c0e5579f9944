package codec

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// ZstdName is the name of the zstd codec in envelopes.
const ZstdName = "zstd"

// Defaults of ZstdConfig.
const (
	DefaultZstdMinSize        = 1 << 10
	DefaultZstdLevel          = 3
	DefaultZstdMaxDecodedSize = 64 << 20
)

// ZstdConfig configures a Zstd codec.
type ZstdConfig struct {
	// MinSize is the size in bytes from which payloads are compressed;
	// smaller ones are left as they are. Defaults to 1 KiB; 1 compresses
	// every payload.
	MinSize int
	// Level is the zstd compression level, 1 (fastest) to 22, mapped to
	// one of the four of github.com/klauspost/compress/zstd: 1-2 fastest,
	// 3-5 default, 6-9 better, 10-22 best. Defaults to 3.
	Level int
	// MaxDecodedSize bounds the size in bytes a payload decompresses to:
	// above it Decode fails with ErrTooLarge, before allocating more (a
	// decompression bomb does not exhaust memory). Set it to the largest
	// payload the application stores. Defaults to 64 MiB.
	MaxDecodedSize int
}

// Zstd is a codec that compresses payloads of at least MinSize bytes with
// zstd, when that makes them smaller. It is safe for concurrent use: it
// shares one encoder and one decoder (EncodeAll, DecodeAll), which run
// as many payloads at once as GOMAXPROCS and make the others wait.
type Zstd struct {
	minSize, maxDecoded int
	enc                 *zstd.Encoder
	dec                 *zstd.Decoder
}

var _ Codec = (*Zstd)(nil)

// NewZstd returns a zstd codec; a nil cfg takes the defaults.
func NewZstd(cfg *ZstdConfig) (*Zstd, error) {
	var c ZstdConfig
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.MinSize < 0:
		return nil, fmt.Errorf("ZstdConfig.MinSize is %d: want 0 (the default, %d) or more", c.MinSize, DefaultZstdMinSize)
	case c.MinSize == 0:
		c.MinSize = DefaultZstdMinSize
	}
	switch {
	case c.Level < 0 || c.Level > 22:
		return nil, fmt.Errorf("ZstdConfig.Level is %d: want 1 to 22, or 0 for the default (%d)", c.Level, DefaultZstdLevel)
	case c.Level == 0:
		c.Level = DefaultZstdLevel
	}
	switch {
	case c.MaxDecodedSize < 0:
		return nil, fmt.Errorf("ZstdConfig.MaxDecodedSize is %d: want 0 (the default, %d) or more", c.MaxDecodedSize, DefaultZstdMaxDecodedSize)
	case c.MaxDecodedSize == 0:
		c.MaxDecodedSize = DefaultZstdMaxDecodedSize
	}
	// Neither runs a goroutine: they are used through EncodeAll and
	// DecodeAll only, never as streams, and need no Close.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(c.Level)), zstd.WithEncoderCRC(true))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(uint64(c.MaxDecodedSize)))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &Zstd{minSize: c.MinSize, maxDecoded: c.MaxDecodedSize, enc: enc, dec: dec}, nil
}

// Name returns ZstdName.
func (z *Zstd) Name() string { return ZstdName }

// Encode compresses data when it has at least MinSize bytes and
// compresses to fewer; otherwise it declines. The result is Optional.
func (z *Zstd) Encode(data []byte, _ Step) (Encoded, error) {
	if z.enc == nil {
		return Encoded{}, errors.New("the codec has no encoder: make it with NewZstd")
	}
	if len(data) < z.minSize {
		return Encoded{Skipped: true}, nil
	}
	out := z.enc.EncodeAll(data, make([]byte, 0, len(data)/2))
	if len(out) >= len(data) {
		return Encoded{Skipped: true}, nil
	}
	return Encoded{Data: out, Optional: true}, nil
}

// Decode decompresses data: ErrTooLarge above MaxDecodedSize bytes,
// ErrCorrupt for data that is not a valid zstd frame.
func (z *Zstd) Decode(data []byte, _ Step) ([]byte, error) {
	if z.dec == nil {
		return nil, errors.New("the codec has no decoder: make it with NewZstd")
	}
	out, err := z.dec.DecodeAll(data, nil)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, fmt.Errorf("%w: decompresses to more than %d bytes, the limit (ZstdConfig.MaxDecodedSize)", ErrTooLarge, z.maxDecoded)
	case err != nil:
		return nil, fmt.Errorf("%w: %d bytes that do not decompress: %v", ErrCorrupt, len(data), err)
	}
	return out, nil
}
