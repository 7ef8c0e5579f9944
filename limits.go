package hephaestus

import (
	"errors"
	"fmt"
)

// ErrPayloadTooLarge: a payload (a run input, a signal's payload, an
// update's arguments, a resume payload, a step's or activity's output,
// heartbeat details) is larger than Config.MaxPayloadSize. Inputs that
// callers pass fail with it (and ErrInvalidInput) before anything is
// written; an output that is too large fails its step or activity for
// good, since retrying would produce it again.
var ErrPayloadTooLarge = errors.New("payload too large")

// checkPayload reports a payload above the configured limit; what names
// it for the error.
func (c *Client) checkPayload(b []byte, what string) error {
	if max := c.cfg.MaxPayloadSize; len(b) > max {
		return fmt.Errorf("%w: %s is %d bytes, above the limit of %d bytes (Config.MaxPayloadSize)", ErrPayloadTooLarge, what, len(b), max)
	}
	return nil
}

// checkInput is checkPayload for what a caller passes: the error wraps
// ErrInvalidInput too.
func (c *Client) checkInput(b []byte, what string) error {
	if err := c.checkPayload(b, what); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}
