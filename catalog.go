package hephaestus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The catalog (docs/deploying.md): every Client publishes the flows, job
// kinds and workflows it registers to the store, in one batch at Start
// and at once for registrations after it; any process of the deployment
// then starts, inserts, schedules and shows them without their code,
// from a stub of the flow (flow.FromSpec) that it keeps apart from what
// it registered, so it never claims their tasks.

// catalogSpec is the Spec of a flow or job kind in the catalog: the flow
// as data, and for a job kind its insert options.
type catalogSpec struct {
	*flow.Spec
	Job *jobSpec `json:"job,omitempty"`
}

// jobSpec is what a process without a job kind's code needs to insert
// jobs of it with the kind's semantics.
type jobSpec struct {
	Queue       string      `json:"queue"`
	Priority    int         `json:"priority,omitempty"`
	MaxAttempts int         `json:"max_attempts"`
	Unique      *job.Unique `json:"unique,omitempty"`
	// ConcurrencyKeyFunc: the kind computes the key with a Go function;
	// an insert without the code must give it.
	ConcurrencyKeyFunc bool `json:"concurrency_key_func,omitempty"`
}

// workflowSpec is the Spec of a code-first workflow in the catalog.
type workflowSpec struct {
	Name       string   `json:"name"`
	BuildID    string   `json:"build_id"`
	Signals    []string `json:"signals,omitempty"`
	Updates    []string `json:"updates,omitempty"`
	Queries    []string `json:"queries,omitempty"`
	InputType  string   `json:"input_type,omitempty"`
	OutputType string   `json:"output_type,omitempty"`
	// SearchAttributes are the declared search attributes
	// (workflow.Definition.SearchAttribute).
	SearchAttributes map[string]store.AttrType `json:"search_attributes,omitempty"`
}

// catalogState is the client's side of the catalog.
type catalogState struct {
	// workflows registered, by name (for their declared messages).
	workflows sync.Map
	// stubs are the hashes of the stubs kept, by "name@version".
	stubs sync.Map
	// schemas are the compiled input schemas of stubs, by "name@version".
	schemas sync.Map
	// documents are the names of the flows compiled from stored
	// documents here: not published.
	documents sync.Map
	// started: registrations publish at once.
	mu      sync.Mutex
	started bool
}

// schemaOf returns the JSON Schema of a Go type (nil for none: no type,
// an interface, raw JSON). Fields are required only when tagged so
// (jsonschema:"required") and other properties are allowed, as Go's JSON
// decoding does.
func schemaOf(t reflect.Type) json.RawMessage {
	if t == nil || t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() {
		return nil
	}
	r := &invopop.Reflector{Anonymous: true, DoNotReference: true, AllowAdditionalProperties: true, RequiredFromJSONSchemaTags: true}
	b, err := json.Marshal(r.ReflectFromType(t))
	if err != nil {
		return nil
	}
	return b
}

// flowDefinition is the catalog entry of a registered flow or job kind.
func (c *Client) flowDefinition(f *flow.Flow) (*store.Definition, error) {
	spec := catalogSpec{Spec: f.Spec()}
	kind := store.DefinitionFlow
	if v, ok := c.kinds.Load(f.Name()); ok {
		kind = store.DefinitionJob
		k := v.(job.Untyped)
		st := f.Steps()[0]
		spec.Job = &jobSpec{Queue: st.Queue, Priority: st.Priority, MaxAttempts: st.Retry.MaxAttempts, Unique: k.Unique, ConcurrencyKeyFunc: k.ConcurrencyKey != nil}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("publish %s %q: %w", kind, f.Name(), err)
	}
	d := &store.Definition{Kind: kind, Name: f.Name(), Version: f.Version(), BuildID: c.cfg.BuildID, Spec: b,
		InputSchema: schemaOf(f.InputType())}
	for _, s := range f.Steps() {
		if !slices.Contains(d.Queues, s.Queue) {
			d.Queues = append(d.Queues, s.Queue)
		}
		if s.Remote != "" && !slices.Contains(d.Handlers, store.ActionHandler(s.Remote)) {
			d.Handlers = append(d.Handlers, store.ActionHandler(s.Remote))
		}
	}
	d.Handlers = append([]string{store.FlowHandler(f.Name(), f.Version())}, d.Handlers...)
	for _, s := range f.Schedules() {
		d.Schedules = append(d.Schedules, s.ID)
	}
	d.Hash = definitionHash(d)
	return d, nil
}

// workflowDefinition is the catalog entry of a registered workflow.
func (c *Client) workflowDefinition(w Workflow) *store.Definition {
	spec := workflowSpec{Name: w.Name(), BuildID: c.cfg.BuildID}
	d := &store.Definition{Kind: store.DefinitionWorkflow, Name: w.Name(), BuildID: c.cfg.BuildID,
		Queues: []string{c.cfg.WorkflowQueue}, Handlers: []string{store.WorkflowHandler(w.Name())}}
	if ds, ok := w.(interface {
		Declared() (updates, signals []string)
	}); ok {
		spec.Updates, spec.Signals = ds.Declared()
	}
	if qs, ok := w.(interface{ QueryNames() []string }); ok {
		spec.Queries = qs.QueryNames()
	}
	if ad, ok := w.(wfrt.AttrDecls); ok {
		spec.SearchAttributes = ad.SearchAttributes()
	}
	if ts, ok := w.(interface{ Types() (in, out reflect.Type) }); ok {
		in, out := ts.Types()
		spec.InputType, spec.OutputType = in.String(), out.String()
		d.InputSchema, d.OutputSchema = schemaOf(in), schemaOf(out)
	}
	if sc, ok := w.(interface{ Schedules() []workflow.Schedule }); ok {
		for _, s := range sc.Schedules() {
			d.Schedules = append(d.Schedules, s.ID)
		}
	}
	d.Spec, _ = json.Marshal(spec)
	d.Hash = definitionHash(d)
	return d
}

// definitionHash hashes what a catalog row says of the code.
func definitionHash(d *store.Definition) string {
	b, _ := json.Marshal([]any{d.Kind, d.Name, d.Version, d.Spec, d.InputSchema, d.OutputSchema, d.Queues, d.Handlers, d.Schedules})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// catalogEntries are the catalog rows of everything registered here.
func (c *Client) catalogEntries() ([]*store.Definition, error) {
	var out []*store.Definition
	for _, f := range c.flows.Flows() {
		if f.Stub() || c.isDocument(f.Name()) {
			continue
		}
		d, err := c.flowDefinition(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	c.cat.workflows.Range(func(_, v any) bool {
		out = append(out, c.workflowDefinition(v.(Workflow)))
		return true
	})
	return out, nil
}

// isDocument reports whether a flow registered here was compiled from a
// stored document (documents are listed from the documents' table).
func (c *Client) isDocument(name string) bool {
	_, ok := c.cat.documents.Load(name)
	return ok
}

// publish publishes ds (all that is registered when nil) in one batch.
func (c *Client) publish(ctx context.Context, ds []*store.Definition) error {
	if ds == nil {
		var err error
		if ds, err = c.catalogEntries(); err != nil {
			return err
		}
	}
	if len(ds) == 0 {
		return nil
	}
	err := c.cfg.Store.PublishDefinitions(ctx, &store.PublishDefinitionsParams{Definitions: ds, Now: c.cfg.Clock.Now(), By: c.cfg.WorkerID})
	if err != nil {
		return fmt.Errorf("hephaestus: publish to the catalog: %w", err)
	}
	return nil
}

// startCatalog publishes what is registered, once, at Start; later
// registrations publish at once (publishLater).
func (c *Client) startCatalog(ctx context.Context) error {
	c.cat.mu.Lock()
	defer c.cat.mu.Unlock()
	if c.cat.started {
		return nil
	}
	if err := c.publish(ctx, nil); err != nil {
		return err
	}
	c.cat.started = true
	return nil
}

// publishLater publishes definitions registered after Start.
func (c *Client) publishLater(mk func() ([]*store.Definition, error)) error {
	c.cat.mu.Lock()
	defer c.cat.mu.Unlock()
	if !c.cat.started {
		return nil
	}
	ds, err := mk()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.publish(ctx, ds)
}

// catalogStub is the flow runtime's catalog hook: a stub of a flow or job
// kind version from the catalog (version 0: the latest), with its input
// schema compiled for CheckInput.
func (c *Client) catalogStub(ctx context.Context, name string, version int) (*flow.Flow, error) {
	d, err := c.catalogRow(ctx, name, version)
	if err != nil {
		return nil, err
	}
	return c.stubOf(d)
}

// catalogRow is the catalog's row of a flow or a job kind.
func (c *Client) catalogRow(ctx context.Context, name string, version int) (*store.Definition, error) {
	d, err := c.cfg.Store.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: name, Version: version})
	if errors.Is(err, store.ErrDefinitionNotFound) {
		d, err = c.cfg.Store.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionJob, Name: name, Version: version})
	}
	if errors.Is(err, store.ErrDefinitionNotFound) {
		what := "any version"
		if version != 0 {
			what = fmt.Sprintf("version %d", version)
		}
		return nil, fmt.Errorf("%w: %q is not registered here, and no process published %s of it to the catalog", ErrFlowNotFound, name, what)
	}
	if err != nil {
		return nil, fmt.Errorf("read the catalog: %w", err)
	}
	return d, nil
}

// stubOf builds the stub of a catalog row, and compiles its input schema.
func (c *Client) stubOf(d *store.Definition) (*flow.Flow, error) {
	key := fmt.Sprintf("%s@%d", d.Name, d.Version)
	var spec catalogSpec
	if err := json.Unmarshal(d.Spec, &spec); err != nil || spec.Spec == nil {
		return nil, fmt.Errorf("catalog entry %s %q version %d: the spec does not decode: %v", d.Kind, d.Name, d.Version, err)
	}
	f, err := flow.FromSpec(spec.Spec)
	if err != nil {
		return nil, fmt.Errorf("catalog entry %s %q version %d: %w", d.Kind, d.Name, d.Version, err)
	}
	if len(d.InputSchema) > 0 {
		if sch, err := compileSchema(key, d.InputSchema); err == nil {
			c.cat.schemas.Store(key, sch)
		}
	}
	c.cat.stubs.Store(key, d.Hash)
	return f, nil
}

func compileSchema(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	url := "catalog:///" + name + ".json"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	return comp.Compile(url)
}

// checkInput is the flow runtime's CheckInput hook: the input of a start
// of a stub is checked against the published input schema (a flow
// registered here checks it by decoding into its input type).
func (c *Client) checkInput(f *flow.Flow, raw json.RawMessage) error {
	if !f.Stub() {
		return nil
	}
	v, ok := c.cat.schemas.Load(fmt.Sprintf("%s@%d", f.Name(), f.Version()))
	if !ok {
		return nil
	}
	return validateInput(v.(*jsonschema.Schema), raw)
}

// validateInput checks raw against a schema; the error names the first
// field at fault, as a JSON pointer into the input.
func validateInput(sch *jsonschema.Schema, raw json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("input is not JSON: %w", err)
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	field := "/" + strings.Join(ve.InstanceLocation, "/")
	msg := ve.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "jsonschema validation failed") {
		msg = msg[i+2:]
	}
	return fmt.Errorf("input field %q does not match the published input schema: %s", field, strings.TrimSpace(msg))
}

// ensureStub makes sure a start of a flow (or job kind) that is not
// registered here finds its stub from the catalog: version 0 reads the
// latest published. A flow registered here needs nothing; a flow the
// catalog lacks is left for the start to report.
func (c *Client) ensureStub(ctx context.Context, name string, version int) error {
	if _, err := c.flows.Flow(name, version); err == nil {
		return nil
	}
	if version == 0 {
		if _, err := c.flows.Flow(name, 0); err == nil {
			return nil
		}
	}
	d, err := c.catalogRow(ctx, name, version)
	if errors.Is(err, ErrFlowNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if h, ok := c.cat.stubs.Load(fmt.Sprintf("%s@%d", d.Name, d.Version)); ok && h == d.Hash {
		if _, err := c.flows.Lookup(d.Name, d.Version); err == nil {
			return nil
		}
	}
	f, err := c.stubOf(d)
	if err != nil {
		return err
	}
	return c.flows.AddStub(f)
}

// lookupFlow returns a flow version registered here, or its stub from
// the catalog.
func (c *Client) lookupFlow(ctx context.Context, name string, version int) (*flow.Flow, error) {
	if f, err := c.flows.Lookup(name, version); err == nil && (version != 0 || !f.Stub()) {
		return f, nil
	}
	if err := c.ensureStub(ctx, name, version); err != nil {
		return nil, err
	}
	return c.flows.Lookup(name, version)
}

// catalogJobKind is a job kind known from the catalog only, for
// InsertJobJSON: its stub and insert options, with arguments taken as
// JSON after checking them against the published schema.
func (c *Client) catalogJobKind(ctx context.Context, kind string, opts *JobOptions) (*job.Untyped, error) {
	d, err := c.cfg.Store.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionJob, Name: kind})
	if errors.Is(err, store.ErrDefinitionNotFound) {
		return nil, fmt.Errorf("insert job of %q: %w: no job kind %q is registered in this client (RegisterJobs) nor published to the catalog by another", kind, ErrFlowNotFound, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("insert job of %q: read the catalog: %w", kind, err)
	}
	var spec catalogSpec
	if err := json.Unmarshal(d.Spec, &spec); err != nil || spec.Job == nil {
		return nil, fmt.Errorf("insert job of %q: the catalog entry has no job options", kind)
	}
	f, err := c.stubOf(d)
	if err != nil {
		return nil, err
	}
	if err := c.flows.AddStub(f); err != nil {
		return nil, err
	}
	u := &job.Untyped{Name: kind, Flow: f, Unique: spec.Job.Unique, Decode: func(raw json.RawMessage) (any, error) {
		return raw, nil
	}}
	if spec.Job.ConcurrencyKeyFunc && (opts == nil || opts.ConcurrencyKey == "") {
		return nil, fmt.Errorf("insert job of %q: %w: the kind computes its concurrency key with a Go function that this process does not have; give JobOptions.ConcurrencyKey", kind, ErrInvalidInput)
	}
	return u, nil
}

// catalogQueues are the queues of every catalog entry: the registry looks
// for runs no live worker can serve in them too, so that a run of a
// definition whose workers are all gone shows as unserved even when no
// live process works its queue.
func (c *Client) catalogQueues(ctx context.Context) []string {
	ds, err := c.cfg.Store.ListDefinitions(ctx, &store.ListDefinitionsParams{})
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range ds {
		for _, q := range d.Queues {
			if !slices.Contains(out, q) {
				out = append(out, q)
			}
		}
	}
	return out
}
