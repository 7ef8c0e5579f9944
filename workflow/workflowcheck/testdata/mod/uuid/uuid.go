// Package uuid is a stand-in for github.com/google/uuid.
package uuid

import "time"

type UUID [16]byte

func New() UUID                    { return UUID{} }
func Parse(s string) (UUID, error) { return UUID{}, nil }

// Stamped reads the clock: another module's, so the analyzer does not
// follow calls of it.
func Stamped() UUID {
	_ = time.Now()
	return New()
}
