package dashboard

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"

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
	var defs []server.Definition
	if err := d.get(r, "/api/v1/definitions", nil, &defs); err != nil {
		return "", nil, err
	}
	data := &definitionData{}
	found := false
	for _, def := range defs {
		if def.Name == name {
			data.Definition, found = def, true
			break
		}
	}
	if !found {
		return "", nil, &pageError{status: http.StatusNotFound, msg: "no flow, job kind, workflow or document is named " + strconv.Quote(name)}
	}
	data.Version = data.Latest
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", nil, badRequest("version %q is not a version number (1, 2, …)", v)
		}
		data.Version = n
	}
	if data.Kind == "workflow" {
		return "definition", data, nil
	}
	q := url.Values{"version": {strconv.Itoa(data.Version)}}
	var g graphtext.Graph
	err := d.get(r, "/api/v1/definitions/"+url.PathEscape(name)+"/graph", q, &g)
	var ae *apiError
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
