package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/store"
)

// Runs of stored documents. A client given an action registry
// (RegisterDocuments) starts runs of documents stored with PutDocument:
// StartDocument compiles the stored content and registers it as flow
// <name> version <document version>, so a document runs without a
// redeploy. The run records the document it started with in its metadata
// ("document": {"name", "version", "hash"}), and every process runs it
// from that exact content: a worker that meets a run of a version it has
// not registered loads the content by hash from the store, compiles it
// with its registry and registers it. Putting new content makes a new
// version, which new runs take; a run in flight keeps its version.

// DocumentRef names the stored document a run is pinned to: the run's
// "document" metadata.
type DocumentRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Hash    string `json:"hash"`
}

// ErrNoDocumentRegistry: the client was given no action registry
// (RegisterDocuments), so it cannot compile stored documents.
var ErrNoDocumentRegistry = errors.New("no action registry for documents: call RegisterDocuments first")

// docRegistry is the registry RegisterDocuments gave; nil without one.
type docRegistry = atomic.Pointer[flowdoc.Registry]

// RegisterDocuments gives the client the actions stored documents call,
// and registers every stored document version that compiles with them,
// so that this process's workers claim the tasks of their runs (a version
// that does not compile is logged and skipped). Call it before Start;
// calling it again registers the versions stored since (by other
// processes). A version started with StartDocument is registered by that
// call; so is the version of a run this client resumes or cancels.
func (c *Client) RegisterDocuments(ctx context.Context, reg *flowdoc.Registry) error {
	if reg == nil {
		return errors.New("hephaestus: RegisterDocuments: nil registry")
	}
	c.docs.Store(reg)
	var cursor string
	latest := map[string]int{}
	for {
		page, err := c.ListDocuments(ctx, &ListDocumentsOptions{Limit: 1000, Cursor: cursor})
		if err != nil {
			return fmt.Errorf("register documents: %w", err)
		}
		for _, d := range page.Documents {
			latest[d.Name] = max(latest[d.Name], d.Version)
			if _, err := c.flows.Flow(d.Name, d.Version); err == nil {
				continue
			}
			full, err := c.GetDocument(ctx, d.Name, d.Version)
			if err != nil {
				return fmt.Errorf("register documents: %w", err)
			}
			if _, err := c.registerDocument(full); err != nil {
				c.cfg.Logger.Warn("stored document does not compile with this registry; its runs wait for a worker that can", "document", d.Name, "version", d.Version, "err", err)
			}
		}
		if page.Next == "" {
			return c.declareFromDocuments(ctx, latest)
		}
		cursor = page.Next
	}
}

// declareFromDocuments declares the schedules ("schedules") and the
// triggers ("on") of each document's latest version, with the document
// as target, and deletes the triggers an earlier version declared that
// the latest one dropped. A document that does not parse declares none
// and deletes none (its runs report why).
func (c *Client) declareFromDocuments(ctx context.Context, latest map[string]int) error {
	if len(latest) == 0 {
		return nil
	}
	stored, err := c.cfg.Store.ListTriggers(ctx)
	if err != nil {
		return fmt.Errorf("register documents: %w", err)
	}
	var ss []*Schedule
	for _, name := range slices.Sorted(maps.Keys(latest)) {
		d, err := c.GetDocument(ctx, name, latest[name])
		if err != nil {
			return fmt.Errorf("register documents: %w", err)
		}
		doc, err := flowdoc.Parse(fmt.Sprintf("%s@%d", d.Name, d.Version), d.Content)
		if err != nil {
			continue
		}
		ss = append(ss, declared(TargetDocument, name, doc.Schedules())...)
		if err := c.declareDocumentTriggers(ctx, d, doc.Triggers(), stored); err != nil {
			return fmt.Errorf("register documents: %w", err)
		}
	}
	if len(ss) == 0 {
		return nil
	}
	if err := c.DeclareSchedules(ss...); err != nil {
		return fmt.Errorf("register documents: %w", err)
	}
	return nil
}

// declareDocumentTriggers declares the triggers of a document's version
// (named flowdoc.TriggerName(<document>, <entry>)) and deletes the
// declared triggers of the document, among stored, that it no longer
// has. A trigger the store refuses (a stored name so long that a
// trigger's name passes the limit) is logged, and the document then
// declares and deletes none.
func (c *Client) declareDocumentTriggers(ctx context.Context, d *Document, ts []flowdoc.Trigger, stored []*store.Trigger) error {
	keep := make(map[string]bool, len(ts))
	decl := make([]*Trigger, len(ts))
	for i, t := range ts {
		decl[i] = &Trigger{Name: flowdoc.TriggerName(d.Name, t.Name), Event: t.Event, Target: TargetDocument, TargetName: d.Name, Filter: t.Filter, Input: t.Input,
			BusinessKey: t.BusinessKey, ConcurrencyKey: t.ConcurrencyKey, Key: t.Key, Debounce: t.Debounce}
		if t.ThrottleLimit > 0 {
			decl[i].Throttle = &Throttle{Limit: t.ThrottleLimit, Period: t.ThrottlePeriod}
		}
		if t.BatchSize > 0 {
			decl[i].Batch = &Batch{Size: t.BatchSize, Window: t.BatchWindow}
		}
		keep[decl[i].Name] = true
	}
	if len(decl) > 0 {
		err := c.DeclareTriggers(ctx, decl...)
		if errors.Is(err, ErrInvalidInput) {
			c.cfg.Logger.Warn("the triggers of a stored document are refused; it declares none", "document", d.Name, "version", d.Version, "err", err)
			return nil
		}
		if err != nil {
			return err
		}
	}
	prefix := flowdoc.TriggerPrefix(d.Name)
	for _, t := range stored {
		if !t.Declared || t.TargetKind != store.TargetDocument || t.TargetName != d.Name || !strings.HasPrefix(t.Name, prefix) || keep[t.Name] {
			continue
		}
		if err := c.DeleteTrigger(ctx, t.Name); err != nil && !errors.Is(err, ErrTriggerNotFound) {
			return fmt.Errorf("delete trigger %q that document %q version %d dropped: %w", t.Name, d.Name, d.Version, err)
		}
	}
	return nil
}

// registerDocument compiles a stored document as flow <name> version
// <version> and registers it.
func (c *Client) registerDocument(d *Document) (*flow.Flow, error) {
	reg := c.docs.Load()
	if reg == nil {
		return nil, ErrNoDocumentRegistry
	}
	src := fmt.Sprintf("%s@%d", d.Name, d.Version)
	f, err := flowdoc.LoadStored(d.Name, d.Version, src, d.Content, reg)
	if err != nil {
		return nil, fmt.Errorf("compile document %q version %d: %w", d.Name, d.Version, err)
	}
	c.cat.documents.Store(d.Name, true)
	if err := c.flows.Register(f); err != nil {
		return nil, fmt.Errorf("document %q version %d: %w", d.Name, d.Version, err)
	}
	return f, nil
}

// StartDocument starts a run of a stored document with input, and returns
// it as stored without waiting. Version 0 is the latest version of name.
// The document is compiled with the registry of RegisterDocuments (a
// document that does not compile fails with flowdoc's *Error, positioned
// in it), registered as flow name version <document version>, and the
// run is pinned to its content. opts.Version is ignored: version chooses.
//
// With StartOptions.RunID of a run that exists, it returns that run and an
// error that wraps ErrRunExists.
func (c *Client) StartDocument(ctx context.Context, name string, version int, input any, opts *StartOptions) (*Run, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("start document %q: %w", name, err)
	}
	o := opts.internal()
	if o == nil {
		o = &flowrt.StartOptions{}
	}
	r, err := c.startDocument(ctx, name, version, input, o)
	if err != nil {
		return c.existingRun(ctx, opts.runID(), err)
	}
	return c.toRun(r), nil
}

// startDocument starts a run of a stored document with internal options
// (schedules pass the run id).
func (c *Client) startDocument(ctx context.Context, name string, version int, input any, o *flowrt.StartOptions) (*store.Run, error) {
	if c.docs.Load() == nil {
		return nil, fmt.Errorf("start document %q: %w", name, ErrNoDocumentRegistry)
	}
	return startPicked(c, func(keep bool) (*versionPicker, error) { return c.documentPicker(ctx, name, keep) },
		func(p *versionPicker) (*store.Run, error) { return c.startDocumentPicked(ctx, p, version, input, o) })
}

// startDocumentPicked starts a run of a stored document whose version
// (0: the picker's choice) p chooses.
func (c *Client) startDocumentPicked(ctx context.Context, p *versionPicker, version int, input any, o *flowrt.StartOptions) (*store.Run, error) {
	oo := *o
	oo.Version = version
	o, err := p.apply(input, &oo)
	if err != nil {
		return nil, err
	}
	d, err := c.pickedDocument(ctx, p, o.Version)
	if err != nil {
		return nil, err
	}
	if _, err := c.flows.Flow(d.Name, d.Version); err != nil {
		if _, err := c.registerDocument(d); err != nil {
			return nil, fmt.Errorf("start document: %w", err)
		}
	}
	o.Version = d.Version
	o.Document = DocumentRef{Name: d.Name, Version: d.Version, Hash: d.Hash}
	return c.flows.Start(ctx, d.Name, input, o)
}

// pickedDocument returns the document version a start takes (0: the
// latest). A start from a kept policy takes the document kept with it,
// if any: the create carries the policy's generation, which a new
// document version advances, so a latest version kept too long is
// refused in the create's transaction (store.Versions). A document read
// here is kept with the policy's generation: it was read after the
// policy, so the generation guards it as well.
func (c *Client) pickedDocument(ctx context.Context, p *versionPicker, version int) (*Document, error) {
	if p.kept {
		if d := c.policies.document(p.name, version, p.pol.Gen); d != nil {
			return d, nil
		}
	}
	d, err := c.GetDocument(ctx, p.name, version)
	if err != nil {
		return nil, fmt.Errorf("start document: %w", err)
	}
	c.policies.keepDocument(p.name, version, p.pol.Gen, d)
	return d, nil
}

// RunDocument starts a run of a stored document (see StartDocument) and
// waits until it finishes, like Run.
func (c *Client) RunDocument(ctx context.Context, name string, version int, input any, opts *StartOptions) (*Run, error) {
	r, err := c.StartDocument(ctx, name, version, input, opts)
	if err != nil {
		return r, err // with a RunID that exists, that run
	}
	if !r.Status.Terminal() {
		if err := c.checkServed(ctx, r.ID, fmt.Sprintf("flow:%s@%d", r.Flow, r.Version)); err != nil {
			return r, err
		}
	}
	return c.WaitRun(ctx, r.ID)
}

// Document returns the stored document a run is pinned to; ok is false
// for a run that did not start from a stored document.
func (r *Run) Document() (DocumentRef, bool) {
	var ref DocumentRef
	raw, ok := r.Metadata[flowrt.MetaDocument]
	if !ok || json.Unmarshal(raw, &ref) != nil || ref.Hash == "" {
		return DocumentRef{}, false
	}
	return ref, true
}

// loadDocumentFlow is the flow runtime's loader hook: the flow version of
// a run pinned to a stored document, compiled from the exact content the
// run started with (read by its hash). A run of no document, or a client
// without a registry, gives ErrFlowNotFound.
func (c *Client) loadDocumentFlow(ctx context.Context, runID, name string, version int) (*flow.Flow, error) {
	if c.docs.Load() == nil {
		return nil, fmt.Errorf("%w: %q version %d is not registered and this client has no document registry", ErrFlowNotFound, name, version)
	}
	sr, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, ErrRunNotFound) {
			return nil, err // "run ID not found" says it all
		}
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	ref, ok := (&Run{Metadata: sr.Metadata}).Document()
	if !ok || sr.Kind != hephtype.KindFlow {
		return nil, fmt.Errorf("%w: %q version %d is not registered, and run %s is pinned to no stored document", ErrFlowNotFound, name, version, runID)
	}
	if ref.Name != name || ref.Version != version {
		return nil, fmt.Errorf("run %s is pinned to document %q version %d, not to flow %q version %d", runID, ref.Name, ref.Version, name, version)
	}
	d, err := c.GetDocumentByHash(ctx, ref.Hash)
	if err != nil {
		return nil, err
	}
	// The content of the hash may be stored under another name first:
	// the run's own name and version identify its flow.
	d.Name, d.Version = ref.Name, ref.Version
	reg := c.docs.Load()
	f, err := flowdoc.LoadStored(d.Name, d.Version, fmt.Sprintf("%s@%d", d.Name, d.Version), d.Content, reg)
	if err != nil {
		return nil, fmt.Errorf("compile document %q version %d (hash %s): %w", ref.Name, ref.Version, ref.Hash, err)
	}
	c.cat.documents.Store(d.Name, true)
	return f, nil
}

// ensureDocumentFlow registers, through the loader hook, the flow version
// of a run pinned to a stored document before a change of the run
// (resume, cancel) needs it. Without a registry it does nothing; nor for
// a run that is no document run (its change reports what is missing).
func (c *Client) ensureDocumentFlow(ctx context.Context, runID string) error {
	if c.docs.Load() == nil {
		return nil
	}
	sr, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil // the change reports it
	}
	if _, ok := (&Run{Metadata: sr.Metadata}).Document(); !ok || sr.Kind != hephtype.KindFlow {
		return nil
	}
	if err := c.flows.Ensure(ctx, runID, sr.Workflow, sr.Version); err != nil && !errors.Is(err, ErrFlowNotFound) {
		return err
	}
	return nil
}
