package hephaestus

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Flow documents are workflows written as JSON or YAML data, submitted
// while the program runs: no redeploy. The client stores each document's
// content as a version of its name, under the SHA-256 of the content;
// versions never change and are never deleted (pruning runs leaves them).
// Putting content that the name has already stores nothing and returns
// that version, so a submit retried after an error is safe.
//
// A run of a document will be pinned to the exact content it started with
// (its hash), so that a new version of the name never changes a run in
// flight; that comes with the document compiler, which reads the content
// back by hash (GetDocumentByHash).

// ErrDocumentNotFound: no stored document has that name (and version) or
// hash.
var ErrDocumentNotFound = store.ErrDocumentNotFound

// MaxDocumentSize bounds, in bytes, the content of a document: 1 MiB, on
// every backend. Larger content fails with ErrInvalidInput and
// ErrPayloadTooLarge.
const MaxDocumentSize = store.MaxDocumentSize

// The formats of a document.
const (
	DocumentJSON = store.DocumentJSON
	DocumentYAML = store.DocumentYAML
)

// Document is a stored flow document.
type Document struct {
	// Name: a letter, then letters, digits, '_', '-' or '.', at most 200
	// bytes.
	Name string
	// Version counts the contents of the name: 1 for the first.
	Version int
	// Hash is the SHA-256 of Content, in lower-case hex.
	Hash string
	// Format is DocumentJSON or DocumentYAML.
	Format string
	// Content is the document as submitted; nil in a DocumentList.
	Content []byte
	// Size is the content's length in bytes.
	Size      int
	CreatedAt time.Time
}

func toDocument(d *store.Document) *Document {
	return &Document{Name: d.Name, Version: d.Version, Hash: d.Hash, Format: d.Format, Content: d.Content, Size: d.Size, CreatedAt: d.CreatedAt}
}

// PutDocument stores content as the next version of the document name
// and returns it, unless the name has this content already: then it
// stores nothing and returns the version that has it. The format is
// DocumentJSON or DocumentYAML; the content is stored as given (it is not
// parsed here). A bad name, format or size fails with ErrInvalidInput,
// and so does content the name has already under the other format.
func (c *Client) PutDocument(ctx context.Context, name, format string, content []byte) (*Document, error) {
	d, err := c.cfg.Store.PutDocument(ctx, &store.PutDocumentParams{Name: name, Format: format, Content: content, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("put document %q: %w", name, err)
	}
	return toDocument(d), nil
}

// GetDocument returns a version of the document name, with its content;
// version 0 is the latest. A name (or version) that is not stored fails
// with ErrDocumentNotFound.
func (c *Client) GetDocument(ctx context.Context, name string, version int) (*Document, error) {
	d, err := c.cfg.Store.GetDocument(ctx, &store.GetDocumentParams{Name: name, Version: version})
	if err != nil {
		return nil, fmt.Errorf("get document %q version %d: %w", name, version, err)
	}
	return toDocument(d), nil
}

// GetDocumentByHash returns the document stored with the content of a
// hash (Document.Hash); when several names have that content, the one
// stored first. An unknown hash fails with ErrDocumentNotFound.
func (c *Client) GetDocumentByHash(ctx context.Context, hash string) (*Document, error) {
	d, err := c.cfg.Store.GetDocument(ctx, &store.GetDocumentParams{Hash: hash})
	if err != nil {
		return nil, fmt.Errorf("get document by hash: %w", err)
	}
	return toDocument(d), nil
}

// ListDocumentsOptions selects the documents ListDocuments returns.
type ListDocumentsOptions struct {
	// Name keeps the versions of one document; empty lists all.
	Name string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor continues from DocumentList.Next.
	Cursor string
}

// DocumentList is one page of documents, without their content, by name
// (byte order), then version, newest first.
type DocumentList struct {
	Documents []*Document
	// Next is the cursor of the next page, empty on the last.
	Next string
}

// ListDocuments returns stored documents, without their content, one
// page at a time.
func (c *Client) ListDocuments(ctx context.Context, opts *ListDocumentsOptions) (*DocumentList, error) {
	if opts == nil {
		opts = &ListDocumentsOptions{}
	}
	p, err := c.cfg.Store.ListDocuments(ctx, &store.ListDocumentsParams{Name: opts.Name, Limit: opts.Limit, Cursor: opts.Cursor})
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	out := &DocumentList{Documents: make([]*Document, 0, len(p.Documents)), Next: p.Next}
	for _, d := range p.Documents {
		out.Documents = append(out.Documents, toDocument(d))
	}
	return out, nil
}
