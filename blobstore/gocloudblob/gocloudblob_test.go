package gocloudblob_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hephaestus-go/hephaestus/blobstore"
	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
)

// The store's contract on a local directory: write, read, attributes,
// list by prefix, delete (twice), and ErrNotFound for what is not there.
func TestFileStore(t *testing.T) {
	ctx := t.Context()
	s, err := gocloudblob.Open(ctx, "file://"+filepath.ToSlash(t.TempDir())+"?create_dir=true")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(ctx, "a/1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "b/2", []byte("two!")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read(ctx, "a/1"); err != nil || string(b) != "one" {
		t.Fatalf("read: %q, %v", b, err)
	}
	if o, err := s.Attributes(ctx, "b/2"); err != nil || o.Size != 4 || o.ModTime.IsZero() {
		t.Fatalf("attributes: %+v, %v", o, err)
	}
	var keys []string
	if err := s.List(ctx, "a/", func(o blobstore.Object) error { keys = append(keys, o.Key); return nil }); err != nil || len(keys) != 1 || keys[0] != "a/1" {
		t.Fatalf("list a/: %v, %v", keys, err)
	}
	for range 2 {
		if err := s.Delete(ctx, "a/1"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, err := s.Read(ctx, "a/1"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("read of a deleted object: %v", err)
	}
	if _, err := s.Attributes(ctx, "nothing"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("attributes of nothing: %v", err)
	}
	if _, err := gocloudblob.Open(ctx, "nosuch://x"); err == nil {
		t.Fatal("an unknown scheme opened")
	}
}
