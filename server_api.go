package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/store"
)

// What the HTTP API (package server) needs to know of a client that a
// program linking the library reads from its own code: the definitions
// registered, a definition's flow (for its graph), and the validation of
// a document with the client's actions.

// Definition names what runs start from: a flow, a workflow, a job kind
// or a stored document, as this client registered it or as any process
// of the deployment published it to the catalog.
type Definition struct {
	// Kind is "flow", "workflow", "job" or "document".
	Kind string
	Name string
	// Versions are the versions of a flow or job kind (registered here or
	// published), or the stored versions of a document, ascending; a
	// workflow has none.
	Versions []int
	// Latest is the highest of Versions (0 for a workflow, which has
	// Builds instead).
	Latest int
	// Builds are the build ids that published it (Config.BuildID): for a
	// workflow one per build, for a flow or job kind the first publisher
	// of each version.
	Builds []string
	// Local: registered in this client.
	Local bool
	// Served: a live worker of some process has its code; Workers are
	// their ids.
	Served  bool
	Workers []string
	// Published are its catalog rows: one per version of a flow or job
	// kind, one per build of a workflow, oldest version first.
	Published []PublishedDefinition
}

// PublishedDefinition is one row of the catalog.
type PublishedDefinition struct {
	Version int
	BuildID string
	// Hash identifies the content.
	Hash string
	// InputSchema and OutputSchema are JSON Schemas derived from the Go
	// types (nil when unknown).
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Queues its tasks go to; Handlers a worker needs to run them;
	// Schedules the ids of the schedules declared with it.
	Queues    []string
	Handlers  []string
	Schedules []string
	// PublishedAt and PublishedBy (a worker id) tell who stored it first.
	PublishedAt time.Time
	PublishedBy string
	// Spec is the definition as data (a flow's steps and edges, a job
	// kind's insert options, a workflow's messages); Client.Definition
	// sets it, Definitions leaves it nil.
	Spec json.RawMessage
}

// Definitions lists the flows, job kinds and workflows this client has
// registered or any process published to the catalog, and the documents
// stored, by kind then name. A document registered as a flow (it ran
// here) is listed as a document.
func (c *Client) Definitions(ctx context.Context) ([]Definition, error) {
	return c.definitions(ctx, "", false)
}

// Definition returns one definition of Definitions by name (and kind,
// when not empty), with its catalog rows' specs; ErrFlowNotFound when
// there is none.
func (c *Client) Definition(ctx context.Context, kind, name string) (*Definition, error) {
	ds, err := c.definitions(ctx, name, true)
	if err != nil {
		return nil, err
	}
	for i := range ds {
		if kind == "" || ds[i].Kind == kind {
			return &ds[i], nil
		}
	}
	return nil, fmt.Errorf("%w: no definition %q%s is registered here, published to the catalog or stored as a document", ErrFlowNotFound, name, kindSuffix(kind))
}

func kindSuffix(kind string) string {
	if kind == "" {
		return ""
	}
	return " of kind " + kind
}

// definitions merges what is registered here, the catalog and the stored
// documents (of one name, when not empty).
func (c *Client) definitions(ctx context.Context, only string, specs bool) ([]Definition, error) {
	docs, err := c.storedDocuments(ctx, only)
	if err != nil {
		return nil, err
	}
	type key struct{ kind, name string }
	defs := map[key]*Definition{}
	get := func(kind, name string) *Definition {
		d := defs[key{kind, name}]
		if d == nil {
			d = &Definition{Kind: kind, Name: name}
			defs[key{kind, name}] = d
		}
		return d
	}
	for _, h := range c.claimHandlers() {
		kind, name, _ := strings.Cut(h, ":")
		switch kind {
		case "flow":
			i := strings.LastIndexByte(name, '@')
			v, err := strconv.Atoi(name[i+1:])
			if i < 0 || err != nil || (only != "" && name[:i] != only) {
				continue
			}
			if _, isDoc := docs[name[:i]]; !isDoc {
				kind := "flow"
				if _, ok := c.kinds.Load(name[:i]); ok {
					kind = "job"
				}
				d := get(kind, name[:i])
				d.Versions, d.Local = append(d.Versions, v), true
			}
		case "workflow":
			if only == "" || name == only {
				get("workflow", name).Local = true
			}
		}
	}
	rows, err := c.cfg.Store.ListDefinitions(ctx, &store.ListDefinitionsParams{Name: only})
	if err != nil {
		return nil, fmt.Errorf("list definitions: %w", err)
	}
	for _, r := range rows {
		d := get(r.Kind, r.Name)
		if r.Kind != store.DefinitionWorkflow {
			d.Versions = append(d.Versions, r.Version)
		}
		if r.BuildID != "" && !slices.Contains(d.Builds, r.BuildID) {
			d.Builds = append(d.Builds, r.BuildID)
		}
		p := PublishedDefinition{Version: r.Version, BuildID: r.BuildID, Hash: r.Hash, InputSchema: r.InputSchema, OutputSchema: r.OutputSchema,
			Queues: r.Queues, Handlers: r.Handlers, Schedules: r.Schedules, PublishedAt: r.PublishedAt, PublishedBy: r.PublishedBy}
		if specs {
			p.Spec = r.Spec
		}
		d.Published = append(d.Published, p)
	}
	for name, vs := range docs {
		d := get("document", name)
		d.Versions = vs
	}
	workers, _ := c.cfg.Store.ListWorkers(ctx, &store.ListWorkersParams{Now: c.cfg.Clock.Now()})
	out := make([]Definition, 0, len(defs))
	for _, d := range defs {
		d.Versions = sortedVersions(d.Versions)
		if n := len(d.Versions); n > 0 {
			d.Latest = d.Versions[n-1]
		}
		for _, w := range workers {
			if slices.ContainsFunc(w.Handlers, func(h string) bool { return servesDefinition(d, h) }) {
				d.Served, d.Workers = true, append(d.Workers, w.ID)
			}
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// servesDefinition reports whether a worker's handler runs d's tasks.
func servesDefinition(d *Definition, h string) bool {
	if d.Kind == "workflow" {
		return h == store.WorkflowHandler(d.Name)
	}
	return strings.HasPrefix(h, "flow:"+d.Name+"@")
}

// storedDocuments are the stored documents' versions, by name (of one
// name, when not empty).
func (c *Client) storedDocuments(ctx context.Context, only string) (map[string][]int, error) {
	docs := map[string][]int{}
	var cursor string
	for {
		page, err := c.ListDocuments(ctx, &ListDocumentsOptions{Name: only, Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("list definitions: %w", err)
		}
		for _, d := range page.Documents {
			docs[d.Name] = append(docs[d.Name], d.Version)
		}
		if page.Next == "" {
			return docs, nil
		}
		cursor = page.Next
	}
}

func sortedVersions(vs []int) []int {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return slices.Compact(vs)
}

// Flow returns the flow a definition runs as: a stored document's
// version compiled with the client's actions (RegisterDocuments), or else
// a registered flow (job kinds included). Version 0 is the latest. It
// fails with ErrFlowNotFound when the name is neither (a workflow has no
// flow), and with the document's positioned errors (flowdoc.Errors) when
// a stored document does not compile.
func (c *Client) Flow(ctx context.Context, name string, version int) (*flow.Flow, error) {
	if reg := c.docs.Load(); reg != nil {
		d, err := c.GetDocument(ctx, name, version)
		switch {
		case err == nil:
			if f, err := c.flows.Flow(d.Name, d.Version); err == nil {
				return f, nil
			}
			f, err := flowdoc.LoadStored(d.Name, d.Version, fmt.Sprintf("%s@%d", d.Name, d.Version), d.Content, reg)
			if err != nil {
				return nil, fmt.Errorf("compile document %q version %d: %w", d.Name, d.Version, err)
			}
			return f, nil
		case !errors.Is(err, ErrDocumentNotFound):
			return nil, err
		}
	}
	return c.lookupFlow(ctx, name, version)
}

// ValidateDocument parses a flow document and, when the client has an
// action registry (RegisterDocuments), compiles it with those actions, as
// StartDocument would. It returns nil for a valid document, and otherwise
// every problem at once, each a positioned *flowdoc.Error (flowdoc.Errors).
func (c *Client) ValidateDocument(name string, content []byte) error {
	if reg := c.docs.Load(); reg != nil {
		_, err := flowdoc.Load(name, content, reg)
		return err
	}
	_, err := flowdoc.Parse(name, content)
	return err
}
