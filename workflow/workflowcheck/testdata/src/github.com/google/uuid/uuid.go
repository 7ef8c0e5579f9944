// Package uuid is a stand-in for github.com/google/uuid.
package uuid

type UUID [16]byte

func New() UUID                    { return UUID{} }
func Parse(s string) (UUID, error) { return UUID{}, nil }
