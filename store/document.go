package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Documents are flow documents submitted at run time: the store keeps
// each as opaque bytes with a format tag, under the SHA-256 hash of its
// content, with a name and a version. The first content stored under a
// name is its version 1, each new content of that name the next version.
// Storing content that the name has already (the same hash) records
// nothing and returns the version that has it: a submit retried after a
// lost answer, or sent twice, stores one version (that is what makes
// PutDocument exactly once; no key is needed, the content is the key).
// Versions are never changed: a run pinned to a document names its hash
// (or name and version), and reads the same bytes however the name is
// edited later. Documents are never deleted, by PruneRuns or anything
// else: runs name them and they are small.

// MaxDocumentSize bounds, in bytes, the content of a document, on every
// backend: 1 MiB.
const MaxDocumentSize = 1 << 20

// The formats of a document.
const (
	DocumentJSON = "json"
	DocumentYAML = "yaml"
)

// ErrDocumentNotFound: no stored document has the given name (and
// version) or hash.
var ErrDocumentNotFound = errors.New("document not found")

// Document is a stored document.
type Document struct {
	Name    string
	Version int
	// Hash is the SHA-256 of Content, in lower-case hex.
	Hash string
	// Format is DocumentJSON or DocumentYAML.
	Format string
	// Content is the document as submitted; ListDocuments leaves it nil.
	Content []byte
	// Size is len(Content), also where Content is left out.
	Size      int
	CreatedAt time.Time
}

// PutDocumentParams stores a document's content under a name.
type PutDocumentParams struct {
	// Name: a letter, then letters, digits, '_', '-' or '.', at most
	// hephtype.MaxNameLen bytes (the rule of flow names: a document
	// compiles to a flow of its name).
	Name string
	// Format is DocumentJSON or DocumentYAML; the store does not parse
	// the content.
	Format string
	// Content: not empty, at most MaxDocumentSize bytes.
	Content []byte
	Now     time.Time
}

// GetDocumentParams names a stored document: by Name and Version (0 is
// the latest version of the name), or by Hash. With a Hash, a Name (if
// any) picks the version of that name with this content; without one,
// the content's first stored version (the oldest, then by name) answers.
// Version must be 0 with a Hash.
type GetDocumentParams struct {
	Name    string
	Version int
	Hash    string
}

// ListDocumentsParams selects documents to list: all of them, or the
// versions of one Name.
type ListDocumentsParams struct {
	Name string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor continues from DocumentPage.Next.
	Cursor string
}

// DocumentPage is one page of documents, without their Content, ordered
// by name (byte order), then version, newest first; Next is empty on the
// last page.
type DocumentPage struct {
	Documents []*Document
	Next      string
}

// Documents is the part of a Store that keeps flow documents.
type Documents interface {
	// PutDocument stores a document's content as the next version of its
	// name and returns it as stored. When the name has this content
	// already (the same hash) it stores nothing and returns that version,
	// with no error: a retried put is safe. Two puts of different content
	// to one name, at once, get distinct versions. Content the name has
	// under another format is refused (ErrInvalidInput).
	PutDocument(ctx context.Context, p *PutDocumentParams) (*Document, error)
	// GetDocument returns a document with its content, or
	// ErrDocumentNotFound.
	GetDocument(ctx context.Context, p *GetDocumentParams) (*Document, error)
	// ListDocuments returns documents without their content, one page at
	// a time (DocumentPage says in what order).
	ListDocuments(ctx context.Context, p *ListDocumentsParams) (*DocumentPage, error)
}

// DocumentHash returns the hash a document with content is stored under.
func DocumentHash(content []byte) string {
	h := sha256.Sum256(content)
	return hex.EncodeToString(h[:])
}

// Check reports what makes p unfit to store; the error wraps
// hephtype.ErrInvalidInput (and hephtype.ErrPayloadTooLarge for content
// above MaxDocumentSize).
func (p *PutDocumentParams) Check() error {
	if p.Now.IsZero() {
		return errors.New("Now is zero")
	}
	if err := CheckDocumentName(p.Name); err != nil {
		return err
	}
	if p.Format != DocumentJSON && p.Format != DocumentYAML {
		return fmt.Errorf("%w: document %q: format %q is neither %q nor %q", hephtype.ErrInvalidInput, p.Name, p.Format, DocumentJSON, DocumentYAML)
	}
	if len(p.Content) == 0 {
		return fmt.Errorf("%w: document %q: the content is empty", hephtype.ErrInvalidInput, p.Name)
	}
	if len(p.Content) > MaxDocumentSize {
		return fmt.Errorf("%w: %w: document %q is %d bytes, above the limit of %d bytes (store.MaxDocumentSize)",
			hephtype.ErrInvalidInput, hephtype.ErrPayloadTooLarge, p.Name, len(p.Content), MaxDocumentSize)
	}
	return nil
}

// Check reports what makes p unfit to look up; the error wraps
// hephtype.ErrInvalidInput.
func (p *GetDocumentParams) Check() error {
	switch {
	case p.Hash != "" && p.Version != 0:
		return fmt.Errorf("%w: a document is named by hash or by version, not both (hash %q, version %d)", hephtype.ErrInvalidInput, p.Hash, p.Version)
	case p.Hash != "" && !isHash(p.Hash):
		return fmt.Errorf("%w: document hash %q is not a SHA-256 in lower-case hex (64 digits)", hephtype.ErrInvalidInput, p.Hash)
	case p.Hash == "" && p.Name == "":
		return fmt.Errorf("%w: a document is named by a name (and version) or a hash; both are empty", hephtype.ErrInvalidInput)
	case p.Version < 0:
		return fmt.Errorf("%w: document %q: version %d is negative (0 is the latest)", hephtype.ErrInvalidInput, p.Name, p.Version)
	}
	if p.Name != "" {
		return CheckDocumentName(p.Name)
	}
	return nil
}

func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		digit, hexLetter := c >= '0' && c <= '9', c >= 'a' && c <= 'f'
		if !digit && !hexLetter {
			return false
		}
	}
	return true
}

// CheckDocumentName reports a name a document cannot have; the error
// wraps hephtype.ErrInvalidInput.
func CheckDocumentName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the document's name is empty", hephtype.ErrInvalidInput)
	}
	if len(name) > hephtype.MaxNameLen {
		return fmt.Errorf("%w: document name %.20q… is %d bytes long; the limit is %d", hephtype.ErrInvalidInput, name, len(name), hephtype.MaxNameLen)
	}
	for i, c := range []byte(name) {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter {
			return fmt.Errorf("%w: document name %q: it must start with a letter", hephtype.ErrInvalidInput, name)
		}
		other := c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !letter && !other {
			return fmt.Errorf("%w: document name %q: byte %d (%q) is not a letter, digit, '_', '-' or '.'", hephtype.ErrInvalidInput, name, i, c)
		}
	}
	return nil
}

// DocumentLimit returns the page size ListDocuments uses for limit.
func DocumentLimit(limit int) int {
	switch {
	case limit <= 0:
		return 100
	case limit > 1000:
		return 1000
	}
	return limit
}

// EncodeDocumentCursor returns the cursor of a page that ends with the
// version of name: the next page starts after it.
func EncodeDocumentCursor(name string, version int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(version) + "," + name))
}

// DecodeDocumentCursor returns the name and version a cursor ends at; the
// error wraps hephtype.ErrInvalidInput.
func DecodeDocumentCursor(c string) (name string, version int, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		v, n, ok := strings.Cut(string(b), ",")
		if version, err := strconv.Atoi(v); ok && err == nil && version > 0 && CheckDocumentName(n) == nil {
			return n, version, nil
		}
	}
	return "", 0, fmt.Errorf("%w: invalid document cursor %q", hephtype.ErrInvalidInput, c)
}

// Describe names the document p asks for, for errors: `"name" version 3`,
// `"name" (latest)`, `with hash …`.
func (p *GetDocumentParams) Describe() string {
	switch {
	case p.Hash != "" && p.Name != "":
		return fmt.Sprintf("%q with hash %s", p.Name, p.Hash)
	case p.Hash != "":
		return "with hash " + p.Hash
	case p.Version == 0:
		return fmt.Sprintf("%q (latest)", p.Name)
	}
	return fmt.Sprintf("%q version %d", p.Name, p.Version)
}
