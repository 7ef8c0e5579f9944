package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/store"
)

// Definition is what runs start from: registered in the server's
// client, published to the catalog by any process, or stored as a
// document.
type Definition struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Versions []int  `json:"versions"`
	// Latest is the highest version (0 for a workflow: see Builds).
	Latest int `json:"latest"`
	// Builds published it; Local: the server's client has its code;
	// Served: a live worker has it (Workers).
	Builds  []string `json:"builds"`
	Local   bool     `json:"local"`
	Served  bool     `json:"served"`
	Workers []string `json:"workers"`
	// Published are its catalog rows (per version, or per build of a
	// workflow).
	Published []PublishedDefinition `json:"published"`
}

// PublishedDefinition is one catalog row.
type PublishedDefinition struct {
	Version      int             `json:"version"`
	BuildID      string          `json:"build_id"`
	Hash         string          `json:"hash"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Queues       []string        `json:"queues"`
	Handlers     []string        `json:"handlers"`
	Schedules    []string        `json:"schedules"`
	PublishedAt  time.Time       `json:"published_at"`
	PublishedBy  string          `json:"published_by"`
	// Spec is set by GET /definitions/{name} only.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// DefinitionDetail is GET /definitions/{name}: a definition, with the
// specs of its catalog rows and the schedules that target it.
type DefinitionDetail struct {
	Definition
	Schedules []string `json:"schedules"`
}

func definitionJSON(d *hephaestus.Definition) Definition {
	out := Definition{Kind: d.Kind, Name: d.Name, Versions: nonNil(d.Versions), Latest: d.Latest, Builds: nonNil(d.Builds),
		Local: d.Local, Served: d.Served, Workers: nonNil(d.Workers), Published: []PublishedDefinition{}}
	for _, p := range d.Published {
		out.Published = append(out.Published, PublishedDefinition{Version: p.Version, BuildID: p.BuildID, Hash: p.Hash,
			InputSchema: p.InputSchema, OutputSchema: p.OutputSchema, Queues: nonNil(p.Queues), Handlers: nonNil(p.Handlers),
			Schedules: nonNil(p.Schedules), PublishedAt: p.PublishedAt.UTC(), PublishedBy: p.PublishedBy, Spec: p.Spec})
	}
	return out
}

func (s *Server) definitions(c *call) error {
	ds, err := s.cfg.Client.Definitions(c.ctx())
	if err != nil {
		return err
	}
	out := make([]Definition, 0, len(ds))
	for i := range ds {
		out = append(out, definitionJSON(&ds[i]))
	}
	return c.json(http.StatusOK, out)
}

// definition answers GET /definitions/{name} (?kind= picks one kind when
// several have the name).
func (s *Server) definition(c *call) error {
	q := c.query()
	kind := q.str("kind")
	switch kind {
	case "", "flow", "workflow", "job", "document":
	default:
		q.fail("kind", `%q is not a kind: use "flow", "workflow", "job" or "document"`, kind)
	}
	if err := q.err(); err != nil {
		return err
	}
	name := c.r.PathValue("name")
	d, err := s.cfg.Client.Definition(c.ctx(), kind, name)
	if err != nil {
		return s.unknownDefinition(c, kind, name, false, err)
	}
	out := DefinitionDetail{Definition: definitionJSON(d), Schedules: []string{}}
	ids, err := s.schedulesOf(c, d)
	if err != nil {
		return err
	}
	out.Schedules = append(out.Schedules, ids...)
	return c.json(http.StatusOK, out)
}

// schedulesOf returns the ids of the schedules that target d.
func (s *Server) schedulesOf(c *call, d *hephaestus.Definition) ([]string, error) {
	var ids []string
	after := ""
	for {
		ss, err := s.cfg.Client.ListSchedules(c.ctx(), after, 1000)
		if err != nil {
			return nil, err
		}
		for _, sc := range ss {
			if sc.TargetName == d.Name && string(sc.Target) == d.Kind {
				ids = append(ids, sc.ID)
			}
		}
		if len(ss) < 1000 {
			return ids, nil
		}
		after = ss[len(ss)-1].ID
	}
}

// graph draws a definition's graph: JSON (graphtext.Graph) by default,
// Mermaid or DOT text with ?format.
func (s *Server) graph(c *call) error {
	q := c.query()
	version := q.integer("version", 0, 0, 1<<31-1)
	format := q.str("format")
	switch format {
	case "", "json", "mermaid", "dot":
	default:
		q.fail("format", `%q is not a format: use "json", "mermaid" or "dot"`, format)
	}
	if err := q.err(); err != nil {
		return err
	}
	f, err := s.cfg.Client.Flow(c.ctx(), c.r.PathValue("name"), version)
	if err != nil {
		return s.unknownDefinition(c, "", c.r.PathValue("name"), false, err)
	}
	g := graphtext.Of(f)
	switch format {
	case "mermaid":
		return c.text("text/vnd.mermaid; charset=utf-8", graphtext.Mermaid(g))
	case "dot":
		return c.text("text/vnd.graphviz; charset=utf-8", graphtext.DOT(g))
	}
	return c.json(http.StatusOK, g)
}

// text writes a 200 text answer.
func (c *call) text(contentType, body string) error {
	c.wrote = true
	c.w.Header().Set("Content-Type", contentType)
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write([]byte(body))
	return nil
}

// Document is a stored flow document.
type Document struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	Hash      string    `json:"hash"`
	Format    string    `json:"format"`
	Size      int       `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	// Content is the document as submitted; only GET /documents/{name}
	// returns it.
	Content *string `json:"content,omitempty"`
}

func documentJSON(d *hephaestus.Document) *Document {
	out := &Document{Name: d.Name, Version: d.Version, Hash: d.Hash, Format: d.Format, Size: d.Size, CreatedAt: d.CreatedAt.UTC()}
	if d.Content != nil {
		s := string(d.Content)
		out.Content = &s
	}
	return out
}

// documentBody is the body of POST /documents and /documents/validate.
type documentBody struct {
	Name    string `json:"name"`
	Format  string `json:"format"`
	Content string `json:"content"`
}

// check validates the body's format and content: an invalid document is
// a 422 with its positioned errors.
func (s *Server) checkDocument(b *documentBody, named bool) error {
	if named && b.Name == "" {
		return fieldProblem("name", "is required")
	}
	switch b.Format {
	case hephaestus.DocumentJSON:
		if !json.Valid([]byte(b.Content)) {
			return &Problem{Status: http.StatusUnprocessableEntity, Kind: kindUnprocessable, Detail: "the document is invalid",
				Errors: []FieldError{{Line: 1, Column: 1, Message: `the content is not JSON; send format "yaml" for YAML`}}}
		}
	case hephaestus.DocumentYAML:
	default:
		return fieldProblem("format", fmt.Sprintf(`%q is not a format: use "json" or "yaml"`, b.Format))
	}
	if b.Content == "" {
		return fieldProblem("content", "is required")
	}
	if len(b.Content) > hephaestus.MaxDocumentSize {
		return &Problem{Status: http.StatusRequestEntityTooLarge, Kind: kindTooLarge, Detail: fmt.Sprintf("a document is at most %d bytes", hephaestus.MaxDocumentSize)}
	}
	name := b.Name
	if name == "" {
		name = "document"
	}
	return s.cfg.Client.ValidateDocument(name, []byte(b.Content))
}

func (s *Server) putDocument(c *call) error {
	var b documentBody
	if err := c.decode(&b, false); err != nil {
		return err
	}
	c.target = b.Name
	if err := s.checkDocument(&b, true); err != nil {
		return err
	}
	d, err := s.cfg.Client.PutDocument(c.ctx(), b.Name, b.Format, []byte(b.Content))
	if err != nil {
		return err
	}
	c.w.Header().Set("Location", "/api/v1/documents/"+url.PathEscape(d.Name)+fmt.Sprintf("?version=%d", d.Version))
	d.Content = nil
	return c.json(http.StatusCreated, documentJSON(d))
}

// Validation is the answer to a valid document.
type Validation struct {
	Valid bool `json:"valid"`
}

func (s *Server) validateDocument(c *call) error {
	var b documentBody
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if err := s.checkDocument(&b, false); err != nil {
		return err
	}
	return c.json(http.StatusOK, Validation{Valid: true})
}

// DocumentList is a page of documents, without their content.
type DocumentList struct {
	Documents []*Document `json:"documents"`
	Next      string      `json:"next"`
}

func (s *Server) listDocuments(c *call) error {
	q := c.query()
	opts := &hephaestus.ListDocumentsOptions{Name: q.str("name"), Limit: q.integer("limit", 100, 1, 1000), Cursor: q.str("cursor")}
	if cur := opts.Cursor; cur != "" {
		if _, _, err := store.DecodeDocumentCursor(cur); err != nil {
			q.fail("cursor", "%q is not a cursor of this list: pass the next of a page", cur)
		}
	}
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.cfg.Client.ListDocuments(c.ctx(), opts)
	if err != nil {
		return err
	}
	out := &DocumentList{Documents: make([]*Document, 0, len(page.Documents)), Next: page.Next}
	for _, d := range page.Documents {
		out.Documents = append(out.Documents, documentJSON(d))
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) getDocument(c *call) error {
	q := c.query()
	version := q.integer("version", 0, 0, 1<<31-1)
	if err := q.err(); err != nil {
		return err
	}
	d, err := s.cfg.Client.GetDocument(c.ctx(), c.r.PathValue("name"), version)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, documentJSON(d))
}
