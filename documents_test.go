package hephaestus_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// docClient opens a client without workers on the SQLite file path.
func docClient(t *testing.T, path string, clk clock.Clock) *heph.Client {
	t.Helper()
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	c, err := heph.New(&heph.Config{Store: st, Clock: clk})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Stop(context.Background())
		st.Close()
	})
	return c
}

// Documents put through the client are versioned by content, read back
// by name and version, as the latest or by hash, listed page by page, and
// still there after the store is opened again.
func TestClientDocuments(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "docs.db")
	start := time.Date(2032, 5, 6, 7, 8, 9, 0, time.UTC)
	clk := clock.NewFake(start)
	c := docClient(t, path, clk)

	const v1, v2 = `{"name":"research"}`, "name: research\nsteps: {}\n"
	d1, err := c.PutDocument(ctx, "research", heph.DocumentJSON, []byte(v1))
	if err != nil {
		t.Fatalf("PutDocument: %v", err)
	}
	if d1.Name != "research" || d1.Version != 1 || d1.Format != heph.DocumentJSON || string(d1.Content) != v1 ||
		d1.Size != len(v1) || len(d1.Hash) != 64 || !d1.CreatedAt.Equal(start) {
		t.Fatalf("first put = %+v", d1)
	}
	clk.Advance(time.Minute)
	// A retried submit: the same version, nothing new.
	again, err := c.PutDocument(ctx, "research", heph.DocumentJSON, []byte(v1))
	if err != nil || again.Version != 1 || again.Hash != d1.Hash || !again.CreatedAt.Equal(start) {
		t.Fatalf("put of the same content = %+v, %v; want version 1 of %v", again, err, start)
	}
	d2, err := c.PutDocument(ctx, "research", heph.DocumentYAML, []byte(v2))
	if err != nil || d2.Version != 2 || d2.Hash == d1.Hash || !d2.CreatedAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("put of new content = %+v, %v; want version 2", d2, err)
	}
	if _, err := c.PutDocument(ctx, "notes", heph.DocumentJSON, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}

	check := func(c *heph.Client) {
		t.Helper()
		got, err := c.GetDocument(ctx, "research", 1)
		if err != nil || string(got.Content) != v1 || got.Version != 1 || got.Format != heph.DocumentJSON {
			t.Fatalf("GetDocument version 1 = %+v, %v", got, err)
		}
		got, err = c.GetDocument(ctx, "research", 0)
		if err != nil || string(got.Content) != v2 || got.Version != 2 || got.Format != heph.DocumentYAML {
			t.Fatalf("GetDocument latest = %+v, %v", got, err)
		}
		got, err = c.GetDocumentByHash(ctx, d1.Hash)
		if err != nil || string(got.Content) != v1 || got.Name != "research" || got.Version != 1 {
			t.Fatalf("GetDocumentByHash = %+v, %v", got, err)
		}
		var names []string
		var cursor string
		for pages := 0; pages < 5; pages++ {
			l, err := c.ListDocuments(ctx, &heph.ListDocumentsOptions{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatalf("ListDocuments: %v", err)
			}
			for _, d := range l.Documents {
				if d.Content != nil || d.Size == 0 {
					t.Fatalf("listed %+v: want the size without the content", d)
				}
				names = append(names, d.Name+"@"+string(rune('0'+d.Version)))
			}
			if cursor = l.Next; cursor == "" {
				break
			}
		}
		if got, want := strings.Join(names, " "), "notes@1 research@2 research@1"; got != want {
			t.Fatalf("listed %s, want %s", got, want)
		}
		l, err := c.ListDocuments(ctx, &heph.ListDocumentsOptions{Name: "research", Limit: 1})
		if err != nil || len(l.Documents) != 1 || l.Documents[0].Version != 2 || l.Next == "" {
			t.Fatalf("first page of research = %+v, %v", l, err)
		}
	}
	check(c)
	// Another process opening the same file reads the same documents.
	check(docClient(t, path, clk))

	if _, err := c.GetDocument(ctx, "research", 3); !errors.Is(err, heph.ErrDocumentNotFound) {
		t.Fatalf("GetDocument of a missing version: %v", err)
	}
	if _, err := c.GetDocumentByHash(ctx, strings.Repeat("0", 64)); !errors.Is(err, heph.ErrDocumentNotFound) {
		t.Fatalf("GetDocumentByHash of a missing hash: %v", err)
	}
}

// Bad input fails before anything is stored, with an error that says
// what is wrong.
func TestClientDocumentErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := docClient(t, filepath.Join(t.TempDir(), "docs.db"), clock.NewFake(time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC)))
	for _, tc := range []struct {
		name, format string
		content      []byte
		want         error
		says         string
	}{
		{"bad name", heph.DocumentJSON, []byte("{}"), heph.ErrInvalidInput, `byte 3 (' ')`},
		{"doc", "xml", []byte("<a/>"), heph.ErrInvalidInput, `format "xml"`},
		{"doc", heph.DocumentJSON, nil, heph.ErrInvalidInput, "content is empty"},
		{"doc", heph.DocumentYAML, make([]byte, heph.MaxDocumentSize+1), heph.ErrPayloadTooLarge, "limit of 1048576 bytes"},
	} {
		_, err := c.PutDocument(ctx, tc.name, tc.format, tc.content)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("PutDocument(%q, %q, %d bytes) = %v; want %v saying %q and naming the document", tc.name, tc.format, len(tc.content), err, tc.want, tc.says)
		}
	}
	if _, err := c.GetDocumentByHash(ctx, "not-a-hash"); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("GetDocumentByHash of a malformed hash: %v", err)
	}
	if _, err := c.ListDocuments(ctx, &heph.ListDocumentsOptions{Cursor: "??"}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("ListDocuments with a bad cursor: %v", err)
	}
	l, err := c.ListDocuments(ctx, nil)
	if err != nil || len(l.Documents) != 0 {
		t.Fatalf("after failed puts: %d documents listed, %v", len(l.Documents), err)
	}
}
