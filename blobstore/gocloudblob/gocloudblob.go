// Package gocloudblob is a blobstore.Store over gocloud.dev/blob: a
// local directory (file://), S3 and S3-compatible stores (s3://), memory
// (mem://), or any bucket of another gocloud driver (New).
package gocloudblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// blob stores
	_ "gocloud.dev/blob/memblob"  // mem:// blob stores (tests)
	_ "gocloud.dev/blob/s3blob"   // s3:// blob stores (S3 and S3-compatible)
	"gocloud.dev/gcerrors"

	"github.com/hephaestus-go/hephaestus/blobstore"
)

// Store is a blobstore.Store over a gocloud bucket.
type Store struct{ b *blob.Bucket }

var _ blobstore.Store = (*Store)(nil)

// New returns the store of bucket (closed with the store).
func New(bucket *blob.Bucket) *Store { return &Store{b: bucket} }

// Open opens a store by URL: file:///path (a local directory, created if
// missing with ?create_dir=true; files are written beside their final
// names, as with no_tmp_dir=true, unless the URL says otherwise: a
// temporary directory on another file system, a tmpfs /tmp, cannot
// rename into it), s3://bucket?region=...&endpoint=...&use_path_style=true
// (S3 and S3-compatible stores; credentials from the AWS environment) or
// mem:// (in memory, for tests). See gocloud.dev/blob for each scheme's
// options.
func Open(ctx context.Context, url string) (*Store, error) {
	if strings.HasPrefix(url, "file://") && !strings.Contains(url, "no_tmp_dir=") {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "no_tmp_dir=true"
	}
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open the blob store %q: %w", url, err)
	}
	return New(b), nil
}

// Bucket returns the gocloud bucket.
func (s *Store) Bucket() *blob.Bucket { return s.b }

func notFound(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", blobstore.ErrNotFound, err)
	}
	return err
}

// Write writes through a writer (WriteAll would hash b once more, with
// MD5, before writing).
func (s *Store) Write(ctx context.Context, key string, b []byte) error {
	w, err := s.b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

func (s *Store) Read(ctx context.Context, key string) ([]byte, error) {
	b, err := s.b.ReadAll(ctx, key)
	return b, notFound(err)
}

func (s *Store) Attributes(ctx context.Context, key string) (blobstore.Object, error) {
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return blobstore.Object{}, notFound(err)
	}
	return blobstore.Object{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	return nil
}

func (s *Store) List(ctx context.Context, prefix string, fn func(blobstore.Object) error) error {
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if obj.IsDir {
			continue
		}
		if err := fn(blobstore.Object{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime}); err != nil {
			return err
		}
	}
}

func (s *Store) Close() error { return s.b.Close() }
