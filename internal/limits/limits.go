// Package limits holds the size limits every backend shares and the errors
// of input that does not fit them. It owns the checks; it may not touch
// the store or any runtime state. The limits are documented in
// docs/architecture.md ("Limits") and are the same on every backend.
package limits

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// ErrInvalidInput: input a caller passed does not fit (re-exported as
// hephaestus.ErrInvalidInput).
var ErrInvalidInput = hephtype.ErrInvalidInput

// ErrPayloadTooLarge: a payload is larger than the configured limit
// (re-exported as hephaestus.ErrPayloadTooLarge).
var ErrPayloadTooLarge = hephtype.ErrPayloadTooLarge

// DefaultPayloadSize is the default of Config.MaxPayloadSize: 2 MiB.
const DefaultPayloadSize = 2 << 20

// OffloadPayloadSize is the default of Config.MaxPayloadSize when large
// payloads go to a blob store: 5 GiB, the largest object one S3 write
// takes.
const OffloadPayloadSize = 5 << 30

// Payload reports a payload above max bytes; what names it for the error.
func Payload(b []byte, max int, what string) error {
	if len(b) > max {
		return fmt.Errorf("%w: %s is %d bytes, above the limit of %d bytes (Config.MaxPayloadSize)", ErrPayloadTooLarge, what, len(b), max)
	}
	return nil
}

// Input is Payload for what a caller passes: the error wraps
// ErrInvalidInput too.
func Input(b []byte, max int, what string) error {
	if err := Payload(b, max, what); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}

// JSON encodes a value a caller passes, passing json.RawMessage and
// []byte through (checked to be valid JSON); nothing (nil, empty) is JSON
// null. The error says what is wrong, for the caller to name the value.
func JSON(v any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch v := v.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("does not encode as JSON: %w", err)
		}
		raw = b
	}
	if len(raw) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("is not valid JSON")
	}
	return raw, nil
}
