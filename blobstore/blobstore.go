// Package blobstore is the interface of the stores that hold large
// payloads out of the database (Config.PayloadBlobs, docs/payloads.md):
// a flat namespace of immutable objects by key. Package
// blobstore/gocloudblob implements it over gocloud.dev/blob (a local
// directory, S3 and S3-compatible stores, memory); any other store plugs
// in by implementing Store.
package blobstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is the error of Read and Attributes for a key that holds
// no object.
var ErrNotFound = errors.New("blob not found")

// Store holds objects by key. Its methods are safe for concurrent use.
type Store interface {
	// Write writes b under key, replacing what was there (and refreshing
	// its time).
	Write(ctx context.Context, key string, b []byte) error
	// Read returns the object under key (ErrNotFound when none).
	Read(ctx context.Context, key string) ([]byte, error)
	// Attributes returns what List returns of the object under key
	// (ErrNotFound when none).
	Attributes(ctx context.Context, key string) (Object, error)
	// Delete deletes the object under key; a key without one is not an
	// error.
	Delete(ctx context.Context, key string) error
	// List calls fn on every object whose key starts with prefix, until
	// fn returns an error (returned).
	List(ctx context.Context, prefix string, fn func(Object) error) error
	// Close releases the store.
	Close() error
}

// Object is an object as List sees it.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
}
