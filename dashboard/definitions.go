package dashboard

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

// definitionsData is the definitions page's.
type definitionsData struct {
	Definitions []server.Definition
}

func (definitionsData) PageTitle() string { return "Definitions" }

// definitionsPage lists the flows, job kinds, workflows and documents,
// with a form to validate and submit a document.
func (d *Dashboard) definitionsPage(r *http.Request) (string, any, error) {
	data := &definitionsData{}
	if err := d.get(r, "/api/v1/definitions", nil, &data.Definitions); err != nil {
		return "", nil, err
	}
	return "definitions", data, nil
}

// definitionData is a definition's page.
type definitionData struct {
	server.Definition
	// Schedules target it (GET /definitions/{name}).
	Schedules []string
	// Shown is the catalog row of the version shown (or the newest build
	// of a workflow), nil when it was not published.
	Shown *server.PublishedDefinition
	// Fields are the Start run form's, one per top-level property of the
	// input schema; Raw: the form takes raw JSON only (no schema, or one
	// it cannot make fields of).
	Fields []startField
	Raw    bool
	// Version is the version shown (0 for a workflow).
	Version int
	// Picture is the DAG of a flow, job kind or document; Problem says
	// why there is none (a stored document that does not compile here).
	Picture template.HTML
	Steps   int
	Problem *server.Problem
	// Document is a document's version, with its content.
	Document *server.Document
}

func (d *definitionData) PageTitle() string { return d.Name }

// definitionPage shows a definition's version: its DAG and, for a
// document, its source.
func (d *Dashboard) definitionPage(r *http.Request) (string, any, error) {
	name := r.PathValue("name")
	var detail server.DefinitionDetail
	var ae *apiError
	if err := d.get(r, "/api/v1/definitions/"+url.PathEscape(name), nil, &detail); err != nil {
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return "", nil, &pageError{status: http.StatusNotFound, msg: "no flow, job kind, workflow or document is named " + strconv.Quote(name)}
		}
		return "", nil, err
	}
	data := &definitionData{Definition: detail.Definition, Schedules: detail.Schedules}
	data.Version = data.Latest
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", nil, badRequest("version %q is not a version number (1, 2, …)", v)
		}
		data.Version = n
	}
	data.startForm()
	if data.Kind == "workflow" {
		return "definition", data, nil
	}
	q := url.Values{"version": {strconv.Itoa(data.Version)}}
	var g graphtext.Graph
	err := d.get(r, "/api/v1/definitions/"+url.PathEscape(name)+"/graph", q, &g)
	switch {
	case err == nil:
		data.Picture, data.Steps = dagSVG(&g), steps(&g)
	case errors.As(err, &ae) && ae.Status != http.StatusUnauthorized:
		data.Problem = &ae.Problem
	default:
		return "", nil, err
	}
	if data.Kind == "document" {
		data.Document = &server.Document{}
		if err := d.get(r, "/api/v1/documents/"+url.PathEscape(name), q, data.Document); err != nil {
			return "", nil, err
		}
	}
	return "definition", data, nil
}

// steps counts a graph's steps (not its start and done nodes).
func steps(g *graphtext.Graph) int {
	n := 0
	for _, node := range g.Nodes {
		if node.Kind != graphtext.KindStart && node.Kind != graphtext.KindDone {
			n++
		}
	}
	return n
}

// startField is a field of the Start run form: a top-level property of
// the input schema.
type startField struct {
	Name string
	// Type is the property's JSON type: string, integer, number,
	// boolean, or json for anything else (typed as JSON).
	Type     string
	Required bool
}

// startForm picks the catalog row shown and builds the Start run form's
// fields from its input schema: a field per top-level property with a
// plain type, raw JSON for the rest; raw JSON only without a schema of
// an object.
func (d *definitionData) startForm() {
	for i := range d.Published {
		p := &d.Published[i]
		// A workflow's builds are listed newest first.
		if (d.Kind == "workflow" && d.Shown == nil) || (d.Kind != "workflow" && p.Version == d.Version) {
			d.Shown = p
		}
	}
	d.Raw = true
	if d.Shown == nil || len(d.Shown.InputSchema) == 0 {
		return
	}
	var sch struct {
		Type       any `json:"type"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(d.Shown.InputSchema, &sch) != nil || sch.Type != "object" || len(sch.Properties) == 0 {
		return
	}
	for name, p := range sch.Properties {
		t, _ := p.Type.(string)
		switch t {
		case "string", "integer", "number", "boolean":
		default:
			t = "json"
		}
		d.Fields = append(d.Fields, startField{Name: name, Type: t, Required: slices.Contains(sch.Required, name)})
	}
	slices.SortFunc(d.Fields, func(a, b startField) int { return strings.Compare(a.Name, b.Name) })
	d.Raw = false
}
