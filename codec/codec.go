package codec

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors a caller can branch on. Every error of the package wraps at most
// one of them and says which codec and which key id it concerns.
var (
	// ErrKeyNotFound: the payload was encrypted with a key the keyring
	// does not hold; the error names the key id.
	ErrKeyNotFound = errors.New("payload key not found")
	// ErrDecrypt: the payload does not authenticate: its data or its
	// envelope's metadata (codecs, key id, size) were altered, or the key
	// of that id is not the one that encrypted it.
	ErrDecrypt = errors.New("payload decryption failed")
	// ErrUnknownCodec: the envelope names a codec the chain does not know.
	ErrUnknownCodec = errors.New("unknown payload codec")
	// ErrTooLarge: the payload decodes to more bytes than the limit (a
	// decompression bomb, or a limit set too low).
	ErrTooLarge = errors.New("payload too large")
	// ErrCorrupt: the envelope is malformed, or its data does not decode
	// (other than by failing to authenticate: ErrDecrypt).
	ErrCorrupt = errors.New("corrupt payload")
	// ErrNotEncoded: Describe was given a value that is not an envelope.
	ErrNotEncoded = errors.New("payload is not encoded")
)

// Codec transforms a payload's bytes on its way to the store, and back.
// Implementations must be safe for concurrent use: a Chain calls them from
// any goroutine.
type Codec interface {
	// Name identifies the codec in envelopes: 1 to 32 lowercase letters,
	// digits, '.', '_' or '-'. It must never change: payloads written
	// under a name are decoded by the codec registered under it.
	Name() string
	// Encode transforms data, or declines (Encoded.Skipped). It must not
	// modify data nor keep it. An authenticating codec binds
	// s.AdditionalData(key) to its output.
	Encode(data []byte, s Step) (Encoded, error)
	// Decode reverses Encode. data belongs to the chain, which does not
	// use it afterwards: Decode may work in place and return a slice of
	// it. s.Key is the key id the envelope records ("" for none).
	Decode(data []byte, s Step) ([]byte, error)
}

// Keyed is implemented by codecs that encrypt with a key of a keyring:
// a Chain asks it which key new payloads are written with (Chain.WriteKey,
// Chain.Reencode). A Keyed codec authenticates what it decodes (an AEAD
// such as AES-GCM): a chain trusts that a payload a Keyed codec decoded is
// the JSON value EncodeJSON checked, and does not check it again.
type Keyed interface {
	// WriteKey is the id of the key Encode uses.
	WriteKey() string
}

// Encoded is what a codec did to a payload.
type Encoded struct {
	// Data is the transformed payload; ignored when Skipped.
	Data []byte
	// Key is the id of the key the codec used, recorded in the envelope;
	// "" for a codec without keys. One codec of a chain at most records a
	// key.
	Key string
	// Skipped: the codec left the payload as it is; the envelope does not
	// list it.
	Skipped bool
	// Optional: the payload may be stored without this codec's work (a
	// compression). When every codec a chain applied is optional and the
	// envelope is not smaller than the plain value, the chain stores the
	// plain value.
	Optional bool
}

// Step is what a chain tells a codec about the payload it encodes or
// decodes.
type Step struct {
	// Codecs are the names of the codecs applied before this one and this
	// one's, in order. On Encode the codec's own name is last even if it
	// then declines.
	Codecs []string
	// Key is, on Decode, the key id recorded in the envelope ("" for
	// none); "" on Encode.
	Key string
	// Size is the size in bytes of the plain JSON value, recorded in the
	// envelope.
	Size int
}

// AdditionalData returns the bytes an authenticating codec binds to its
// output when it uses the key id key: the envelope format, s.Size, key
// and s.Codecs. An envelope whose size, key id or codec list (up to the
// codec) was altered then fails to authenticate.
func (s Step) AdditionalData(key string) []byte {
	n := len(Format) + len(key) + 24
	for _, c := range s.Codecs {
		n += len(c) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, "heph "...)
	b = append(b, Format...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(s.Size), 10)
	b = append(b, 0)
	b = append(b, key...)
	for _, c := range s.Codecs {
		b = append(b, 0)
		b = append(b, c...)
	}
	return b
}

// maxCodecs bounds the codecs of a chain and of an envelope.
const maxCodecs = 8

// checkName reports whether name is a valid codec name.
func checkName(name string) error {
	if name == "" || len(name) > 32 {
		return fmt.Errorf("codec name %q: want 1 to 32 bytes", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("codec name %q: write lowercase letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// checkKeyID reports whether id is a valid key id.
func checkKeyID(id string) error {
	if id == "" || len(id) > maxKeyID {
		return fmt.Errorf("key id %q: want 1 to %d bytes", id, maxKeyID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c != '_' && c != '-' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return fmt.Errorf("key id %q: write letters, digits, '_' and '-'", id)
		}
	}
	return nil
}
