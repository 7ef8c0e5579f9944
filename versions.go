package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/versionrule"
	"github.com/hephaestus-go/hephaestus/store"
)

// Version rules (seed 000's version_for(input)). A flow, a job kind or a
// document with several versions may have a rule that chooses, per
// start, the version a new run gets: pinned to one version, a percentage
// split by a stable hash of the run id (or business value), or by a
// field of the input. Without a rule a start takes the latest version
// that is not retired. A version given at start (StartOptions.Version,
// StartDocument's version) always wins, unless it is retired. The
// choice and its reason are recorded in the run's metadata under
// MetaVersionRule. Code-first workflows do not use rules (they use
// build ids).
//
// A retired version gets no new runs (explicit or by rule); its runs in
// flight continue. A deleted version is retired and hidden from the
// listing of versions; its runs stay readable.

// MetaVersionRule is the metadata key of a run that records why it got
// its version (a JSON string): "explicit", "latest", "pinned",
// "percentage", "field plan=enterprise" or "field plan default". It is
// set when a choice was made: the definition has a rule, several
// versions or retired versions, or the start named a version.
const MetaVersionRule = "heph.version_rule"

// The types of VersionRule.
const (
	VersionRulePinned     = "pinned"
	VersionRulePercentage = "percentage"
	VersionRuleField      = "field"
)

// The states of a version.
const (
	VersionActive  = store.VersionActive
	VersionRetired = store.VersionRetired
	VersionDeleted = store.VersionDeleted
)

var (
	// ErrVersionRetired: the version is retired (or deleted): no new run
	// may start on it, and no rule may name it.
	ErrVersionRetired = store.ErrVersionRetired
	// ErrVersionRuleNotFound: the definition has no version rule.
	ErrVersionRuleNotFound = store.ErrVersionRuleNotFound
)

// VersionRule chooses the version of a new run of a definition. Its JSON
// form is the API's.
type VersionRule struct {
	// Type is VersionRulePinned, VersionRulePercentage or VersionRuleField.
	Type string `json:"type"`
	// Version is the version of a pinned rule.
	Version int `json:"version,omitempty"`
	// Split maps versions to weights in percent (summing to 100), for a
	// percentage rule: {1: 90, 2: 10}.
	Split map[int]int `json:"split,omitempty"`
	// Field is the dotted path into the input of a field rule
	// ("customer.plan").
	Field string `json:"field,omitempty"`
	// Map maps the field's value to a version (a string matches the
	// string it holds, a number or a boolean its JSON text).
	Map map[string]int `json:"map,omitempty"`
	// Default is the version of a field rule when the field is missing or
	// its value is not in Map. Required for a field rule.
	Default int `json:"default,omitempty"`
}

func (r *VersionRule) internal() *versionrule.Rule { return (*versionrule.Rule)(r) }

// String describes the rule in one line ("percentage 1=90,2=10").
func (r *VersionRule) String() string { return r.internal().String() }

// Validate checks the rule; the error wraps ErrInvalidInput and names
// the field at fault.
func (r *VersionRule) Validate() error {
	if err := r.internal().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	return nil
}

// DefinitionVersions lists the versions of a definition (Client.Versions).
type DefinitionVersions struct {
	Name string
	// Rule is the version rule, nil without one; RuleUpdatedAt and
	// RuleUpdatedBy say when and by whom it was set.
	Rule          *VersionRule
	RuleUpdatedAt time.Time
	RuleUpdatedBy string
	// Latest is the version a start without a rule or version gets: the
	// latest one not retired (0 when every version is).
	Latest int
	// Versions, ascending.
	Versions []*DefinitionVersion
}

// DefinitionVersion is one version of a definition.
type DefinitionVersion struct {
	Version int
	// State is VersionActive, VersionRetired or VersionDeleted;
	// ChangedAt and ChangedBy say when and by whom it was set (zero for
	// a version never retired).
	State     string
	ChangedAt time.Time
	ChangedBy string
	// ActiveRuns are the version's runs pending, running or waiting;
	// FinishedRuns the others (until retention prunes them).
	ActiveRuns   int
	FinishedRuns int
}

// VersionsOptions are the optional parameters of Versions.
type VersionsOptions struct {
	// IncludeDeleted lists deleted versions too.
	IncludeDeleted bool
}

// Versions lists the versions of a flow, job kind or document: those
// registered in this client, stored (documents), with runs or with a
// state, with their state and run counts, and the definition's rule. A
// name that has none of them fails with ErrFlowNotFound.
func (c *Client) Versions(ctx context.Context, name string, opts *VersionsOptions) (*DefinitionVersions, error) {
	if opts == nil {
		opts = &VersionsOptions{}
	}
	pol, err := c.cfg.Store.VersionPolicy(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("versions of %q: %w", name, err)
	}
	counts, err := c.cfg.Store.CountRunsByVersion(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("versions of %q: %w", name, err)
	}
	known, err := c.knownVersions(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("versions of %q: %w", name, err)
	}
	byVersion := map[int]*DefinitionVersion{}
	get := func(v int) *DefinitionVersion {
		if byVersion[v] == nil {
			byVersion[v] = &DefinitionVersion{Version: v, State: VersionActive}
		}
		return byVersion[v]
	}
	for _, v := range known {
		get(v)
	}
	for _, n := range counts {
		d := get(n.Version)
		d.ActiveRuns, d.FinishedRuns = n.Active, n.Finished
	}
	for _, s := range pol.States {
		d := get(s.Version)
		d.State, d.ChangedAt, d.ChangedBy = s.State, s.ChangedAt, s.ChangedBy
	}
	if len(byVersion) == 0 && pol.Rule == nil {
		return nil, fmt.Errorf("versions of %q: %w: no flow, job kind or document of that name is registered, stored or has runs", name, ErrFlowNotFound)
	}
	out := &DefinitionVersions{Name: name, Versions: []*DefinitionVersion{}}
	for _, v := range slices.Sorted(maps.Keys(byVersion)) {
		d := byVersion[v]
		if d.State == VersionActive && slices.Contains(known, v) {
			out.Latest = v
		}
		if d.State != VersionDeleted || opts.IncludeDeleted {
			out.Versions = append(out.Versions, d)
		}
	}
	if pol.Rule != nil {
		if out.Rule, err = decodeRule(name, pol.Rule.Rule); err != nil {
			return nil, err
		}
		out.RuleUpdatedAt, out.RuleUpdatedBy = pol.Rule.UpdatedAt, pol.Rule.UpdatedBy
	}
	return out, nil
}

// knownVersions are the versions of a name this client can start: the
// flow versions registered here and the stored document versions.
func (c *Client) knownVersions(ctx context.Context, name string) ([]int, error) {
	vs := c.flows.Versions(name)
	docs, err := c.documentVersions(ctx, name)
	if err != nil {
		return nil, err
	}
	vs = append(vs, docs...)
	slices.Sort(vs)
	return slices.Compact(vs), nil
}

// documentVersions are the stored versions of a document, ascending.
func (c *Client) documentVersions(ctx context.Context, name string) ([]int, error) {
	var vs []int
	cursor := ""
	for {
		page, err := c.cfg.Store.ListDocuments(ctx, &store.ListDocumentsParams{Name: name, Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, d := range page.Documents {
			vs = append(vs, d.Version)
		}
		if page.Next == "" {
			slices.Sort(vs)
			return vs, nil
		}
		cursor = page.Next
	}
}

func decodeRule(name string, raw json.RawMessage) (*VersionRule, error) {
	var r VersionRule
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("the stored version rule of %q does not decode: %w", name, err)
	}
	return &r, nil
}

// SetVersionRule sets (or replaces) the version rule of a flow, job kind
// or document; by names who set it. An invalid rule fails with
// ErrInvalidInput naming the field; a rule naming a version that is not
// known (registered here, stored or with runs) with ErrFlowNotFound; one
// naming a retired or deleted version with ErrVersionRetired.
func (c *Client) SetVersionRule(ctx context.Context, name string, rule *VersionRule, by string) error {
	if rule == nil {
		return fmt.Errorf("set version rule of %q: %w: no rule", name, ErrInvalidInput)
	}
	if err := rule.Validate(); err != nil {
		return fmt.Errorf("set version rule of %q: %w", name, err)
	}
	targets := rule.internal().Targets()
	if err := c.checkVersionsKnown(ctx, name, targets...); err != nil {
		return fmt.Errorf("set version rule of %q: %w", name, err)
	}
	raw, err := json.Marshal(rule)
	if err != nil {
		return fmt.Errorf("set version rule of %q: %w", name, err)
	}
	defer c.policies.clear() // kept policies are stale now; starts here need not learn it by a refusal
	_, err = c.cfg.Store.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: name, Rule: raw, Targets: targets, At: c.cfg.Clock.Now(), By: by})
	if err != nil {
		return fmt.Errorf("set version rule of %q: %w", name, err)
	}
	return nil
}

// checkVersionsKnown fails with ErrFlowNotFound unless every version is
// known (registered here, a stored document, or with runs).
func (c *Client) checkVersionsKnown(ctx context.Context, name string, versions ...int) error {
	known, err := c.knownVersions(ctx, name)
	if err != nil {
		return err
	}
	counts, err := c.cfg.Store.CountRunsByVersion(ctx, name)
	if err != nil {
		return err
	}
	for _, n := range counts {
		known = append(known, n.Version)
	}
	for _, v := range versions {
		if !slices.Contains(known, v) {
			slices.Sort(known)
			return fmt.Errorf("%w: %q has no version %d (known: %s)", ErrFlowNotFound, name, v, joinInts(slices.Compact(known)))
		}
	}
	return nil
}

func joinInts(vs []int) string {
	if len(vs) == 0 {
		return "none"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

// VersionRule returns the version rule of a name, or
// ErrVersionRuleNotFound.
func (c *Client) VersionRule(ctx context.Context, name string) (*VersionRule, error) {
	pol, err := c.cfg.Store.VersionPolicy(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("version rule of %q: %w", name, err)
	}
	if pol.Rule == nil {
		return nil, fmt.Errorf("version rule of %q: %w", name, ErrVersionRuleNotFound)
	}
	return decodeRule(name, pol.Rule.Rule)
}

// ClearVersionRule deletes the version rule of a name (new runs take the
// latest version not retired), or fails with ErrVersionRuleNotFound.
func (c *Client) ClearVersionRule(ctx context.Context, name string) error {
	defer c.policies.clear() // kept policies are stale now; starts here need not learn it by a refusal
	if err := c.cfg.Store.DeleteVersionRule(ctx, name); err != nil {
		return fmt.Errorf("clear version rule of %q: %w", name, err)
	}
	return nil
}

// RetireVersion retires a version: new starts on it are refused (with a
// version given or by rule), runs in flight continue. by names who did
// it. A version that is not known fails with ErrFlowNotFound; a deleted
// one with ErrInvalidInput.
func (c *Client) RetireVersion(ctx context.Context, name string, version int, by string) error {
	return c.setVersionState(ctx, "retire", name, version, VersionRetired, by)
}

// UnretireVersion makes a retired version active again.
func (c *Client) UnretireVersion(ctx context.Context, name string, version int, by string) error {
	return c.setVersionState(ctx, "unretire", name, version, VersionActive, by)
}

// DeleteVersion deletes a version: it is retired and hidden from
// Versions (unless VersionsOptions.IncludeDeleted); its runs stay
// readable. A deleted version stays deleted.
func (c *Client) DeleteVersion(ctx context.Context, name string, version int, by string) error {
	return c.setVersionState(ctx, "delete", name, version, VersionDeleted, by)
}

func (c *Client) setVersionState(ctx context.Context, op, name string, version int, state, by string) error {
	if version < 1 {
		return fmt.Errorf("%s %q version %d: %w: versions count from 1", op, name, version, ErrInvalidInput)
	}
	if err := c.checkVersionsKnown(ctx, name, version); err != nil {
		return fmt.Errorf("%s %q version %d: %w", op, name, version, err)
	}
	pol, err := c.cfg.Store.VersionPolicy(ctx, name)
	if err != nil {
		return fmt.Errorf("%s %q version %d: %w", op, name, version, err)
	}
	if pol.State(version) == VersionDeleted && state != VersionDeleted {
		return fmt.Errorf("%s %q version %d: %w: the version is deleted, and a deleted version stays retired", op, name, version, ErrInvalidInput)
	}
	defer c.policies.clear() // kept policies are stale now; starts here need not learn it by a refusal
	_, err = c.cfg.Store.SetVersionState(ctx, &store.SetVersionStateParams{Name: name, Version: version, State: state, At: c.cfg.Clock.Now(), By: by})
	if err != nil {
		return fmt.Errorf("%s %q version %d: %w", op, name, version, err)
	}
	return nil
}

// versionPicker chooses the versions of starts of one definition, from
// one read of its policy.
type versionPicker struct {
	name string
	pol  *store.VersionPolicy
	rule *VersionRule
	// versions lists the versions a start without rule may take; it is
	// called only when one is needed.
	versions func() ([]int, error)
	// cheap: versions costs no I/O, so a start without rule or retired
	// version lists them to record "latest" among several (documents
	// list the store only when a version is retired).
	cheap bool
	// kept: the policy is one kept from an earlier start (policyCache),
	// so apply records its generation on the start (the store refuses
	// the create if the policy changed since: see startPicked).
	kept bool
}

// policyCache keeps the version policy of each definition started here,
// so that a start does not read it again: the store guards the choice
// (store.NewRun.VersionGen). Any change of any policy makes every kept
// one stale (the generation is the store's), so a refusal clears them
// all, and so does a change made through this client.
type policyCache struct {
	mu sync.Mutex
	m  map[string]*store.VersionPolicy
	// docs are the documents started from kept policies, by name and
	// version asked for (0: the latest), with the generation of the
	// policy they were read after.
	docs map[keptDocKey]keptDoc
}

type keptDocKey struct {
	name    string
	version int
}

type keptDoc struct {
	gen int64
	doc *Document
}

// document returns the document kept for name and version under the
// generation gen, or nil.
func (pc *policyCache) document(name string, version int, gen int64) *Document {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if k, ok := pc.docs[keptDocKey{name, version}]; ok && k.gen == gen {
		return k.doc
	}
	return nil
}

func (pc *policyCache) keepDocument(name string, version int, gen int64, d *Document) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.docs == nil || len(pc.docs) >= maxKeptPolicies {
		pc.docs = map[keptDocKey]keptDoc{}
	}
	pc.docs[keptDocKey{name, version}] = keptDoc{gen: gen, doc: d}
}

// maxKeptPolicies bounds the policies kept; past it, they are dropped
// and read again (names come from callers, not only from registrations).
const maxKeptPolicies = 1024

func (pc *policyCache) get(name string) *store.VersionPolicy {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.m[name]
}

// put keeps p unless a policy of a later generation is kept.
func (pc *policyCache) put(name string, p *store.VersionPolicy) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if old := pc.m[name]; old != nil && old.Gen > p.Gen {
		return
	}
	if pc.m == nil || len(pc.m) >= maxKeptPolicies {
		pc.m = map[string]*store.VersionPolicy{}
	}
	pc.m[name] = p
}

func (pc *policyCache) clear() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	clear(pc.m)
	clear(pc.docs)
}

// versionPicker reads the policy of a definition, and keeps it; with
// keep, it takes the policy kept from an earlier start when there is one.
func (c *Client) versionPicker(ctx context.Context, name string, keep bool, versions func() ([]int, error)) (*versionPicker, error) {
	var pol *store.VersionPolicy
	if keep {
		pol = c.policies.get(name)
	}
	p := &versionPicker{name: name, pol: pol, versions: versions, kept: pol != nil}
	if pol == nil {
		var err error
		if pol, err = c.cfg.Store.VersionPolicy(ctx, name); err != nil {
			return nil, fmt.Errorf("start %q: %w", name, err)
		}
		p.pol = pol
		c.policies.put(name, pol)
	}
	if pol.Rule != nil {
		var err error
		if p.rule, err = decodeRule(name, pol.Rule.Rule); err != nil {
			return nil, err
		}
		if err := p.rule.Validate(); err != nil {
			return nil, fmt.Errorf("start %q: the stored version rule: %w", name, err)
		}
	}
	return p, nil
}

// startPicked starts one run whose version a picker chooses (picker
// returns it, from the kept policy when keep is true; start chooses the
// version and creates the run). A start from a kept policy carries the
// policy's generation; should the policy have changed since it was kept,
// the store refuses the create, or the kept policy may refuse the start
// itself (a version since unretired): either way the start is made once
// more from the policy read afresh, as every start did before policies
// were kept, and that attempt carries no generation.
func startPicked[T any](c *Client, picker func(keep bool) (*versionPicker, error), start func(p *versionPicker) (T, error)) (T, error) {
	var zero T
	p, err := picker(true)
	if err != nil {
		return zero, err
	}
	if !p.kept {
		return start(p)
	}
	out, err := start(p)
	if err == nil || !errors.Is(err, store.ErrVersionPolicyChanged) && !errors.Is(err, ErrVersionRetired) {
		return out, err
	}
	c.policies.clear()
	if p, err = picker(false); err != nil {
		return zero, err
	}
	return start(p)
}

// pick chooses the version of one start: explicit (0: none), the input,
// and the percentage rule's key. It returns the version (0: the latest,
// for the caller to resolve, when nothing is retired and the definition
// has no several versions to choose from) and why ("" when nothing was
// chosen).
func (p *versionPicker) pick(explicit int, input any, key string) (int, string, error) {
	if explicit != 0 {
		if st := p.pol.State(explicit); st != VersionActive {
			return 0, "", fmt.Errorf("start %q: %w: version %d is %s; start another version", p.name, ErrVersionRetired, explicit, st)
		}
		return explicit, "explicit", nil
	}
	if p.rule != nil {
		raw, err := inputJSON(input, p.rule)
		if err != nil {
			return 0, "", fmt.Errorf("start %q: %w: the input does not encode as JSON: %w", p.name, ErrInvalidInput, err)
		}
		v, why := versionrule.Choose(p.rule.internal(), raw, key)
		if st := p.pol.State(v); st != VersionActive {
			return 0, "", fmt.Errorf("start %q: %w: version %d, chosen by the version rule (%s: %s), is %s; change the rule or unretire the version",
				p.name, ErrVersionRetired, v, p.rule, why, st)
		}
		return v, why, nil
	}
	if len(p.pol.States) == 0 && !p.cheap {
		return 0, "", nil
	}
	vs, err := p.versions()
	if err != nil {
		return 0, "", fmt.Errorf("start %q: %w", p.name, err)
	}
	if len(p.pol.States) == 0 && len(vs) < 2 {
		return 0, "", nil
	}
	for _, v := range slices.Backward(vs) {
		if p.pol.State(v) == VersionActive {
			return v, "latest", nil
		}
	}
	if len(vs) == 0 {
		return 0, "", nil // nothing known here: the start reports it
	}
	return 0, "", fmt.Errorf("start %q: %w: every version (%s) is retired", p.name, ErrVersionRetired, joinInts(vs))
}

// inputJSON encodes the input for a field rule (nil for other rules).
func inputJSON(input any, r *VersionRule) (json.RawMessage, error) {
	if r.Type != VersionRuleField {
		return nil, nil
	}
	if raw, ok := input.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(input)
}

// needsKey reports whether the picker hashes a key (a percentage rule).
func (p *versionPicker) needsKey() bool {
	return p.rule != nil && p.rule.Type == VersionRulePercentage
}

// apply chooses the version of a start with internal options o (nil for
// none) and returns the options to start with: o copied, with the
// version, the metadata that records why, and, for a percentage rule
// without a run id or business value, a fresh run id (the key).
func (p *versionPicker) apply(input any, o *flowrt.StartOptions) (*flowrt.StartOptions, error) {
	out := flowrt.StartOptions{}
	if o != nil {
		out = *o
	}
	key := out.BusinessValue
	if key == "" {
		key = out.BusinessID
	}
	if key == "" && p.needsKey() {
		if out.RunID == "" {
			out.RunID = newID()
		}
		key = out.RunID
	}
	v, why, err := p.pick(out.Version, input, key)
	if err != nil {
		return nil, err
	}
	out.Version = v
	if p.kept {
		out.VersionGen = p.pol.Gen
	}
	if why != "" {
		meta := make(map[string]any, len(out.Metadata)+1)
		maps.Copy(meta, out.Metadata)
		meta[MetaVersionRule] = why
		out.Metadata = meta
	}
	return &out, nil
}

// versioned chooses the version of one start of a flow or job kind
// from its policy read afresh (the hook of the start paths that start
// many, or retry on their own).
func (c *Client) versioned(ctx context.Context, name string, input any, o *flowrt.StartOptions) (*flowrt.StartOptions, error) {
	p, err := c.flowPicker(ctx, name, false)
	if err != nil {
		return nil, err
	}
	return p.apply(input, o)
}

// flowPicker is the picker of a flow or job kind: its versions are
// those registered here.
func (c *Client) flowPicker(ctx context.Context, name string, keep bool) (*versionPicker, error) {
	p, err := c.versionPicker(ctx, name, keep, func() ([]int, error) { return c.flows.Versions(name), nil })
	if p != nil {
		p.cheap = true
	}
	return p, err
}

// documentPicker is the picker of a stored document.
func (c *Client) documentPicker(ctx context.Context, name string, keep bool) (*versionPicker, error) {
	return c.versionPicker(ctx, name, keep, func() ([]int, error) { return c.documentVersions(ctx, name) })
}

// jobPicker is the picker of a job kind with several versions registered,
// nil for a kind with one (its inserts keep the kind's version).
func (c *Client) jobPicker(ctx context.Context, name string) (*versionPicker, error) {
	if len(c.flows.Versions(name)) < 2 {
		return nil, nil
	}
	return c.flowPicker(ctx, name, false)
}
