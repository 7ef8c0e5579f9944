package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

const (
	documentMeta = "name, version, hash, format, size, created_at"
	documentCols = documentMeta + ", content"
)

// maxPutRounds bounds the rounds of a PutDocument: a round that finds its
// version taken (a concurrent put committed it) reads again. Each such
// round means another put of the name committed: the bound is far above
// what concurrent submits of one name produce.
const maxPutRounds = 100

// documentQueries are the statements of documents, in the store's schema.
type documentQueries struct {
	byHash, last, insert string
}

func newDocumentQueries(schema string) *documentQueries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return &documentQueries{
		byHash: s("SELECT version, format, size, created_at FROM §documents WHERE name = $1 AND hash = $2"),
		last:   s("SELECT COALESCE(MAX(version), 0) FROM §documents WHERE name = $1"),
		// A conflict on (name, version) or (name, hash) inserts nothing:
		// the insert waits for the put that holds the key, and the round
		// reads again.
		insert: s("INSERT INTO §documents (" + documentCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"),
	}
}

// PutDocument stores a document as the next version of its name, unless
// the name has its content already. Concurrent puts of one name race for
// the next version under the table's unique keys: the loser's insert
// writes nothing, and it reads the name again (READ COMMITTED: each
// statement sees what committed before it), in the same transaction.
// Running it again after a lost COMMIT finds the content stored and
// returns it.
func (s *Store) PutDocument(ctx context.Context, p *store.PutDocumentParams) (*store.Document, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put document: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("put document: %w", err)
	}
	q := newDocumentQueries(s.schema)
	now := truncate(p.Now)
	hash := store.DocumentHash(p.Content)
	var out *store.Document
	var refusal error
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out, refusal = nil, nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for range maxPutRounds {
				d := &store.Document{Name: p.Name, Hash: hash}
				var version int64
				var size int64
				err := tx.QueryRow(ctx, q.byHash, p.Name, hash).Scan(&version, &d.Format, &size, &d.CreatedAt)
				if err == nil {
					d.Version, d.Size, d.CreatedAt = int(version), int(size), d.CreatedAt.UTC()
					if d.Format != p.Format {
						refusal = fmt.Errorf("put document: %w: document %q version %d has this content as %s; it is not stored again as %s",
							hephtype.ErrInvalidInput, p.Name, d.Version, d.Format, p.Format)
						return nil
					}
					d.Content = append([]byte(nil), p.Content...)
					out = d
					return nil
				}
				if !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				if err := tx.QueryRow(ctx, q.last, p.Name).Scan(&version); err != nil {
					return err
				}
				version++
				tag, err := tx.Exec(ctx, q.insert, p.Name, version, hash, p.Format, int64(len(p.Content)), now, p.Content)
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 1 {
					out = &store.Document{Name: p.Name, Version: int(version), Hash: hash, Format: p.Format,
						Content: append([]byte(nil), p.Content...), Size: len(p.Content), CreatedAt: now}
					return nil
				}
			}
			return fmt.Errorf("document %q: no free version after %d rounds of concurrent puts", p.Name, maxPutRounds)
		})
	})
	if err != nil {
		return nil, s.fail("put document", err)
	}
	return out, refusal
}

// GetDocument returns a document with its content.
func (s *Store) GetDocument(ctx context.Context, p *store.GetDocumentParams) (*store.Document, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get document: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("get document: %w", err)
	}
	q := "SELECT " + documentCols + ` FROM "` + s.schema + `".documents WHERE `
	var args []any
	switch {
	case p.Hash != "" && p.Name != "":
		q, args = q+"name = $1 AND hash = $2", []any{p.Name, p.Hash}
	case p.Hash != "":
		q, args = q+"hash = $1 ORDER BY created_at, name LIMIT 1", []any{p.Hash}
	case p.Version == 0:
		q, args = q+"name = $1 ORDER BY version DESC LIMIT 1", []any{p.Name}
	default:
		q, args = q+"name = $1 AND version = $2", []any{p.Name, int64(p.Version)}
	}
	var d *store.Document
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		d, err = scanDocument(s.pool.QueryRow(ctx, q, args...), true)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get document %s: %w", p.Describe(), store.ErrDocumentNotFound)
	}
	if err != nil {
		return nil, s.fail("get document", err)
	}
	return d, nil
}

func scanDocument(row pgx.Row, content bool) (*store.Document, error) {
	var (
		d             store.Document
		version, size int64
		created       time.Time
	)
	dest := []any{&d.Name, &version, &d.Hash, &d.Format, &size, &created}
	if content {
		dest = append(dest, &d.Content)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	d.Version, d.Size, d.CreatedAt = int(version), int(size), created.UTC()
	return &d, nil
}

// ListDocuments returns documents without their content, by name, then
// version, newest first.
func (s *Store) ListDocuments(ctx context.Context, p *store.ListDocumentsParams) (*store.DocumentPage, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	limit := store.DocumentLimit(p.Limit)
	w := &where{}
	if p.Name != "" {
		if err := store.CheckDocumentName(p.Name); err != nil {
			return nil, fmt.Errorf("list documents: %w", err)
		}
		w.add("name = $?", p.Name)
	}
	if p.Cursor != "" {
		name, version, err := store.DecodeDocumentCursor(p.Cursor)
		if err != nil {
			return nil, fmt.Errorf("list documents: %w", err)
		}
		n := w.param(name)
		w.add("(name > "+n+" OR name = "+n+" AND version < $?)", int64(version))
	}
	q := "SELECT " + documentMeta + ` FROM "` + s.schema + `".documents` + w.clause() + " ORDER BY name, version DESC LIMIT " + w.param(int64(limit+1))
	args := w.args
	var page *store.DocumentPage
	err := s.idempotent(ctx, func(ctx context.Context) error {
		page = &store.DocumentPage{Documents: make([]*store.Document, 0, min(limit, 64))}
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDocument(rows, false)
			if err != nil {
				return err
			}
			page.Documents = append(page.Documents, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("list documents", err)
	}
	if len(page.Documents) > limit {
		page.Documents = page.Documents[:limit]
		last := page.Documents[limit-1]
		page.Next = store.EncodeDocumentCursor(last.Name, last.Version)
	}
	return page, nil
}
