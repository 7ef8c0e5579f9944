package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Format is the envelope format this package writes, the value of an
// envelope's "$heph" member.
const Format = "enc/1"

// formatPrefix starts the "$heph" value of every envelope format.
const formatPrefix = "enc/"

// markerKey is the envelope marker as written in JSON.
var markerKey = []byte(`"$heph"`)

// envelope is the parsed form of an encoded payload.
type envelope struct {
	Format string
	Codecs []string
	Key    string
	Size   *int
	Data   []byte
}

// Info is what an envelope says about its payload, without decoding it:
// for the UIs that show "encrypted" in place of a value.
type Info struct {
	// Format is the envelope format ("enc/1").
	Format string
	// Codecs are the names of the codecs applied, in the order applied.
	Codecs []string
	// Key is the id of the key the payload was encrypted with; "" if none.
	Key string
	// Size is the size in bytes of the plain JSON value.
	Size int
	// DataSize is the size in bytes of the encoded data (before base64).
	DataSize int
	// StoredSize is the size in bytes of the envelope as given.
	StoredSize int
}

// Encrypted reports whether a codec of the payload used a key.
func (i Info) Encrypted() bool { return i.Key != "" }

// IsEncoded reports whether v is an envelope: a JSON object with a
// top-level member written exactly "$heph" (without escapes) whose value is
// a string that starts with "enc/". It does not check the rest of the
// envelope: DecodeJSON and Describe do.
func IsEncoded(v json.RawMessage) bool {
	f, ok := formatOf(v)
	return ok && strings.HasPrefix(f, formatPrefix)
}

// Marker returns the value of the top-level member written exactly
// "$heph" of the JSON object v, when v is one and that value is a string
// (the first such member counts; the members may be in any order and
// spaced, as PostgreSQL's jsonb writes them). Envelopes have "enc/…";
// other forms of the engine's (references to offloaded payloads) have
// their own.
func Marker(v json.RawMessage) (string, bool) { return formatOf(v) }

// Describe returns the metadata of the envelope v: its codecs, key id and
// sizes. It needs no key and decodes nothing. A value that is not an
// envelope fails with ErrNotEncoded; a malformed envelope with ErrCorrupt.
func Describe(v json.RawMessage) (Info, error) {
	if !IsEncoded(v) {
		return Info{}, ErrNotEncoded
	}
	env, err := parseEnvelope(v)
	if err != nil {
		return Info{}, fmt.Errorf("describe payload: %w", err)
	}
	return Info{
		Format:     env.Format,
		Codecs:     env.Codecs,
		Key:        env.Key,
		Size:       *env.Size,
		DataSize:   len(env.Data),
		StoredSize: len(v),
	}, nil
}

// parseEnvelope parses and checks an envelope (IsEncoded(v) holds). Member
// names must be written exactly, once each; unknown members are refused.
// It reads the base64 of "data" directly, not through encoding/json.
func parseEnvelope(v []byte) (*envelope, error) {
	var env envelope
	var seen [5]bool
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return nil, fmt.Errorf("%w: envelope: not an object", ErrCorrupt)
	}
	for i++; ; {
		i = skipSpace(v, i)
		if i >= len(v) || v[i] != '"' {
			return nil, fmt.Errorf("%w: envelope: want a member name at offset %d", ErrCorrupt, i)
		}
		end, ok := skipString(v, i)
		if !ok {
			return nil, fmt.Errorf("%w: envelope: unterminated member name at offset %d", ErrCorrupt, i)
		}
		name := v[i:end]
		i = skipSpace(v, end)
		if i >= len(v) || v[i] != ':' {
			return nil, fmt.Errorf("%w: envelope: want ':' after member %.40s", ErrCorrupt, name)
		}
		i = skipSpace(v, i+1)
		start := i
		if i, ok = skipValue(v, i); !ok {
			return nil, fmt.Errorf("%w: envelope: member %.40s has no valid value", ErrCorrupt, name)
		}
		n, err := env.set(name, v[start:i])
		if err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, fmt.Errorf("%w: envelope: member %s appears twice", ErrCorrupt, name)
		}
		seen[n] = true
		i = skipSpace(v, i)
		if i < len(v) && v[i] == ',' {
			i++
			continue
		}
		if i >= len(v) || v[i] != '}' {
			return nil, fmt.Errorf("%w: envelope: want ',' or '}' at offset %d", ErrCorrupt, i)
		}
		if skipSpace(v, i+1) != len(v) {
			return nil, fmt.Errorf("%w: envelope: data after the object", ErrCorrupt)
		}
		break
	}
	if err := env.check(); err != nil {
		return nil, err
	}
	return &env, nil
}

// set sets the member name (as written) to the JSON value raw, and returns
// the member's index.
func (env *envelope) set(name, raw []byte) (int, error) {
	var n int
	var err error
	switch string(name) {
	case `"$heph"`:
		n, err = 0, json.Unmarshal(raw, &env.Format)
	case `"codecs"`:
		n, err = 1, json.Unmarshal(raw, &env.Codecs)
	case `"key"`:
		n, err = 2, json.Unmarshal(raw, &env.Key)
	case `"size"`:
		n, err = 3, json.Unmarshal(raw, &env.Size)
	case `"data"`:
		n, err = 4, env.setData(raw)
	default:
		return 0, fmt.Errorf("%w: envelope: unknown member %.40s", ErrCorrupt, name)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: envelope member %s: %v", ErrCorrupt, name, err)
	}
	return n, nil
}

// setData decodes the base64 string raw.
func (env *envelope) setData(raw []byte) error {
	if len(raw) < 2 || raw[0] != '"' {
		return errors.New("not a base64 string")
	}
	b64 := raw[1 : len(raw)-1]
	if bytes.IndexByte(b64, '\\') >= 0 {
		// Escaped characters (a writer that escapes '/'): the slow way.
		return json.Unmarshal(raw, &env.Data)
	}
	env.Data = make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(env.Data, b64)
	if err != nil {
		return fmt.Errorf("not base64: %v", err)
	}
	env.Data = env.Data[:n]
	return nil
}

// check checks the members of a parsed envelope.
func (env *envelope) check() error {
	if env.Format != Format {
		return fmt.Errorf("%w: envelope format %q: this version reads %q", ErrCorrupt, env.Format, Format)
	}
	if env.Codecs == nil {
		return fmt.Errorf("%w: envelope has no \"codecs\" list", ErrCorrupt)
	}
	if len(env.Codecs) > maxCodecs {
		return fmt.Errorf("%w: envelope lists %d codecs, at most %d", ErrCorrupt, len(env.Codecs), maxCodecs)
	}
	for _, c := range env.Codecs {
		if err := checkName(c); err != nil {
			return fmt.Errorf("%w: envelope: %v", ErrCorrupt, err)
		}
	}
	if env.Key != "" {
		if err := checkKeyID(env.Key); err != nil {
			return fmt.Errorf("%w: envelope: %v", ErrCorrupt, err)
		}
	}
	if env.Size == nil || *env.Size < 0 {
		return fmt.Errorf("%w: envelope has no \"size\" or a negative one", ErrCorrupt)
	}
	if env.Data == nil {
		return fmt.Errorf("%w: envelope has no \"data\"", ErrCorrupt)
	}
	if len(env.Codecs) == 0 && env.Key != "" {
		return fmt.Errorf("%w: envelope records key %q but no codec", ErrCorrupt, env.Key)
	}
	if len(env.Codecs) == 0 && len(env.Data) != *env.Size {
		return fmt.Errorf("%w: envelope without codecs holds %d bytes, its size says %d", ErrCorrupt, len(env.Data), *env.Size)
	}
	return nil
}

// appendEnvelope appends the envelope of data to b.
func appendEnvelope(b []byte, codecs []string, key string, size int, data []byte) []byte {
	b = append(b, `{"$heph":"`...)
	b = append(b, Format...)
	b = append(b, `","codecs":[`...)
	for i, c := range codecs {
		if i > 0 {
			b = append(b, ',')
		}
		// Names and key ids need no escaping (checkName, checkKeyID).
		b = append(b, '"')
		b = append(b, c...)
		b = append(b, '"')
	}
	b = append(b, ']')
	if key != "" {
		b = append(b, `,"key":"`...)
		b = append(b, key...)
		b = append(b, '"')
	}
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(size), 10)
	b = append(b, `,"data":"`...)
	b = base64.StdEncoding.AppendEncode(b, data)
	return append(b, `"}`...)
}

// envelopeSize is an upper bound of the length of an envelope.
func envelopeSize(codecs []string, key string, dataLen int) int {
	n := 64 + len(key) + base64.StdEncoding.EncodedLen(dataLen)
	for _, c := range codecs {
		n += len(c) + 3
	}
	return n
}

// formatOf returns the value of the top-level member written "$heph" of
// the JSON object v, if v is one and that value is a string. The first
// such member counts. It reads v without allocating, and refuses (ok
// false) whatever does not scan as an object up to that member.
func formatOf(v []byte) (format string, ok bool) {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' || !bytes.Contains(v[i:], markerKey) {
		return "", false
	}
	i++
	for {
		i = skipSpace(v, i)
		if i >= len(v) || v[i] != '"' {
			return "", false
		}
		end, ok := skipString(v, i)
		if !ok {
			return "", false
		}
		name := v[i:end]
		i = skipSpace(v, end)
		if i >= len(v) || v[i] != ':' {
			return "", false
		}
		i = skipSpace(v, i+1)
		start := i
		if i, ok = skipValue(v, i); !ok {
			return "", false
		}
		if bytes.Equal(name, markerKey) {
			if v[start] != '"' {
				return "", false
			}
			var s string
			if err := json.Unmarshal(v[start:i], &s); err != nil {
				return "", false
			}
			return s, true
		}
		i = skipSpace(v, i)
		if i >= len(v) || v[i] != ',' {
			return "", false
		}
		i++
	}
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the JSON string that starts at v[i]
// (a '"').
func skipString(v []byte, i int) (int, bool) {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the index after the JSON value that starts at v[i]. It
// checks the nesting of brackets and the ends of strings, not the rest of
// the grammar.
func skipValue(v []byte, i int) (int, bool) {
	if i >= len(v) {
		return 0, false
	}
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for i < len(v) {
			switch v[i] {
			case '"':
				end, ok := skipString(v, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	case ',', '}', ']', ':':
		return 0, false
	default:
		for i < len(v) {
			switch v[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, true
			}
			i++
		}
		return i, true
	}
}
