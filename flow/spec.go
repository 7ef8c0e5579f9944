package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A flow as data: Spec is everything a process needs to start a run of a
// flow and to show it (steps, edges, events, options, business key) but
// not the step code. Every process publishes the specs of the flows it
// registers to the deployment's catalog; a process without the code
// rebuilds the flow with FromSpec, as a stub whose Shape equals the
// original's, and starts, resumes, cancels and shows its runs, while a
// worker that has the code runs their steps.

// Spec describes a flow without its code. Its JSON form is what the
// catalog stores.
type Spec struct {
	Name        string                     `json:"name"`
	Version     int                        `json:"version"`
	BusinessKey string                     `json:"business_key,omitempty"`
	KeyScope    KeyScope                   `json:"key_scope,omitempty"`
	Tags        []string                   `json:"tags,omitempty"`
	Metadata    map[string]json.RawMessage `json:"metadata,omitempty"`
	// Start is the step every run begins with ("" when the steps that no
	// edge leads to start it).
	Start string     `json:"start,omitempty"`
	Steps []SpecStep `json:"steps"`
	Edges []SpecEdge `json:"edges"`
	// ConcurrencyKeyFrom is the input path of the runs' concurrency key
	// (Builder.ConcurrencyKeyFrom).
	ConcurrencyKeyFrom string `json:"concurrency_key_from,omitempty"`
	// ConcurrencyKeyFunc: the key is computed by a Go function
	// (ConcurrencyKey), which cannot be published: a start from a process
	// without the code must give the key itself, or it is refused.
	ConcurrencyKeyFunc bool `json:"concurrency_key_func,omitempty"`
	// SearchAttributes are the runs' declared search attributes
	// (Builder.SearchAttribute).
	SearchAttributes map[string]AttrType `json:"search_attributes,omitempty"`
	// InputType is the Go type of the run input (Input), "" if undeclared.
	InputType string `json:"input_type,omitempty"`
	// Shape is the flow's Shape().
	Shape string `json:"shape"`
}

// SpecStep is a step of a Spec, with every option resolved.
type SpecStep struct {
	Name string   `json:"name"`
	Key  string   `json:"key"`
	Kind StepKind `json:"kind"`
	// Events are the events the step declares (flow.Events), without the
	// built-in timeout and failed; EventsDeclared tells declared events
	// from the implicit "ok".
	Events         []string  `json:"events"`
	EventsDeclared bool      `json:"events_declared,omitempty"`
	DependsOn      []string  `json:"depends_on,omitempty"`
	Retry          SpecRetry `json:"retry"`
	Timeout        string    `json:"timeout"`
	Queue          string    `json:"queue"`
	Priority       int       `json:"priority,omitempty"`
	Waits          bool      `json:"waits,omitempty"`
	WaitTimeout    string    `json:"wait_timeout,omitempty"`
	// MapSource and MapField: see StepSpec.
	MapSource string `json:"map_source,omitempty"`
	MapField  string `json:"map_field,omitempty"`
	// Reads, when ReadsDeclared, are the steps the step reads (Reads).
	Reads         []string `json:"reads,omitempty"`
	ReadsDeclared bool     `json:"reads_declared,omitempty"`
	Remote        string   `json:"remote,omitempty"`
	// InputType and OutputType are the Go types of the step's input and
	// output.
	InputType  string `json:"input_type,omitempty"`
	OutputType string `json:"output_type,omitempty"`
}

// SpecRetry is a step's retry policy as data (a NonRetryable function is
// code, and is not published).
type SpecRetry struct {
	MaxAttempts    int     `json:"max_attempts"`
	InitialBackoff string  `json:"initial_backoff"`
	MaxBackoff     string  `json:"max_backoff"`
	Multiplier     float64 `json:"multiplier"`
	Jitter         float64 `json:"jitter"`
}

// SpecEdge is an edge of a Spec.
type SpecEdge struct {
	From  string `json:"from"`
	Event string `json:"event"`
	To    string `json:"to"`
}

// ErrNoCode is the error of a stub's step (FromSpec): this process has
// the flow from the catalog, not its code.
var ErrNoCode = errors.New("the flow was loaded from the catalog: this process does not have its code")

// Spec returns the flow as data.
func (f *Flow) Spec() *Spec {
	s := &Spec{
		Name: f.name, Version: f.version, BusinessKey: f.key, KeyScope: f.scope,
		Tags: slices.Clone(f.tags), Start: f.start, InputType: f.inputTypeName(), Shape: f.shape,
		Steps: make([]SpecStep, len(f.specs)), Edges: make([]SpecEdge, len(f.edges)),
	}
	if len(f.metadata) > 0 {
		s.Metadata = f.Metadata()
	}
	if len(f.attrs) > 0 {
		s.SearchAttributes = f.SearchAttributes()
	}
	if c := f.concurrency; c != nil {
		s.ConcurrencyKeyFrom, s.ConcurrencyKeyFunc = c.path, c.fn != nil && c.path == ""
	}
	for i, e := range f.edges {
		s.Edges[i] = SpecEdge(e)
	}
	for i, sp := range f.specs {
		d := f.steps[i]
		st := SpecStep{
			Name: sp.Name, Key: sp.Key, Kind: sp.Kind, EventsDeclared: d.eventsSet,
			DependsOn: slices.Clone(sp.DependsOn), Timeout: sp.Timeout.String(), Queue: sp.Queue, Priority: sp.Priority,
			Waits: sp.Waits, MapSource: sp.MapSource, MapField: sp.MapField,
			Reads: slices.Clone(sp.Reads), ReadsDeclared: d.readsSet, Remote: sp.Remote,
			InputType: d.inTypeName(), OutputType: d.outTypeName(),
			Retry: SpecRetry{
				MaxAttempts: sp.Retry.MaxAttempts, InitialBackoff: sp.Retry.InitialBackoff.String(),
				MaxBackoff: sp.Retry.MaxBackoff.String(), Multiplier: sp.Retry.Multiplier, Jitter: sp.Retry.Jitter,
			},
		}
		if sp.WaitTimeout > 0 {
			st.WaitTimeout = sp.WaitTimeout.String()
		}
		st.Events = []string{EventOK}
		if d.eventsSet {
			st.Events = slices.Clone(d.events)
		}
		s.Steps[i] = st
	}
	return s
}

// Stub reports whether the flow was built by FromSpec: it has no step
// code, and a runtime must not run its steps.
func (f *Flow) Stub() bool { return f.stub }

// FromSpec builds the flow a Spec describes, validated as Build does, as
// a stub: its steps have no code (running one fails with ErrNoCode), and
// its Shape equals the original's. A spec whose shape does not match
// what it describes is refused.
func FromSpec(s *Spec) (*Flow, error) {
	if s == nil {
		return nil, errors.New("flow: FromSpec: nil spec")
	}
	b := New(s.Name).Version(s.Version).BusinessKey(s.BusinessKey, s.KeyScope).Tags(s.Tags...).Start(s.Start)
	b.inputName = s.InputType
	for name, t := range s.SearchAttributes {
		b.SearchAttribute(name, t)
	}
	if len(s.Metadata) > 0 {
		m := make(map[string]any, len(s.Metadata))
		for k, v := range s.Metadata {
			m[k] = v
		}
		b.Metadata(m)
	}
	switch {
	case s.ConcurrencyKeyFrom != "":
		b.ConcurrencyKeyFrom(s.ConcurrencyKeyFrom)
	case s.ConcurrencyKeyFunc:
		b.concurrency = &concurrency{fn: func(json.RawMessage) (string, error) {
			return "", fmt.Errorf("flow %q computes it with a Go function that this process does not have; give the concurrency key with the start", s.Name)
		}}
	}
	for i := range s.Steps {
		d, err := stubStep(&s.Steps[i])
		if err != nil {
			return nil, fmt.Errorf("flow: FromSpec %q version %d: %w", s.Name, s.Version, err)
		}
		b.steps = append(b.steps, d)
	}
	for _, e := range s.Edges {
		b.edges = append(b.edges, edgeDecl{from: e.From, event: e.Event, to: []string{e.To}, at: "spec"})
	}
	f, err := b.Build()
	if err != nil {
		return nil, err
	}
	f.stub = true
	if s.Shape != "" && f.shape != s.Shape {
		return nil, fmt.Errorf("flow: FromSpec %q version %d: the spec's shape %s is not the shape of what it describes (%s)", s.Name, s.Version, s.Shape, f.shape)
	}
	return f, nil
}

// stubStep is the definition of a step of a stub.
func stubStep(st *SpecStep) (*stepDef, error) {
	d := &stepDef{
		name: st.Name, kind: st.Kind, at: "spec", inName: st.InputType, outName: st.OutputType,
		deps: slices.Clone(st.DependsOn), depsSet: len(st.DependsOn) > 0, key: st.Key, keySet: st.Key != st.Name,
		remote: st.Remote, remoteSet: st.Remote != "",
		run: func(context.Context, *Call) (Outcome, error) { return Outcome{}, NonRetryable(ErrNoCode) },
	}
	if st.EventsDeclared {
		d.events, d.eventsSet = slices.Clone(st.Events), true
	}
	parse := func(what, v string) (time.Duration, error) {
		if v == "" {
			return 0, nil
		}
		x, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("step %q: %s %q: %w", st.Name, what, v, err)
		}
		return x, nil
	}
	var err error
	var timeout, wait, initial, maxb time.Duration
	for what, p := range map[string]struct {
		v   string
		dst *time.Duration
	}{"timeout": {st.Timeout, &timeout}, "wait_timeout": {st.WaitTimeout, &wait}, "retry.initial_backoff": {st.Retry.InitialBackoff, &initial}, "retry.max_backoff": {st.Retry.MaxBackoff, &maxb}} {
		if *p.dst, err = parse(what, p.v); err != nil {
			return nil, err
		}
	}
	queue, prio := st.Queue, st.Priority
	d.timeout, d.queue, d.priority = &timeout, &queue, &prio
	d.resolved = &RetryPolicy{MaxAttempts: st.Retry.MaxAttempts, InitialBackoff: initial, MaxBackoff: maxb, Multiplier: st.Retry.Multiplier, Jitter: st.Retry.Jitter}
	if st.Waits {
		d.waits, d.waitsSet, d.waitTimeout = true, true, wait
	}
	if st.Kind == KindMap {
		d.overSet, d.overStep, d.overField = true, st.MapSource, st.MapField
	}
	if st.ReadsDeclared {
		d.reads, d.readsSet = append([]string{}, st.Reads...), true
	}
	return d, nil
}

func (f *Flow) inputTypeName() string {
	if f.inputType == nil {
		return f.inputName
	}
	return f.inputType.String()
}

func (d *stepDef) inTypeName() string {
	if d.inType == nil {
		return d.inName
	}
	return d.inType.String()
}

func (d *stepDef) outTypeName() string {
	if d.outType == nil {
		return d.outName
	}
	return d.outType.String()
}
