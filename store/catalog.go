package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// The catalog: every process publishes the flows, job kinds and
// code-first workflows it registers, so that any process of the
// deployment (a server with no Go code, the CLI, a dashboard) can list,
// start and show them. A definition is stored once per kind, name,
// version and build: publishing what is stored (the same hash) changes
// nothing, which makes a publish idempotent and cheap to repeat at every
// start. A flow or job kind version is code that runs already: publishing
// it again with another hash is refused (a *DefinitionConflictError), and
// the changed code needs a new version. A workflow has no versions (0); each
// build id keeps its own row, and a build published again with another
// hash replaces its row. Flow documents are not in the catalog: they are
// stored as documents (document.go). The catalog is never pruned.

// The kinds of catalog entries (and of definitions everywhere).
const (
	DefinitionFlow     = "flow"
	DefinitionWorkflow = "workflow"
	DefinitionJob      = "job"
	DefinitionDocument = "document"
)

// ErrDefinitionNotFound: the catalog has no such definition.
var ErrDefinitionNotFound = errors.New("definition not found")

// Definition is a catalog entry.
type Definition struct {
	// Kind is DefinitionFlow, DefinitionJob or DefinitionWorkflow.
	Kind string
	Name string
	// Version of a flow or job kind (positive); 0 for a workflow.
	Version int
	// BuildID is the build of the process that published the row (the
	// first to publish a flow version; each build of a workflow).
	BuildID string
	// Hash identifies the content (a flow's shape, hashed with the rest).
	Hash string
	// Spec is the definition as data (JSON): a flow.Spec for flows and
	// job kinds, with what the kind adds; the declared messages of a
	// workflow.
	Spec json.RawMessage
	// InputSchema and OutputSchema are JSON Schemas (nil when unknown).
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Queues its tasks go to, Handlers a worker needs to run them
	// (Task.Handler), and the ids of the schedules declared with it.
	Queues    []string
	Handlers  []string
	Schedules []string
	// PublishedAt is when the row was first stored, PublishedBy the
	// worker id of the process that stored it.
	PublishedAt time.Time
	PublishedBy string
}

// PublishDefinitionsParams publishes definitions in one transaction.
type PublishDefinitionsParams struct {
	Definitions []*Definition
	// Now and By set PublishedAt and PublishedBy of new rows.
	Now time.Time
	By  string
}

// Check reports what is wrong with p, naming the definition and field;
// the errors wrap hephtype.ErrInvalidInput.
func (p *PublishDefinitionsParams) Check() error {
	for i, d := range p.Definitions {
		what := "definition " + strconv.Itoa(i)
		switch {
		case d == nil:
			return fmt.Errorf("%w: %s is nil", hephtype.ErrInvalidInput, what)
		case d.Kind != DefinitionFlow && d.Kind != DefinitionJob && d.Kind != DefinitionWorkflow:
			return fmt.Errorf("%w: %s (%q): Kind %q is not flow, job or workflow", hephtype.ErrInvalidInput, what, d.Name, d.Kind)
		case d.Name == "" || len(d.Name) > hephtype.MaxNameLen:
			return fmt.Errorf("%w: %s: Name must be 1 to %d bytes, got %d", hephtype.ErrInvalidInput, what, hephtype.MaxNameLen, len(d.Name))
		case d.Kind == DefinitionWorkflow && d.Version != 0:
			return fmt.Errorf("%w: %s (workflow %q): Version must be 0, got %d", hephtype.ErrInvalidInput, what, d.Name, d.Version)
		case d.Kind != DefinitionWorkflow && d.Version < 1:
			return fmt.Errorf("%w: %s (%s %q): Version must be positive, got %d", hephtype.ErrInvalidInput, what, d.Kind, d.Name, d.Version)
		case d.Hash == "":
			return fmt.Errorf("%w: %s (%s %q): Hash is empty", hephtype.ErrInvalidInput, what, d.Kind, d.Name)
		case len(d.BuildID) > hephtype.MaxNameLen:
			return fmt.Errorf("%w: %s (%s %q): BuildID is longer than %d bytes", hephtype.ErrInvalidInput, what, d.Kind, d.Name, hephtype.MaxNameLen)
		}
		for _, js := range []struct {
			field string
			v     json.RawMessage
		}{{"Spec", d.Spec}, {"InputSchema", d.InputSchema}, {"OutputSchema", d.OutputSchema}} {
			if len(js.v) > 0 && !json.Valid(js.v) {
				return fmt.Errorf("%w: %s (%s %q): %s is not JSON", hephtype.ErrInvalidInput, what, d.Kind, d.Name, js.field)
			}
		}
	}
	if p.Now.IsZero() {
		return fmt.Errorf("%w: Now is zero", hephtype.ErrInvalidInput)
	}
	return nil
}

// RowBuild is the build id a definition's row is keyed by: a flow or job
// kind version has one row whatever the build (the first publisher's
// BuildID is kept in the row); each build of a workflow has its own.
func (d *Definition) RowBuild() string {
	if d.Kind == DefinitionWorkflow {
		return d.BuildID
	}
	return ""
}

// DefinitionConflictError refuses a flow or job kind version published
// again with different content.
type DefinitionConflictError struct {
	Kind, Name string
	Version    int
	// Stored and Published are the two hashes.
	Stored, Published string
}

func (e *DefinitionConflictError) Error() string {
	return fmt.Sprintf("%s %q version %d is published already with other content (hash %.12s, this one %.12s): give the changed %s a new version",
		e.Kind, e.Name, e.Version, e.Stored, e.Published, e.Kind)
}

// Is makes errors.Is(err, hephtype.ErrFlowConflict) true.
func (e *DefinitionConflictError) Is(target error) bool { return target == hephtype.ErrFlowConflict }

// ListDefinitionsParams filters ListDefinitions (zero fields do not).
type ListDefinitionsParams struct {
	Kind string
	Name string
}

// GetDefinitionParams names a definition: its kind and name, and version
// (0: the highest), and for a workflow the build (""; the newest
// published).
type GetDefinitionParams struct {
	Kind    string
	Name    string
	Version int
	BuildID string
}

// Catalog is the part of a Store that keeps the deployment's catalog.
type Catalog interface {
	// PublishDefinitions stores definitions in one transaction: rows that
	// are stored with the same hash are left as they are, new ones are
	// inserted, a workflow build's row with another hash is replaced. A
	// flow or job kind version stored with another hash is not changed:
	// the error joins a *DefinitionConflictError for each, after the
	// others were stored.
	PublishDefinitions(ctx context.Context, p *PublishDefinitionsParams) error
	// ListDefinitions returns the catalog's rows by kind, name, version
	// and then newest first.
	ListDefinitions(ctx context.Context, p *ListDefinitionsParams) ([]*Definition, error)
	// GetDefinition returns one row, or ErrDefinitionNotFound.
	GetDefinition(ctx context.Context, p *GetDefinitionParams) (*Definition, error)
}

// Distinct returns the definitions of p once per row key (kind, name,
// version, RowBuild), the first of each, and a *DefinitionConflictError
// for each later flow or job kind of the same key with another hash (a
// later workflow build of the same key replaces the first): for backends
// that publish the batch in one statement.
func (p *PublishDefinitionsParams) Distinct() ([]*Definition, []error) {
	type key struct {
		kind, name string
		version    int
		build      string
	}
	at := map[key]int{}
	var out []*Definition
	var errs []error
	for _, d := range p.Definitions {
		k := key{d.Kind, d.Name, d.Version, d.RowBuild()}
		i, ok := at[k]
		switch {
		case !ok:
			at[k] = len(out)
			out = append(out, d)
		case d.Kind == DefinitionWorkflow:
			out[i] = d
		case out[i].Hash != d.Hash:
			errs = append(errs, &DefinitionConflictError{Kind: d.Kind, Name: d.Name, Version: d.Version, Stored: out[i].Hash, Published: d.Hash})
		}
	}
	return out, errs
}
