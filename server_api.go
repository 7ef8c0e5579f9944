package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// What the HTTP API (package server) needs to know of a client that a
// program linking the library reads from its own code: the definitions
// registered, a definition's flow (for its graph), and the validation of
// a document with the client's actions.

// Definition names what runs start from: a flow, a workflow, a job kind
// or a stored document.
type Definition struct {
	// Kind is "flow", "workflow", "job" or "document".
	Kind string
	Name string
	// Versions are the registered versions of a flow, or the stored
	// versions of a document, ascending; a workflow has none.
	Versions []int
	// Latest is the highest of Versions (0 for a workflow).
	Latest int
}

// Definitions lists the flows, job kinds and workflows this client has
// registered, and the documents stored, by kind then name. A document
// registered as a flow (it ran here) is listed as a document.
func (c *Client) Definitions(ctx context.Context) ([]Definition, error) {
	docs := map[string][]int{}
	var cursor string
	for {
		page, err := c.ListDocuments(ctx, &ListDocumentsOptions{Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("list definitions: %w", err)
		}
		for _, d := range page.Documents {
			docs[d.Name] = append(docs[d.Name], d.Version)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	flows := map[string][]int{}
	var out []Definition
	for _, h := range c.claimHandlers() {
		kind, name, _ := strings.Cut(h, ":")
		switch kind {
		case "flow":
			i := strings.LastIndexByte(name, '@')
			v, err := strconv.Atoi(name[i+1:])
			if i < 0 || err != nil {
				continue
			}
			if _, isDoc := docs[name[:i]]; !isDoc {
				flows[name[:i]] = append(flows[name[:i]], v)
			}
		case "workflow":
			if c.wf.Has(name) { // not the pinned handler "workflow:<name>@<build>"
				out = append(out, Definition{Kind: "workflow", Name: name})
			}
		}
	}
	for name, vs := range flows {
		kind := "flow"
		if _, ok := c.kinds.Load(name); ok {
			kind = "job"
		}
		out = append(out, definition(kind, name, vs))
	}
	for name, vs := range docs {
		out = append(out, definition("document", name, vs))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func definition(kind, name string, vs []int) Definition {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	vs = slices.Compact(vs)
	return Definition{Kind: kind, Name: name, Versions: vs, Latest: vs[len(vs)-1]}
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
	return c.flows.Flow(name, version)
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
