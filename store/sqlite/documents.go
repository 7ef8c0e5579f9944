package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

const (
	documentMeta = "name, version, hash, format, size, created_at"
	documentCols = documentMeta + ", content"

	qDocumentByHashW = "SELECT version, format, size, created_at FROM documents WHERE name = ? AND hash = ?"
	qDocumentLastW   = "SELECT COALESCE(MAX(version), 0) FROM documents WHERE name = ?"
	qDocumentInsertW = "INSERT INTO documents (" + documentCols + ") VALUES (?, ?, ?, ?, ?, ?, ?)"
)

// PutDocument stores a document as the next version of its name, unless
// the name has its content already, in one write transaction. The writer
// is one connection and its transactions are IMMEDIATE, so two puts (of
// this process or another) never read the same last version; the primary
// key would refuse a second one if they did.
func (s *Store) PutDocument(ctx context.Context, p *store.PutDocumentParams) (*store.Document, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put document: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("put document: %w", err)
	}
	now := truncate(p.Now)
	hash := store.DocumentHash(p.Content)
	var out *store.Document
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			out, refusal = nil, nil
			w.arg(p.Name)
			w.arg(hash)
			found, err := w.adhocRow(qDocumentByHashW, 4)
			if err != nil {
				return err
			}
			if found {
				d := &store.Document{Name: p.Name, Version: int(vInt(w.dest[0])), Hash: hash, Format: vString(w.dest[1]),
					Size: int(vInt(w.dest[2])), CreatedAt: fromMicros(vInt(w.dest[3]))}
				if d.Format != p.Format {
					refusal = fmt.Errorf("put document: %w: document %q version %d has this content as %s; it is not stored again as %s",
						hephtype.ErrInvalidInput, p.Name, d.Version, d.Format, p.Format)
					return nil
				}
				d.Content = append([]byte(nil), p.Content...)
				out = d
				return nil
			}
			w.arg(p.Name)
			if _, err := w.adhocRow(qDocumentLastW, 1); err != nil {
				return err
			}
			version := vInt(w.dest[0]) + 1
			w.arg(p.Name)
			w.arg(version)
			w.arg(hash)
			w.arg(p.Format)
			w.arg(int64(len(p.Content)))
			w.arg(micros(now))
			w.arg(p.Content)
			if err := w.adhocExec(qDocumentInsertW); err != nil {
				return fmt.Errorf("insert document: %w", err)
			}
			out = &store.Document{Name: p.Name, Version: int(version), Hash: hash, Format: p.Format,
				Content: append([]byte(nil), p.Content...), Size: len(p.Content), CreatedAt: now}
			return nil
		})
	})
	if err != nil {
		return nil, s.fail("put document", err)
	}
	return out, refusal
}

// adhocRow runs a statement that is not among the writer's fixed ones
// (textStmt) with the collected arguments and returns its first row in
// w.dest (of n columns), false when there is none.
func (w *wconn) adhocRow(q string, n int) (bool, error) {
	rows, err := w.queryText(q)
	if err != nil {
		return false, err
	}
	return w.row(rows, n)
}

// adhocExec runs a statement that is not among the writer's fixed
// ones (textStmt) with the collected arguments.
func (w *wconn) adhocExec(q string) error {
	_, err := w.execText(q)
	return err
}

// GetDocument returns a document with its content.
func (s *Store) GetDocument(ctx context.Context, p *store.GetDocumentParams) (*store.Document, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get document: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("get document: %w", err)
	}
	q := "SELECT " + documentCols + " FROM documents WHERE "
	var args []any
	switch {
	case p.Hash != "" && p.Name != "":
		q, args = q+"name = ? AND hash = ?", []any{p.Name, p.Hash}
	case p.Hash != "":
		q, args = q+"hash = ? ORDER BY created_at, name LIMIT 1", []any{p.Hash}
	case p.Version == 0:
		q, args = q+"name = ? ORDER BY version DESC LIMIT 1", []any{p.Name}
	default:
		q, args = q+"name = ? AND version = ?", []any{p.Name, p.Version}
	}
	var d store.Document
	var created int64
	err := s.reader.QueryRowContext(ctx, q, args...).Scan(&d.Name, &d.Version, &d.Hash, &d.Format, &d.Size, &created, &d.Content)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get document %s: %w", p.Describe(), store.ErrDocumentNotFound)
	}
	if err != nil {
		return nil, s.fail("get document", err)
	}
	d.CreatedAt = fromMicros(created)
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
		w.add("name = ?", p.Name)
	}
	if p.Cursor != "" {
		name, version, err := store.DecodeDocumentCursor(p.Cursor)
		if err != nil {
			return nil, fmt.Errorf("list documents: %w", err)
		}
		w.add("(name > ? OR name = ? AND version < ?)", name, name, version)
	}
	q := "SELECT " + documentMeta + " FROM documents" + w.clause() + " ORDER BY name, version DESC LIMIT " + w.param(limit+1)
	args := w.args
	rows, err := s.reader.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.fail("list documents", err)
	}
	defer rows.Close()
	page := &store.DocumentPage{Documents: make([]*store.Document, 0, min(limit, 64))}
	for rows.Next() {
		var d store.Document
		var created int64
		if err := rows.Scan(&d.Name, &d.Version, &d.Hash, &d.Format, &d.Size, &created); err != nil {
			return nil, s.fail("list documents", err)
		}
		d.CreatedAt = fromMicros(created)
		page.Documents = append(page.Documents, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list documents", err)
	}
	if len(page.Documents) > limit {
		page.Documents = page.Documents[:limit]
		last := page.Documents[limit-1]
		page.Next = store.EncodeDocumentCursor(last.Name, last.Version)
	}
	return page, nil
}
