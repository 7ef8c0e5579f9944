package codec

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ChainConfig configures a Chain.
type ChainConfig struct {
	// Codecs are applied in this order on encode, and in reverse on
	// decode: compression before encryption (encrypted bytes do not
	// compress). At most 8, one of them Keyed at most. Defaults to none:
	// EncodeJSON leaves values as they are.
	Codecs []Codec
	// Decoders are codecs the chain decodes with but does not encode
	// with: a codec no longer written (keep Zstd here after removing
	// compression, or payloads written with it no longer read). Defaults
	// to none.
	Decoders []Codec
}

// Chain encodes payloads with its codecs and decodes them with the codecs
// their envelopes name. It is safe for concurrent use when its codecs
// are; the zero Chain has no codec.
type Chain struct {
	codecs []Codec
	byName map[string]Codec
	keyed  Keyed
	names  string // for errors: the names the chain knows
}

// NewChain returns a chain of the codecs of cfg; a nil cfg is an empty
// chain. Names must be valid and unique across Codecs and Decoders.
func NewChain(cfg *ChainConfig) (*Chain, error) {
	c := &Chain{byName: map[string]Codec{}}
	if cfg == nil {
		return c, nil
	}
	if len(cfg.Codecs) > maxCodecs {
		return nil, fmt.Errorf("ChainConfig.Codecs has %d codecs, at most %d", len(cfg.Codecs), maxCodecs)
	}
	add := func(field string, i int, cd Codec) error {
		if cd == nil {
			return fmt.Errorf("ChainConfig.%s[%d] is nil", field, i)
		}
		name := cd.Name()
		if err := checkName(name); err != nil {
			return fmt.Errorf("ChainConfig.%s[%d]: %w", field, i, err)
		}
		if _, dup := c.byName[name]; dup {
			return fmt.Errorf("ChainConfig.%s[%d]: codec name %q appears twice", field, i, name)
		}
		c.byName[name] = cd
		return nil
	}
	for i, cd := range cfg.Codecs {
		if err := add("Codecs", i, cd); err != nil {
			return nil, err
		}
		if k, ok := cd.(Keyed); ok {
			if c.keyed != nil {
				return nil, fmt.Errorf("ChainConfig.Codecs[%d]: codecs %q and %q both use keys; an envelope records one key", i, c.keyed.(Codec).Name(), cd.Name())
			}
			c.keyed = k
		}
		c.codecs = append(c.codecs, cd)
	}
	for i, cd := range cfg.Decoders {
		if err := add("Decoders", i, cd); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(c.byName))
	for n := range c.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	c.names = strings.Join(names, ", ")
	return c, nil
}

// WriteKey is the id of the key new payloads are encrypted with: that of
// the chain's Keyed codec; "" if it has none.
func (c *Chain) WriteKey() string {
	if c.keyed == nil {
		return ""
	}
	return c.keyed.WriteKey()
}

// EncodeJSON encodes the JSON value v with the chain's codecs and returns
// its envelope, or v itself when no codec applied (or only optional
// codecs that saved nothing) and v does not read as an envelope. An empty
// v (no payload) is returned as it is; v must otherwise be valid JSON.
// A value that is already an envelope is encoded again, as any value: to
// store an envelope as it is, check IsEncoded first.
func (c *Chain) EncodeJSON(v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 {
		return v, nil
	}
	if !json.Valid(v) {
		return nil, fmt.Errorf("encode payload: the value (%d bytes) is not valid JSON", len(v))
	}
	data := []byte(v)
	var applied []string
	key, keyFrom, optional := "", "", true
	for _, cd := range c.codecs {
		name := cd.Name()
		step := Step{Codecs: append(applied[:len(applied):len(applied)], name), Size: len(v)}
		e, err := cd.Encode(data, step)
		if err != nil {
			return nil, fmt.Errorf("encode payload: %s: %w", name, err)
		}
		if e.Skipped {
			continue
		}
		if e.Key != "" {
			if err := checkKeyID(e.Key); err != nil {
				return nil, fmt.Errorf("encode payload: %s: %w", name, err)
			}
			if key != "" {
				return nil, fmt.Errorf("encode payload: %s: records key %q, but %s recorded key %q: an envelope holds one key", name, e.Key, keyFrom, key)
			}
			key, keyFrom = e.Key, name
		}
		applied, data, optional = step.Codecs, e.Data, optional && e.Optional
	}
	looksEncoded := IsEncoded(v)
	if len(applied) == 0 && !looksEncoded {
		return v, nil
	}
	env := appendEnvelope(make([]byte, 0, envelopeSize(applied, key, len(data))), applied, key, len(v), data)
	if optional && len(env) >= len(v) && !looksEncoded {
		return v, nil
	}
	return env, nil
}

// DecodeJSON returns the JSON value v encodes. A value that is not an
// envelope (IsEncoded) is returned unchanged: rows written before encoding
// was turned on stay readable. Errors wrap ErrKeyNotFound,
// ErrDecrypt, ErrUnknownCodec, ErrTooLarge or ErrCorrupt, and name the
// codec and the key id at fault.
func (c *Chain) DecodeJSON(v json.RawMessage) (json.RawMessage, error) {
	if !IsEncoded(v) {
		return v, nil
	}
	env, err := parseEnvelope(v)
	if err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	return c.decode(env)
}

func (c *Chain) decode(env *envelope) (json.RawMessage, error) {
	data := env.Data
	authenticated := false
	for i := len(env.Codecs) - 1; i >= 0; i-- {
		name := env.Codecs[i]
		cd, ok := c.byName[name]
		if !ok {
			known := c.names
			if known == "" {
				known = "none"
			}
			return nil, fmt.Errorf("decode payload: codec %q: %w (the chain knows %s)", name, ErrUnknownCodec, known)
		}
		out, err := cd.Decode(data, Step{Codecs: env.Codecs[: i+1 : i+1], Key: env.Key, Size: *env.Size})
		if err != nil {
			return nil, fmt.Errorf("decode payload: %s: %w", name, err)
		}
		data = out
		if _, ok := cd.(Keyed); ok {
			authenticated = true
		}
	}
	if len(data) != *env.Size {
		return nil, fmt.Errorf("decode payload: %w: decoded to %d bytes, the envelope's size says %d", ErrCorrupt, len(data), *env.Size)
	}
	// EncodeJSON checked the value; a Keyed codec vouches that it is the
	// one encoded. Other payloads may have been written by anyone.
	if !authenticated && !json.Valid(data) {
		return nil, fmt.Errorf("decode payload: %w: decoded to %d bytes that are not valid JSON", ErrCorrupt, len(data))
	}
	return data, nil
}

// Reencode returns v as the chain writes it now, and whether that
// differs from v: for the re-encryption of stored payloads after a
// rotation. It returns v unchanged when v is an envelope whose key is the
// chain's write key (or neither has a key), an empty value, or a plain
// value and the chain has no write key; otherwise it decodes v and
// encodes it again. It does not decode the payloads it leaves unchanged.
func (c *Chain) Reencode(v json.RawMessage) (out json.RawMessage, changed bool, err error) {
	writeKey := c.WriteKey()
	if !IsEncoded(v) {
		if writeKey == "" || len(v) == 0 {
			return v, false, nil
		}
		out, err := c.EncodeJSON(v)
		if err != nil {
			return nil, false, fmt.Errorf("reencode: %w", err)
		}
		return out, true, nil
	}
	env, err := parseEnvelope(v)
	if err != nil {
		return nil, false, fmt.Errorf("reencode: decode payload: %w", err)
	}
	if env.Key == writeKey {
		return v, false, nil
	}
	plain, err := c.decode(env)
	if err != nil {
		return nil, false, fmt.Errorf("reencode: %w", err)
	}
	if out, err = c.EncodeJSON(plain); err != nil {
		return nil, false, fmt.Errorf("reencode: %w", err)
	}
	return out, true, nil
}
