package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
)

// Reserved names.
const (
	// Done is the edge target that ends a path of the flow.
	Done = "done"
	// EventOK is the default event of a step.
	EventOK = "ok"
	// EventTimeout is delivered to a waiting step whose timeout expires.
	EventTimeout = "timeout"
	// EventFailed is the event of a step that failed after its retries. An
	// edge on it routes the failure (to compensation, say) instead of
	// failing the run; the step's output is then {"error": "<message>"}.
	EventFailed = "failed"
)

// KeyScope is the uniqueness scope of a flow's business key.
type KeyScope = businesskey.Scope

// The key scopes (see package businesskey).
const (
	ScopeActive  = businesskey.ScopeActive
	ScopeForever = businesskey.ScopeForever
	ScopeNone    = businesskey.ScopeNone
)

// Defaults of step options that neither the step nor the flow sets.
const (
	DefaultTimeout = 60 * time.Second
	DefaultQueue   = "default"
)

// MaxSteps bounds the steps of one flow, built in Go or compiled from a
// document: Build refuses a flow with more (rule RuleTooManySteps) before
// it builds anything over them. Validation and compilation take time and
// memory near-linear in the steps and edges (docs/benchmarks.md).
const MaxSteps = 32_768

// StepKind tells plain steps from map steps.
type StepKind string

// The step kinds.
const (
	KindTask StepKind = "task"
	KindMap  StepKind = "map"
)

// Builder collects a flow's steps, edges and options. Nothing is checked
// until Build, which reports every problem at once.
type Builder struct {
	name      string
	version   int
	key       string
	scope     KeyScope
	tags      []string
	metadata  map[string]any
	start     string
	inputType reflect.Type
	// inputName is the input type's name of a stub (FromSpec).
	inputName string
	defaults  stepDef
	steps     []*stepDef
	edges     []edgeDecl
	errs      []*ValidationError
	// schedules are declared with Schedule (schedule.go).
	schedules []Schedule
	// concurrency computes the runs' concurrency key (concurrency.go).
	concurrency *concurrency
	// timeout is the runs' default execution timeout (0: none).
	timeout time.Duration
	// attrs are the runs' search attributes (SearchAttribute).
	attrs map[string]AttrType
}

type edgeDecl struct {
	from, event string
	to          []string
	at          string // file:line of the declaration
}

type stepDef struct {
	name    string
	kind    StepKind
	at      string
	inType  reflect.Type
	outType reflect.Type
	// inName and outName name the types of a stub's step (FromSpec).
	inName, outName string
	// resolved is a stub's retry policy, resolved already (not merged
	// with defaults, nor checked again).
	resolved  *RetryPolicy
	run       func(ctx context.Context, c *Call) (Outcome, error)
	deps      []string
	depsSet   bool
	events    []string
	eventsSet bool
	key       string
	keySet    bool
	retry     *RetryPolicy
	timeout   *time.Duration
	queue     *string
	priority  *int

	waits       bool
	waitsSet    bool
	waitTimeout time.Duration

	overSet   bool
	overStep  string
	overField string

	reads    []string
	readsSet bool

	// remote is the handler of a remote step (remote.go), with its hooks.
	remote    string
	remoteSet bool
	prepare   func(ctx context.Context, in RemoteInput) (json.RawMessage, error)
	finish    func(ctx context.Context, in RemoteInput, out json.RawMessage) (Result[json.RawMessage], error)
}

func (d *stepDef) contextKey() string {
	if d.keySet {
		return d.key
	}
	return d.name
}

// New starts a flow definition. The name identifies the flow when runs are
// started; its version defaults to 1.
func New(name string) *Builder {
	return &Builder{name: name, version: 1, scope: ScopeActive}
}

// Version sets the flow's version, a positive integer. Runs stay on the
// version they started with; new runs take the latest registered.
func (b *Builder) Version(v int) *Builder { b.version = v; return b }

// BusinessKey declares the flow's business key: its runs get the
// business id "key::value" for a value the caller passes, which names a
// run wherever a run id does (the API, heph, the dashboard). The scope defaults to
// ScopeActive.
func (b *Builder) BusinessKey(key string, scope KeyScope) *Builder {
	b.key = key
	if scope != "" {
		b.scope = scope
	}
	return b
}

// Tags labels the flow's runs, for filtering.
func (b *Builder) Tags(tags ...string) *Builder { b.tags = append(b.tags, tags...); return b }

// ExecutionTimeout gives the flow's runs a default execution timeout: a
// run that has not finished this long after its start fails as timed
// out (docs/operations.md, Time limits). A start's own timeout
// overrides it. Zero (the default) means none; a negative one fails
// Build.
func (b *Builder) ExecutionTimeout(d time.Duration) *Builder { b.timeout = d; return b }

// AttrType is the type of a search attribute.
type AttrType = hephtype.AttrType

// The types of search attributes (docs/operations.md, Search attributes).
const (
	AttrString      = hephtype.AttrString
	AttrKeyword     = hephtype.AttrKeyword
	AttrKeywordList = hephtype.AttrKeywordList
	AttrInt         = hephtype.AttrInt
	AttrFloat       = hephtype.AttrFloat
	AttrBool        = hephtype.AttrBool
	AttrTime        = hephtype.AttrTime
)

// SearchAttribute declares a search attribute of the flow's runs: set at
// start (StartOptions.SearchAttributes) and by step code
// (SetSearchAttribute), filtered in lists (ListOptions.Where). A name that
// is not declared, or a value not of its type, is refused. A bad name or
// type fails Build; declaring a name twice keeps the last type.
func (b *Builder) SearchAttribute(name string, t AttrType) *Builder {
	if b.attrs == nil {
		b.attrs = map[string]AttrType{}
	}
	b.attrs[name] = t
	return b
}

// Metadata attaches JSON values to the flow, by string key.
func (b *Builder) Metadata(m map[string]any) *Builder {
	if b.metadata == nil {
		b.metadata = map[string]any{}
	}
	for k, v := range m {
		b.metadata[k] = v
	}
	return b
}

// Defaults sets options for every step of the flow that does not set them
// itself: Retry, Timeout, Queue and Priority.
func (b *Builder) Defaults(opts ...StepOption) *Builder {
	for _, o := range opts {
		if o != nil {
			o(&b.defaults)
		}
	}
	return b
}

// Start names the step every run begins with (Hephaestus style). Without
// it, every step that no edge leads to starts the run (PgFlow style).
func (b *Builder) Start(step string) *Builder { b.start = step; return b }

// Edge routes the event of step from to one or more targets: several
// targets fan out, and the target Done ends the path.
func (b *Builder) Edge(from, event string, to ...string) *Builder {
	b.edges = append(b.edges, edgeDecl{from: from, event: event, to: to, at: caller(2)})
	return b
}

// Input declares the run input's Go type: Build then checks map steps over
// the input, and runtimes reject input that does not decode into it.
func Input[T any](b *Builder) *Builder { b.inputType = reflect.TypeFor[T](); return b }

func (b *Builder) addStep(name string, kind StepKind, in, out reflect.Type, opts []StepOption) *stepDef {
	d := &stepDef{name: name, kind: kind, inType: in, outType: out, at: caller(3)}
	for _, o := range opts {
		if o != nil {
			o(d)
		}
	}
	if b != nil {
		b.steps = append(b.steps, d)
	}
	return d
}

func (b *Builder) declErr(d *stepDef, msg string) {
	if b != nil {
		b.errs = append(b.errs, &ValidationError{Rule: RuleInvalidOption, Steps: []string{d.name}, At: d.at, Message: fmt.Sprintf("step %q: %s", d.name, msg)})
	}
}

func caller(skip int) string {
	_, file, line, ok := runtime.Caller(skip)
	if !ok {
		return ""
	}
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return fmt.Sprintf("%s:%d", file, line)
}

// Flow is a validated, immutable flow definition.
type Flow struct {
	name      string
	version   int
	key       string
	scope     KeyScope
	tags      []string
	metadata  map[string]json.RawMessage
	start     string
	inputType reflect.Type
	inputName string
	// stub: built by FromSpec, without step code.
	stub      bool
	steps     []*stepDef
	byName    map[string]*stepDef
	byKey     map[string]*stepDef
	specs     []StepSpec
	edges     []Edge
	graph     *engine.Graph
	shape     string
	schedules []Schedule
	// timeout is the runs' default execution timeout (0: none).
	timeout time.Duration
	// concurrency computes the runs' concurrency key (concurrency.go).
	concurrency *concurrency
	attrs       map[string]AttrType
}

// StepSpec is a step as a runtime sees it, with every option resolved.
type StepSpec struct {
	Name        string
	Key         string
	Kind        StepKind
	Events      []string
	DependsOn   []string
	Retry       RetryPolicy
	Timeout     time.Duration
	Queue       string
	Priority    int
	Waits       bool
	WaitTimeout time.Duration
	// MapSource is the step a map step iterates over ("" for the run
	// input), and MapField the selected field, if any.
	MapSource string
	MapField  string
	// Reads lists the steps whose outputs the step's context holds, when
	// it declares them with the Reads option; nil means every ancestor.
	Reads []string
	// Remote is the handler of a remote step (Remote, RemoteMap), whose
	// tasks workers outside the process run; "" for a step run by step
	// code.
	Remote string `json:",omitempty"`
}

// Edge is one resolved edge of the flow: From emitting Event leads to To
// (a step name or Done).
type Edge struct {
	From, Event, To string
}

// Name returns the flow's name.
func (f *Flow) Name() string { return f.name }

// Version returns the flow's version.
func (f *Flow) Version() int { return f.version }

// BusinessKey returns the key name ("" when the flow has none) and scope.
func (f *Flow) BusinessKey() (string, KeyScope) { return f.key, f.scope }

// Tags returns the flow's tags.
func (f *Flow) Tags() []string { return slices.Clone(f.tags) }

// ExecutionTimeout is the runs' default execution timeout
// (Builder.ExecutionTimeout); zero for none.
func (f *Flow) ExecutionTimeout() time.Duration { return f.timeout }

// SearchAttributes returns the declared search attributes of the flow's
// runs (Builder.SearchAttribute), by name.
func (f *Flow) SearchAttributes() map[string]AttrType { return maps.Clone(f.attrs) }

// Metadata returns the flow's metadata as JSON values.
func (f *Flow) Metadata() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(f.metadata))
	for k, v := range f.metadata {
		m[k] = v
	}
	return m
}

// InputType returns the declared run input type, or nil.
func (f *Flow) InputType() reflect.Type { return f.inputType }

// Steps returns the flow's steps in declaration order.
func (f *Flow) Steps() []StepSpec { return slices.Clone(f.specs) }

// Step returns the named step.
func (f *Flow) Step(name string) (StepSpec, bool) {
	d, ok := f.byName[name]
	if !ok {
		return StepSpec{}, false
	}
	for _, s := range f.specs {
		if s.Name == d.name {
			return s, true
		}
	}
	return StepSpec{}, false
}

// Edges returns every edge of the flow.
func (f *Flow) Edges() []Edge { return slices.Clone(f.edges) }

// Shape is a fingerprint of everything that decides how runs of the flow
// proceed (steps, edges, events, options). Two definitions of one name and
// version must have the same shape.
func (f *Flow) Shape() string { return f.shape }

// The runtimes of this module reach the compiled graph through package
// internal/flowgraph, so that no internal type is part of flow's API.
func init() {
	flowgraph.Register(func(v any) (*engine.Graph, bool) {
		f, ok := v.(*Flow)
		if !ok || f == nil || f.graph == nil {
			return nil, false
		}
		return f.graph, true
	})
}

// MustBuild is Build for package-level variables: it panics with the
// validation errors.
func (b *Builder) MustBuild() *Flow {
	f, err := b.Build()
	if err != nil {
		panic(err)
	}
	return f
}

// resolve applies the flow defaults and built-in defaults to d.
func (b *Builder) resolve(d *stepDef) StepSpec {
	s := StepSpec{
		Name: d.name, Key: d.contextKey(), Kind: d.kind,
		DependsOn: slices.Clone(d.deps), Waits: d.waits, WaitTimeout: d.waitTimeout,
		Timeout: DefaultTimeout, Queue: DefaultQueue, Remote: d.remote,
	}
	if d.readsSet {
		s.Reads = append([]string{}, d.reads...)
	}
	s.Retry = DefaultRetryPolicy
	if b.defaults.retry != nil {
		s.Retry = b.defaults.retry.merge(s.Retry)
	}
	if d.retry != nil {
		s.Retry = d.retry.merge(s.Retry)
	}
	if d.resolved != nil {
		s.Retry = *d.resolved
	}
	for _, t := range []*time.Duration{b.defaults.timeout, d.timeout} {
		if t != nil {
			s.Timeout = *t
		}
	}
	for _, q := range []*string{b.defaults.queue, d.queue} {
		if q != nil {
			s.Queue = *q
		}
	}
	for _, p := range []*int{b.defaults.priority, d.priority} {
		if p != nil {
			s.Priority = *p
		}
	}
	return s
}

// shapeOf fingerprints the flow.
func shapeOf(f *Flow) string {
	type stepShape struct {
		StepSpec
		Retry [5]string
		In    string
		Out   string
	}
	type shape struct {
		Name     string
		Version  int
		Key      string
		Scope    KeyScope
		Start    string
		Steps    []stepShape
		Edges    []Edge
		Tags     []string
		Metadata map[string]json.RawMessage
	}
	sh := shape{Name: f.name, Version: f.version, Key: f.key, Scope: f.scope, Start: f.start, Edges: f.edges, Tags: f.tags, Metadata: f.metadata}
	for i, s := range f.specs {
		r := s.Retry
		ss := stepShape{StepSpec: s, In: f.steps[i].inTypeName(), Out: f.steps[i].outTypeName()}
		ss.Retry = [5]string{fmt.Sprint(r.MaxAttempts), r.InitialBackoff.String(), r.MaxBackoff.String(), fmt.Sprint(r.Multiplier), fmt.Sprint(r.Jitter)}
		ss.StepSpec.Retry = RetryPolicy{}
		sh.Steps = append(sh.Steps, ss)
	}
	b, _ := json.Marshal(sh)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
