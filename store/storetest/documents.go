package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func putDoc(name, format, content string, d time.Duration) *store.PutDocumentParams {
	return &store.PutDocumentParams{Name: name, Format: format, Content: []byte(content), Now: at(d)}
}

func (h *harness) put(p *store.PutDocumentParams) *store.Document {
	h.t.Helper()
	d, err := h.s.PutDocument(h.t.Context(), p)
	if err != nil {
		h.t.Fatalf("PutDocument %s: %v", p.Name, err)
	}
	return d
}

func (h *harness) getDoc(p *store.GetDocumentParams) *store.Document {
	h.t.Helper()
	d, err := h.s.GetDocument(h.t.Context(), p)
	if err != nil {
		h.t.Fatalf("GetDocument %+v: %v", p, err)
	}
	return d
}

// testDocuments: each new content of a name is its next version, stored
// under its hash; the same content again records nothing; a document is
// read back by name and version, as the latest, or by hash.
func testDocuments(t *testing.T, h *harness) {
	ctx := t.Context()
	const v1, v2 = `{"name":"research","steps":{}}`, "name: research\nsteps: {}\n"
	d1 := h.put(putDoc("research", store.DocumentJSON, v1, time.Second))
	want1 := &store.Document{Name: "research", Version: 1, Hash: store.DocumentHash([]byte(v1)), Format: store.DocumentJSON,
		Content: []byte(v1), Size: len(v1), CreatedAt: at(time.Second).Truncate(time.Microsecond)}
	diff(t, "first put", want1, d1)
	if len(d1.Hash) != 64 || strings.ToLower(d1.Hash) != d1.Hash {
		t.Fatalf("hash %q is not lower-case hex SHA-256", d1.Hash)
	}

	d2 := h.put(putDoc("research", store.DocumentYAML, v2, 2*time.Second))
	want2 := &store.Document{Name: "research", Version: 2, Hash: store.DocumentHash([]byte(v2)), Format: store.DocumentYAML,
		Content: []byte(v2), Size: len(v2), CreatedAt: at(2 * time.Second).Truncate(time.Microsecond)}
	diff(t, "second put", want2, d2)

	// The same content again (a retried submit): nothing new, the version
	// that has it, with its first time.
	again := h.put(putDoc("research", store.DocumentJSON, v1, 3*time.Second))
	diff(t, "put of version 1's content again", want1, again)
	if latest := h.getDoc(&store.GetDocumentParams{Name: "research"}); latest.Version != 2 {
		t.Fatalf("latest after a repeated put is version %d, want 2", latest.Version)
	}
	// The same content under another format is refused, writes nothing.
	_, err := h.s.PutDocument(ctx, putDoc("research", store.DocumentYAML, v1, 3*time.Second))
	wantErr(t, "the same content as another format", err, hephtype.ErrInvalidInput)

	// Content a name had before becomes a new version only under another
	// name: names are independent, and each starts at 1.
	other := h.put(putDoc("research.copy", store.DocumentJSON, v1, 4*time.Second))
	if other.Version != 1 || other.Hash != d1.Hash {
		t.Fatalf("the same content under another name = %+v, want version 1 with hash %s", other, d1.Hash)
	}

	diff(t, "get version 1", want1, h.getDoc(&store.GetDocumentParams{Name: "research", Version: 1}))
	diff(t, "get version 2", want2, h.getDoc(&store.GetDocumentParams{Name: "research", Version: 2}))
	diff(t, "get the latest", want2, h.getDoc(&store.GetDocumentParams{Name: "research"}))
	diff(t, "get by hash", want2, h.getDoc(&store.GetDocumentParams{Hash: d2.Hash}))
	// A hash two names have: the first stored, or the named one's.
	diff(t, "get a shared hash", want1, h.getDoc(&store.GetDocumentParams{Hash: d1.Hash}))
	diff(t, "get a shared hash by name", other, h.getDoc(&store.GetDocumentParams{Name: "research.copy", Hash: d1.Hash}))

	// Not found.
	missing := []*store.GetDocumentParams{
		{Name: "nope"},
		{Name: "research", Version: 3},
		{Hash: store.DocumentHash([]byte("other"))},
		{Name: "research.copy", Hash: d2.Hash},
	}
	for _, p := range missing {
		_, err := h.s.GetDocument(ctx, p)
		wantErr(t, fmt.Sprintf("GetDocument %+v", p), err, store.ErrDocumentNotFound)
	}
	// Lookups that make no sense.
	bad := []*store.GetDocumentParams{
		{},
		{Name: "research", Version: -1},
		{Name: "research", Version: 1, Hash: d1.Hash},
		{Hash: "abc"},
		{Hash: strings.ToUpper(d1.Hash)},
		{Name: "has space"},
	}
	for _, p := range bad {
		_, err := h.s.GetDocument(ctx, p)
		wantErr(t, fmt.Sprintf("GetDocument %+v", p), err, hephtype.ErrInvalidInput)
	}

	// The content handed back is the caller's to keep: changing it
	// changes nothing stored.
	d1.Content[0] = 'X'
	if got := h.getDoc(&store.GetDocumentParams{Name: "research", Version: 1}); !bytes.Equal(got.Content, []byte(v1)) {
		t.Fatalf("stored content changed with the returned copy: %q", got.Content)
	}
}

// testDocumentValidation: names follow the rule of flow names, formats
// are json or yaml, content is not empty and at most MaxDocumentSize
// bytes; nothing invalid is stored.
func testDocumentValidation(t *testing.T, h *harness) {
	ctx := t.Context()
	long := strings.Repeat("a", hephtype.MaxNameLen+1)
	cases := []struct {
		p    *store.PutDocumentParams
		want string // in the message
	}{
		{putDoc("", store.DocumentJSON, "{}", 0), "name is empty"},
		{putDoc("1st", store.DocumentJSON, "{}", 0), "start with a letter"},
		{putDoc("has space", store.DocumentJSON, "{}", 0), "' '"},
		{putDoc("a/b", store.DocumentJSON, "{}", 0), "'/'"},
		{putDoc(long, store.DocumentJSON, "{}", 0), fmt.Sprintf("the limit is %d", hephtype.MaxNameLen)},
		{putDoc("doc", "toml", "{}", 0), `format "toml"`},
		{putDoc("doc", "", "{}", 0), `format ""`},
		{putDoc("doc", store.DocumentJSON, "", 0), "content is empty"},
		{putDoc("doc", store.DocumentYAML, strings.Repeat("x", store.MaxDocumentSize+1), 0), fmt.Sprintf("limit of %d bytes", store.MaxDocumentSize)},
	}
	for _, c := range cases {
		_, err := h.s.PutDocument(ctx, c.p)
		wantErr(t, fmt.Sprintf("put %.30q", c.p.Name), err, hephtype.ErrInvalidInput)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("put %.30q: error %q does not say %q", c.p.Name, err, c.want)
		}
	}
	_, err := h.s.PutDocument(ctx, cases[len(cases)-1].p)
	wantErr(t, "put above the size limit", err, hephtype.ErrPayloadTooLarge)

	// At the limits: accepted.
	name := "A" + strings.Repeat("b", hephtype.MaxNameLen-5) + "_-.9"
	d := h.put(putDoc(name, store.DocumentYAML, strings.Repeat("x", store.MaxDocumentSize), 0))
	if d.Name != name || d.Size != store.MaxDocumentSize || d.Version != 1 {
		t.Fatalf("put at the limits = name %q size %d version %d", d.Name, d.Size, d.Version)
	}
	got := h.getDoc(&store.GetDocumentParams{Name: name})
	if len(got.Content) != store.MaxDocumentSize || got.Size != store.MaxDocumentSize {
		t.Fatalf("read back %d bytes (size %d), want %d", len(got.Content), got.Size, store.MaxDocumentSize)
	}
	page, err := h.s.ListDocuments(ctx, &store.ListDocumentsParams{})
	if err != nil {
		t.Fatalf("ListDocuments: %v", err)
	}
	if len(page.Documents) != 1 {
		t.Fatalf("invalid puts stored documents: %d listed, want the one at the limits", len(page.Documents))
	}
}

// testListDocuments: documents are listed by name, then version newest
// first, without content, one page at a time; a name filters.
func testListDocuments(t *testing.T, h *harness) {
	ctx := t.Context()
	type key struct {
		name    string
		version int
	}
	// b has 3 versions, a 2, c 1, put interleaved.
	puts := []string{"b", "a", "b", "c", "a", "b"}
	for i, n := range puts {
		h.put(putDoc(n, store.DocumentJSON, fmt.Sprintf(`{"i":%d}`, i), time.Duration(i)*time.Second))
	}
	want := []key{{"a", 2}, {"a", 1}, {"b", 3}, {"b", 2}, {"b", 1}, {"c", 1}}
	list := func(p *store.ListDocumentsParams) []key {
		t.Helper()
		var got []key
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("ListDocuments does not end")
			}
			page, err := h.s.ListDocuments(ctx, p)
			if err != nil {
				t.Fatalf("ListDocuments %+v: %v", p, err)
			}
			if p.Limit > 0 && len(page.Documents) > p.Limit {
				t.Fatalf("page of %d documents, limit %d", len(page.Documents), p.Limit)
			}
			for _, d := range page.Documents {
				if d.Content != nil {
					t.Fatalf("listed %s version %d with its content", d.Name, d.Version)
				}
				if d.Size == 0 || len(d.Hash) != 64 || d.Format != store.DocumentJSON || d.CreatedAt.IsZero() {
					t.Fatalf("listed document lacks fields: %+v", d)
				}
				got = append(got, key{d.Name, d.Version})
			}
			if page.Next == "" {
				return got
			}
			p.Cursor = page.Next
		}
	}
	for _, limit := range []int{0, 1, 2, 4, 6, 7} {
		if got := list(&store.ListDocumentsParams{Limit: limit}); !slices.Equal(got, want) {
			t.Fatalf("list with limit %d = %v, want %v", limit, got, want)
		}
	}
	if got := list(&store.ListDocumentsParams{Name: "b", Limit: 2}); !slices.Equal(got, want[2:5]) {
		t.Fatalf("list of b = %v, want %v", got, want[2:5])
	}
	if got := list(&store.ListDocumentsParams{Name: "nope"}); len(got) != 0 {
		t.Fatalf("list of a name without documents = %v", got)
	}
	// A full last page has no next cursor.
	page, err := h.s.ListDocuments(ctx, &store.ListDocumentsParams{Limit: 6})
	if err != nil || len(page.Documents) != 6 || page.Next != "" {
		t.Fatalf("list with limit 6 = %d documents, next %q, %v", len(page.Documents), page.Next, err)
	}
	_, err = h.s.ListDocuments(ctx, &store.ListDocumentsParams{Cursor: "not a cursor!"})
	wantErr(t, "list with a bad cursor", err, hephtype.ErrInvalidInput)
	_, err = h.s.ListDocuments(ctx, &store.ListDocumentsParams{Name: "bad name"})
	wantErr(t, "list with a bad name", err, hephtype.ErrInvalidInput)
}

// testConcurrentPuts: puts of different content to one name at once get
// distinct versions 1..n, none lost; puts of one content at once get one
// version.
func testConcurrentPuts(t *testing.T, h *harness) {
	const racers = 12
	docs := make([]*store.Document, racers)
	same := make([]*store.Document, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			d, err := h.s.PutDocument(t.Context(), putDoc("raced", store.DocumentJSON, fmt.Sprintf(`{"racer":%d}`, i), 0))
			if err != nil {
				t.Errorf("PutDocument racer %d: %v", i, err)
				return
			}
			docs[i] = d
		})
		wg.Go(func() {
			d, err := h.s.PutDocument(t.Context(), putDoc("same", store.DocumentJSON, `{"same":true}`, time.Duration(i)*time.Second))
			if err != nil {
				t.Errorf("PutDocument of the same content, racer %d: %v", i, err)
				return
			}
			same[i] = d
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var versions []int
	for i, d := range docs {
		versions = append(versions, d.Version)
		got := h.getDoc(&store.GetDocumentParams{Name: "raced", Version: d.Version})
		if string(got.Content) != fmt.Sprintf(`{"racer":%d}`, i) {
			t.Fatalf("version %d holds %s, racer %d put it", d.Version, got.Content, i)
		}
	}
	slices.Sort(versions)
	for i, v := range versions {
		if v != i+1 {
			t.Fatalf("versions of concurrent puts = %v, want 1..%d once each", versions, racers)
		}
	}
	for i, d := range same {
		if d.Version != 1 || !d.CreatedAt.Equal(same[0].CreatedAt) {
			t.Fatalf("racer %d putting the same content got version %d at %v, want version 1 at %v", i, d.Version, d.CreatedAt, same[0].CreatedAt)
		}
	}
	page, err := h.s.ListDocuments(t.Context(), &store.ListDocumentsParams{Name: "same"})
	if err != nil || len(page.Documents) != 1 {
		t.Fatalf("the same content put %d times at once is stored as %d versions (%v)", racers, len(page.Documents), err)
	}
}

// testPruneKeepsDocuments: PruneRuns deletes no document.
func testPruneKeepsDocuments(t *testing.T, h *harness) {
	d := h.put(putDoc("kept", store.DocumentJSON, `{}`, 0))
	h.create(at(0), newRun("r1"))
	h.mustUpdate(at(time.Second), "r1", nil, &store.Update{Status: hephtype.StatusCompleted})
	n, err := h.s.PruneRuns(t.Context(), &store.PruneParams{FinishedBefore: at(time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("PruneRuns = %d, %v; want the finished run pruned", n, err)
	}
	diff(t, "document after PruneRuns", d, h.getDoc(&store.GetDocumentParams{Hash: d.Hash}))
}
