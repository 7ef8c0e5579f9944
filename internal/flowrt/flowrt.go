// Package flowrt is the flow runtime: it runs DAG flows (package flow) on
// the durable core. It turns starts, step outcomes, fired timers, resumes
// and cancellations into engine events, applies them with the pure engine
// (internal/engine) inside the run's transaction, and translates the
// engine's decision into what the store writes: the run's state, history
// and tasks.
//
// It owns the registry of flow versions, the encoding of a flow run's
// state, and the in-process executor of flow tasks (steps, map elements
// and timers), whose outcome it commits with a change fenced by the task's
// lease. Complete commits an outcome computed elsewhere (a remote worker)
// through the same fenced change. It may not claim tasks, hold leases or
// run loops of its own (the worker pool does), and knows nothing of
// code-first workflows: a cancellation of another kind of run is handed
// to the caller's function.
package flowrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Errors of the flow runtime (re-exported by the root package).
var (
	// ErrFlowNotFound: no flow of that name (or version) is registered.
	ErrFlowNotFound = hephtype.ErrFlowNotFound
	// ErrFlowConflict: a flow was registered twice with the same name and
	// version but a different shape.
	ErrFlowConflict = hephtype.ErrFlowConflict
)

// Config configures a Runtime.
type Config struct {
	Store          store.Store
	Clock          clock.Clock
	Logger         *slog.Logger
	Telemetry      *telemetry.Hub
	Committer      *commit.Committer
	WorkerID       string
	MaxPayloadSize int
	// Registered is called after a registration changed what this
	// process can run.
	Registered func()
	// Load, when set, is the loader hook: it returns the flow version of
	// a run that is not registered (a stored document the run is pinned
	// to), which the runtime then registers. It is called outside any
	// transaction, before a task of that version runs.
	Load func(ctx context.Context, runID, name string, version int) (*flow.Flow, error)
	// Catalog, when set, returns a stub (flow.FromSpec) of a flow version
	// that is not registered here, from the deployment's catalog (version
	// 0: the latest published). The runtime keeps stubs apart from the
	// flows registered: it starts, resumes, cancels and decides runs with
	// them, but never claims nor runs their steps (Handlers leaves them
	// out).
	Catalog func(ctx context.Context, name string, version int) (*flow.Flow, error)
	// CheckInput, when set, checks a start's input (JSON) against the
	// flow's input schema; its error names what is wrong.
	CheckInput func(f *flow.Flow, input json.RawMessage) error
}

// Reserved run metadata keys: set by the runtime from StartOptions, never
// from a flow's or a caller's metadata.
const (
	// MetaCreatedBy holds the user who started the run (a JSON string).
	MetaCreatedBy = "created_by"
	// MetaOnBehalfOf holds the user a run was started on behalf of (a JSON
	// string), by a caller allowed to act as others.
	MetaOnBehalfOf = "on_behalf_of"
	// MetaDocument holds the stored document a run is pinned to.
	MetaDocument = hephtype.MetaDocument
	// MetaJob marks a job's run (StartOptions.Job).
	MetaJob = hephtype.MetaJob
)

// Runtime runs flows.
type Runtime struct {
	cfg Config

	mu    sync.RWMutex
	flows map[string]map[int]*flow.Flow
	// stubs are flow versions known from the catalog only (Config.Catalog).
	stubs map[string]map[int]*flow.Flow

	// creators caches the created_by of runs (it never changes), so a
	// run's steps read it from the store once per process.
	cmu      sync.Mutex
	creators map[string]creator
}

// maxCreators bounds the created_by cache; it is emptied when full.
const maxCreators = 4096

// New returns a Runtime.
func New(cfg *Config) *Runtime {
	r := &Runtime{cfg: *cfg, flows: map[string]map[int]*flow.Flow{}, stubs: map[string]map[int]*flow.Flow{}}
	telemetry.Defaults(&r.cfg.Clock, &r.cfg.Logger, &r.cfg.Telemetry)
	if r.cfg.MaxPayloadSize <= 0 {
		r.cfg.MaxPayloadSize = limits.DefaultPayloadSize
	}
	return r
}

// Register adds a flow version. Registering the same version again with
// the same shape is a no-op; with a different shape it is
// ErrFlowConflict.
func (r *Runtime) Register(f *flow.Flow) error {
	r.mu.Lock()
	vs := r.flows[f.Name()]
	if vs == nil {
		vs = map[int]*flow.Flow{}
		r.flows[f.Name()] = vs
	}
	if old, ok := vs[f.Version()]; ok && old.Shape() != f.Shape() {
		r.mu.Unlock()
		return fmt.Errorf("register flow %q version %d: %w; give the changed flow a new version", f.Name(), f.Version(), ErrFlowConflict)
	}
	vs[f.Version()] = f
	r.mu.Unlock()
	if r.cfg.Registered != nil {
		r.cfg.Registered()
	}
	return nil
}

// Flow returns a registered version of a flow; version 0 means the latest.
func (r *Runtime) Flow(name string, version int) (*flow.Flow, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return pick(r.flows[name], name, version)
}

// Lookup returns a registered version of a flow, or else a stub of it
// known from the catalog (AddStub); version 0 means the latest registered,
// or the latest stub when none is registered.
func (r *Runtime) Lookup(name string, version int) (*flow.Flow, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, err := pick(r.flows[name], name, version)
	if err != nil && (version != 0 || len(r.flows[name]) == 0) {
		if s, serr := pick(r.stubs[name], name, version); serr == nil {
			return s, nil
		}
	}
	return f, err
}

// AddStub keeps a stub (flow.FromSpec) of a flow version that is not
// registered: Lookup finds it, Handlers leaves it out. A stub of a
// registered version is ignored.
func (r *Runtime) AddStub(f *flow.Flow) error {
	if !f.Stub() {
		return fmt.Errorf("flow %q version %d is no stub: register it", f.Name(), f.Version())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.flows[f.Name()][f.Version()]; ok {
		return nil
	}
	vs := r.stubs[f.Name()]
	if vs == nil {
		vs = map[int]*flow.Flow{}
		r.stubs[f.Name()] = vs
	}
	vs[f.Version()] = f
	return nil
}

// pick returns version of vs (0: the highest).
func pick(vs map[int]*flow.Flow, name string, version int) (*flow.Flow, error) {
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %q is not registered", ErrFlowNotFound, name)
	}
	if version == 0 {
		for v := range vs {
			version = max(version, v)
		}
	}
	f, ok := vs[version]
	if !ok {
		return nil, fmt.Errorf("%w: %q has no version %d registered", ErrFlowNotFound, name, version)
	}
	return f, nil
}

// Ensure registers the flow version of a run through the loader hook
// (Config.Load) when it is not registered yet, or else keeps its stub
// from the catalog (Config.Catalog). It returns the loader's error, or
// ErrFlowNotFound without either.
func (r *Runtime) Ensure(ctx context.Context, runID, name string, version int) error {
	_, err := r.Lookup(name, version)
	if err == nil || (r.cfg.Load == nil && r.cfg.Catalog == nil) {
		return err
	}
	var f *flow.Flow
	if r.cfg.Load != nil {
		f, err = r.cfg.Load(ctx, runID, name, version)
	}
	if (f == nil || errors.Is(err, ErrFlowNotFound)) && r.cfg.Catalog != nil {
		if stub, cerr := r.cfg.Catalog(ctx, name, version); cerr == nil {
			return r.AddStub(stub)
		} else if err == nil || !errors.Is(cerr, ErrFlowNotFound) {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("load flow %q version %d for run %s: %w", name, version, runID, err)
	}
	if f.Name() != name || f.Version() != version {
		return fmt.Errorf("load flow %q version %d for run %s: %w: the loader returned %q version %d", name, version, runID, ErrFlowNotFound, f.Name(), f.Version())
	}
	return r.Register(f)
}

// Handlers returns the handler of every registered flow version.
func (r *Runtime) Handlers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for name, vs := range r.flows {
		for v := range vs {
			out = append(out, store.FlowHandler(name, v))
		}
	}
	return out
}

// StartOptions are the optional parameters of a start.
type StartOptions struct {
	BusinessValue string
	Version       int
	Tags          []string
	Metadata      map[string]any
	// OnBehalfOf is stored as the run's MetaOnBehalfOf.
	OnBehalfOf string
	// CreatedBy is stored as the run's MetaCreatedBy; Document (any JSON
	// value) as its MetaDocument.
	CreatedBy string
	Document  any
	// Job marks the run a job's: MetaJob is true in its metadata.
	Job bool
	// RunID, when set, is the new run's id instead of a random one: a
	// second start with the same id is refused with store.ErrRunExists
	// (schedules derive it from the tick, so a tick starts one run).
	RunID string
	// RunAt, when after now, delays the run's first tasks until then.
	RunAt time.Time
	// ConcurrencyKey is stored on the run (store.Run.ConcurrencyKey).
	ConcurrencyKey string
	// Queue and Priority, when set, replace the steps' queue and
	// priority for every task of the run. They are kept in the run's
	// state, so retries and snoozes keep them.
	Queue    string
	Priority *int
	// BusinessID, when set, is the run's business id ("key::value") with
	// the scope KeyScope (ScopeActive or ScopeForever), instead of the
	// flow's business key, which the flow must then not declare: jobs
	// choose their uniqueness per insert.
	BusinessID string
	KeyScope   businesskey.Scope
	// ExecutionTimeout, when positive, is how long the run may take,
	// counted from its start (from RunAt, when that is later): then it
	// times out (store.Run.Deadline). Zero takes the flow's own
	// (flow.Builder.ExecutionTimeout); negative is invalid.
	ExecutionTimeout time.Duration
	// SearchAttributes are the run's first search attributes, of those
	// the flow declares (store.AttrsOf).
	SearchAttributes map[string]any
	// VersionGen is the version generation of the policy Version was
	// chosen from (store.NewRun.VersionGen; 0: none).
	VersionGen int64
}

// Prepare checks a start request and returns the run to create, without
// creating it: for a create in a transaction of the caller's own
// (store.TxInserter). Start and StartMany create what it returns.
func (r *Runtime) Prepare(flowName string, input any, opts *StartOptions) (*store.NewRun, error) {
	nr, _, err := r.newRun(flowName, input, opts)
	return nr, err
}

// Start creates a run of the named flow and returns it as stored.
func (r *Runtime) Start(ctx context.Context, flowName string, input any, opts *StartOptions) (*store.Run, error) {
	nr, _, err := r.newRun(flowName, input, opts)
	if err != nil {
		return nil, err
	}
	res, err := r.cfg.Committer.Submit(ctx, store.Change{Create: nr})
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	return res.Res.Run, nil
}

// StartRequest is one run of StartMany.
type StartRequest struct {
	Input   any
	Options *StartOptions
}

// StartMany creates many runs of a flow, committed together in batches.
// Every request is checked first; if one is invalid, none is started. A
// run the store refuses leaves a nil, and the error joins the reasons,
// each naming its request's index.
func (r *Runtime) StartMany(ctx context.Context, flowName string, reqs []StartRequest) ([]*store.Run, error) {
	changes := make([]store.Change, len(reqs))
	for i, rq := range reqs {
		nr, _, err := r.newRun(flowName, rq.Input, rq.Options)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		changes[i] = store.Change{Create: nr}
	}
	results, err := r.cfg.Committer.SubmitAll(ctx, changes)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	runs := make([]*store.Run, len(reqs))
	var errs []error
	for i, res := range results {
		if res.Err != nil {
			errs = append(errs, fmt.Errorf("start %q, request %d: %w", flowName, i, res.Err))
			continue
		}
		runs[i] = res.Res.Run
	}
	return runs, errors.Join(errs...)
}

// newRun checks a start request and builds the run to create.
func (r *Runtime) newRun(flowName string, input any, opts *StartOptions) (*store.NewRun, *flow.Flow, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	f, err := r.Lookup(flowName, opts.Version)
	if err != nil {
		return nil, nil, err
	}
	raw, err := r.encodeInput(f, input)
	if err != nil {
		return nil, nil, err
	}
	if err := limits.Input(raw, r.cfg.MaxPayloadSize, "the input"); err != nil {
		return nil, nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	key, scope := f.BusinessKey()
	var bid string
	switch {
	case key != "" && opts.BusinessValue == "":
		return nil, nil, fmt.Errorf("start %q: %w: %w: the flow has the business key %q; give its value (such as \"order-42\")", flowName, limits.ErrInvalidInput, hephtype.ErrBusinessValueRequired, key)
	case key != "":
		if bid, err = businesskey.New(key, opts.BusinessValue, scope, nil); err != nil {
			return nil, nil, fmt.Errorf("start %q: %w: %w", flowName, limits.ErrInvalidInput, err)
		}
	case opts.BusinessValue != "":
		return nil, nil, fmt.Errorf("start %q: %w: the flow declares no business key, so BusinessValue must be empty", flowName, limits.ErrInvalidInput)
	case opts.BusinessID != "":
		if _, _, err := businesskey.Parse(opts.BusinessID); err != nil {
			return nil, nil, fmt.Errorf("start %q: %w: %w", flowName, limits.ErrInvalidInput, err)
		}
		if opts.KeyScope != businesskey.ScopeActive && opts.KeyScope != businesskey.ScopeForever {
			return nil, nil, fmt.Errorf("start %q: %w: key scope %q; a business id given at start needs %q or %q", flowName, limits.ErrInvalidInput, opts.KeyScope, businesskey.ScopeActive, businesskey.ScopeForever)
		}
		bid, scope = opts.BusinessID, opts.KeyScope
	}
	if key != "" && opts.BusinessID != "" {
		return nil, nil, fmt.Errorf("start %q: %w: the flow declares business key %q, so it gives the run its business id; BusinessID must be empty", flowName, limits.ErrInvalidInput, key)
	}
	if len(opts.Queue) > hephtype.MaxNameLen {
		return nil, nil, fmt.Errorf("start %q: %w: queue name %.20q… is %d bytes long; the limit is %d", flowName, limits.ErrInvalidInput, opts.Queue, len(opts.Queue), hephtype.MaxNameLen)
	}
	meta := f.Metadata()
	delete(meta, MetaCreatedBy) // a flow cannot say who started its runs
	delete(meta, MetaOnBehalfOf)
	delete(meta, MetaDocument)
	delete(meta, MetaJob)
	for k, v := range opts.Metadata {
		if k == MetaCreatedBy || k == MetaOnBehalfOf || k == MetaDocument || k == MetaJob {
			return nil, nil, fmt.Errorf("start %q: %w: metadata key %q is reserved; set StartOptions.CreatedBy, StartOptions.OnBehalfOf or start a stored document instead", flowName, limits.ErrInvalidInput, k)
		}
		b, err := json.Marshal(v)
		if err != nil || k == "" {
			return nil, nil, fmt.Errorf("start %q: %w: metadata %q is not a JSON value", flowName, limits.ErrInvalidInput, k)
		}
		meta[k] = b
	}
	if opts.CreatedBy != "" {
		meta[MetaCreatedBy], _ = json.Marshal(opts.CreatedBy)
	}
	if opts.OnBehalfOf != "" {
		meta[MetaOnBehalfOf], _ = json.Marshal(opts.OnBehalfOf)
	}
	if opts.Document != nil {
		b, err := json.Marshal(opts.Document)
		if err != nil {
			return nil, nil, fmt.Errorf("start %q: %w: the document reference is not a JSON value", flowName, limits.ErrInvalidInput)
		}
		meta[MetaDocument] = b
	}
	if opts.Job {
		meta[MetaJob] = json.RawMessage("true")
	}
	tags := f.Tags()
	for _, t := range opts.Tags {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	d := engine.Start(flowgraph.Of(f), raw)
	d.State.Queue, d.State.Priority = opts.Queue, opts.Priority
	u := translate(f, d, r.cfg.Clock.Now())
	id := newID()
	if opts.RunID != "" {
		id = opts.RunID
	}
	deadline, err := limits.Deadline(r.cfg.Clock.Now(), opts.RunAt, opts.ExecutionTimeout, f.ExecutionTimeout())
	if err != nil {
		return nil, nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	if opts.RunAt.After(r.cfg.Clock.Now()) {
		for i := range u.Tasks {
			if u.Tasks[i].ReadyAt.Before(opts.RunAt) {
				u.Tasks[i].ReadyAt = opts.RunAt
			}
		}
	}
	ckey := opts.ConcurrencyKey
	if ckey == "" {
		if ckey, err = f.ConcurrencyKey(raw); err != nil {
			return nil, nil, fmt.Errorf("start %q: %w: concurrency key: %w", flowName, limits.ErrInvalidInput, err)
		}
	}
	if err := store.CheckConcurrencyKey(ckey); err != nil {
		return nil, nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	sattrs, err := store.AttrsOf(f.SearchAttributes(), opts.SearchAttributes)
	if err != nil {
		return nil, nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	nr := &store.NewRun{
		ID: id, Workflow: f.Name(), Version: f.Version(), Kind: hephtype.KindFlow,
		Status: u.Status, Input: raw, BusinessID: bid, KeyScope: scope, Tags: tags, Metadata: meta,
		ConcurrencyKey: ckey, Deadline: deadline, SearchAttributes: sattrs,
		State: u.State, Output: u.Output, Error: u.Error, History: u.History, Tasks: u.Tasks, VersionGen: opts.VersionGen,
	}
	if bid == "" {
		nr.KeyScope = businesskey.ScopeNone
	}
	return nr, f, nil
}

func (r *Runtime) encodeInput(f *flow.Flow, input any) (json.RawMessage, error) {
	raw, err := limits.JSON(input)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w: input %w", f.Name(), limits.ErrInvalidInput, err)
	}
	if r.cfg.CheckInput != nil {
		if err := r.cfg.CheckInput(f, raw); err != nil {
			return nil, fmt.Errorf("start %q: %w: %w", f.Name(), limits.ErrInvalidInput, err)
		}
	}
	if t := f.InputType(); t != nil {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return nil, fmt.Errorf("start %q: %w: input does not decode into %s: %w", f.Name(), limits.ErrInvalidInput, t, err)
		}
	}
	return raw, nil
}

// Resume completes a waiting step of a run with an event the step
// declares (step may be empty when exactly one step waits). The change is
// keyed, so a commit retried after its outcome was lost resumes once.
//
// guard, when not nil, is called with the run's flow and the step to
// resume (the one waiting, when step is empty) before anything changes;
// its error refuses the resume.
func (r *Runtime) Resume(ctx context.Context, runID, step, event string, payload json.RawMessage, guard func(f *flow.Flow, step string) error) error {
	if err := limits.Input(payload, r.cfg.MaxPayloadSize, "the resume payload"); err != nil {
		return fmt.Errorf("resume run %s: %w", runID, err)
	}
	now := r.cfg.Clock.Now()
	decide := func(run *store.Run) (*store.Update, error) {
		step := step
		if step == "" || (guard != nil && run.Kind == hephtype.KindFlow) {
			f, err := r.Lookup(run.Workflow, run.Version)
			if err != nil {
				return nil, err
			}
			if step == "" {
				s, err := loadState(run)
				if err != nil {
					return nil, err
				}
				if step, err = waitingStep(f, s); err != nil {
					return nil, err
				}
			}
			if guard != nil && run.Kind == hephtype.KindFlow {
				if err := guard(f, step); err != nil {
					return nil, err
				}
			}
		}
		return r.decideWith(engine.Resume{Step: step, Event: event, Payload: payload}, now, true)(run)
	}
	_, err := r.submitLoading(ctx, store.Change{RunID: runID, Key: "resume:" + newID(), Decide: decide})
	if errors.Is(err, store.ErrDuplicateChange) {
		err = nil // applied by an earlier attempt of this call's commit
	}
	if err != nil {
		return fmt.Errorf("resume run %s: %w", runID, err)
	}
	return nil
}

func waitingStep(f *flow.Flow, s *engine.State) (string, error) {
	if s.Status.Terminal() {
		return "", fmt.Errorf("%w (status %s)", engine.ErrRunFinished, s.Status)
	}
	var waiting []string
	for i, st := range s.Steps {
		if st.Status == hephtype.StepWaiting {
			waiting = append(waiting, flowgraph.Of(f).Steps[i].Name)
		}
	}
	switch len(waiting) {
	case 0:
		return "", fmt.Errorf("%w: no step of the run is waiting (run is %s)", engine.ErrNotWaiting, s.Status)
	case 1:
		return waiting[0], nil
	}
	return "", fmt.Errorf("%w: several steps are waiting (%v); name one in ResumeOptions.Step", engine.ErrNotWaiting, waiting)
}

// Cancel cancels a run in a keyed change. A run that is not a flow is
// cancelled by other (the workflow runtime's update), when given. It
// returns the run as the change left it.
func (r *Runtime) Cancel(ctx context.Context, runID, reason string, other func(*store.Run) (*store.Update, error)) (*store.Run, error) {
	if reason == "" {
		reason = "cancelled"
	}
	decide := r.decideWith(engine.Cancel{Reason: reason}, r.cfg.Clock.Now(), true)
	// Keyed: a commit retried after its outcome was lost cancels once,
	// and reports success.
	res, err := r.submitLoading(ctx, store.Change{RunID: runID, Key: "cancel:" + newID(), Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindFlow && other != nil {
			return other(run)
		}
		return decide(run)
	}})
	if errors.Is(err, store.ErrDuplicateChange) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cancel run %s: %w", runID, err)
	}
	return res.Res.Run, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// submitLoading submits a change of a run; when it is refused because the
// run's flow version is neither registered nor known here, it loads the
// version (Ensure: a stored document, or a stub from the catalog) and
// submits the change again, once. A refused change wrote nothing.
func (r *Runtime) submitLoading(ctx context.Context, c store.Change) (*commit.Request, error) {
	res, err := r.cfg.Committer.Submit(ctx, c)
	if !errors.Is(err, ErrFlowNotFound) || (r.cfg.Catalog == nil && r.cfg.Load == nil) {
		return res, err
	}
	run, gerr := r.cfg.Store.GetRun(ctx, c.RunID)
	if gerr != nil || run.Kind != hephtype.KindFlow {
		return res, err
	}
	if eerr := r.Ensure(ctx, run.ID, run.Workflow, run.Version); eerr != nil {
		return res, err
	}
	return r.cfg.Committer.Submit(ctx, c)
}

// Execute runs a flow task (a step, a map element or a timer) and commits
// its outcome: the worker pool's in-process executor of flow tasks.
func (r *Runtime) Execute(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
	t := h.Task()
	start := r.cfg.Clock.Now()
	if err := r.Ensure(ctx, t.RunID, t.Workflow, t.Version); err != nil && r.cfg.Load != nil && !errors.Is(err, ErrFlowNotFound) {
		// The store could not be read, or the run's document does not
		// compile here: the task runs again once its lease expires (a
		// run that is no document fails its step below, as without a
		// loader).
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("cannot load the flow of a task", "run", t.RunID, "flow", t.Workflow, "version", t.Version, "err", err)
		}
		return nil, err
	}
	switch t.Kind {
	case store.TaskTimer:
		return r.commitEvent(t, engine.TimerFired{Step: t.Step}, nil, nil, handoff, nil)
	case store.TaskStep:
	default:
		return nil, fmt.Errorf("task kind %q is not a flow task", t.Kind)
	}
	out, err := r.runStep(ctx, h)
	// The attempt's log is stored before its outcome commits (or is
	// dropped), whatever becomes of it.
	h.FlushLogs(context.WithoutCancel(ctx))
	if err != nil {
		// Shutdown, lost lease, cancelled run: the result is dropped; the
		// task runs again once released or once its lease expires.
		return nil, err
	}
	out.StartedAt = start
	out.Details = h.Details()
	return r.Complete(t, out, handoff)
}

// Outcome is what one attempt of a step produced.
type Outcome struct {
	// Event is the event the step emitted ("" is "ok"); Output its output.
	Event  string
	Output json.RawMessage
	// Wait: the step waits to be resumed.
	Wait bool
	// Err, when not empty, failed the attempt; Retryable says whether the
	// step's retry policy may try again.
	Err       string
	Retryable bool
	// Snoozed: the attempt asked to run again after Snooze, without
	// counting an attempt (flow.Snooze).
	Snoozed bool
	Snooze  time.Duration
	// Cancelled: the attempt cancelled its run, with CancelReason
	// (flow.Cancel).
	Cancelled    bool
	CancelReason string
	// Details are the attempt's last heartbeat details: a retry reads
	// them.
	Details json.RawMessage
	// StartedAt is when the attempt started (for its step_started entry);
	// zero means the commit's time.
	StartedAt time.Time
	// Worker names who ran the attempt (for its step_started entry): a
	// worker outside the process; "" is this process (Config.WorkerID).
	Worker string
	// SearchAttributes are upserted on the run with a result that
	// completes the attempt (not with a failure, a snooze or a cancel):
	// in the same fenced change (flow.SetSearchAttributes).
	SearchAttributes map[string]store.Attr
}

// Complete commits the outcome of a step task's attempt, fenced by the
// task's lease (t.Lease(): its id, owner and claim token): the change is
// applied only while that lease is held, and deletes the task. It is how
// every executor ends a step, in this process or a remote one; a
// completion that lost its lease (another worker claimed the task since)
// fails with store.ErrLeaseLost and writes nothing. When handoff is not
// empty the commit may claim tasks of that queue for the caller.
func (r *Runtime) Complete(t *store.Task, o *Outcome, handoff string) ([]*store.Task, error) {
	if t.Kind != store.TaskStep {
		return nil, fmt.Errorf("task %d is a %s, not a step", t.ID, t.Kind)
	}
	if o.Err == "" {
		if err := limits.Payload(o.Output, r.cfg.MaxPayloadSize, "output of step "+strconv.Quote(t.Step)); err != nil {
			o = &Outcome{Err: err.Error(), Details: o.Details, StartedAt: o.StartedAt, Worker: o.Worker}
		}
	}
	if o.Err == "" && !o.Wait && o.Details != nil {
		if err := limits.Payload(o.Details, r.cfg.MaxPayloadSize, "heartbeat details of step "+strconv.Quote(t.Step)); err != nil {
			o.Details = nil
		}
	}
	o, err := r.offloadOutput(t, o)
	if err != nil {
		return nil, err
	}
	var ev engine.Event
	switch {
	case o.Snoozed:
		ev = engine.StepSnoozed{Step: t.Step, Index: t.Index, Attempt: t.Attempt, After: max(o.Snooze, 0)}
	case o.Cancelled:
		ev = engine.StepCancelled{Step: t.Step, Index: t.Index, Attempt: t.Attempt, Reason: o.CancelReason}
	case o.Err != "":
		ev = stepFailure(t, o.Err, o.Retryable)
	case t.Index >= 0 && o.Wait:
		ev = stepFailure(t, fmt.Sprintf("element %d of map step %q returned Wait", t.Index, t.Step), false)
	case t.Index >= 0:
		ev = engine.ItemCompleted{Step: t.Step, Index: t.Index, Attempt: t.Attempt, Output: o.Output}
	case o.Wait:
		ev = engine.StepWaiting{Step: t.Step, Attempt: t.Attempt}
	default:
		ev = engine.StepCompleted{Step: t.Step, Attempt: t.Attempt, Event: o.Event, Output: o.Output}
	}
	at := o.StartedAt
	if at.IsZero() {
		at = r.cfg.Clock.Now()
	}
	// Indexed as the engine's step entries: 0 for a step, the element for
	// a map step.
	by := o.Worker
	if by == "" {
		by = r.cfg.WorkerID
	}
	started := worker.Started(by, t, at, t.Step, max(t.Index, 0))
	var attrs map[string]store.Attr
	if o.Err == "" && !o.Snoozed && !o.Cancelled {
		attrs = o.SearchAttributes
	}
	return r.commitEvent(t, ev, &started, o.Details, handoff, attrs)
}

// offloadOutput offloads the large values of a step's output before the
// change that records it (payloadstore.Offloader): the engine's state then
// holds their references, and the commit writes no blob. An output that
// holds a reference of its own fails the step; a blob store that fails
// fails the completion (the task's lease runs out, and it runs again).
func (r *Runtime) offloadOutput(t *store.Task, o *Outcome) (*Outcome, error) {
	if o.Err != "" || o.Wait || o.Snoozed || o.Cancelled || len(o.Output) == 0 {
		return o, nil
	}
	off := payloadstore.Offloader(r.cfg.Store)
	if off == nil {
		return o, nil
	}
	out, err := off(context.Background(), o.Output)
	switch {
	case errors.Is(err, payloadstore.ErrForeignReference):
		return &Outcome{Err: fmt.Sprintf("output of step %q: %v", t.Step, err), Details: o.Details, StartedAt: o.StartedAt, Worker: o.Worker}, nil
	case err != nil:
		return nil, fmt.Errorf("complete %s of run %s: offload the output: %w", store.DescribeTask(t), t.RunID, err)
	}
	c := *o
	c.Output = out
	return &c, nil
}

// commitEvent applies ev to the task's run in a change fenced by the
// task's lease, upserting attrs on the run with it.
func (r *Runtime) commitEvent(t *store.Task, ev engine.Event, started *store.NewEvent, details json.RawMessage, handoff string, attrs map[string]store.Attr) ([]*store.Task, error) {
	lease := t.Lease()
	decide := r.decideWith(ev, r.cfg.Clock.Now(), false)
	res, err := r.cfg.Committer.SubmitHandoff(commit.ForTask(context.Background(), t), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(run *store.Run) (*store.Update, error) {
		u, err := decide(run)
		if err != nil || len(u.History) == 0 {
			return u, err // stale: nothing to tell
		}
		if started != nil {
			u.History = append([]store.NewEvent{*started}, u.History...)
		}
		u.SearchAttributes = attrs
		// A retry of the step reads the details this attempt recorded.
		for i := range u.Tasks {
			if n := &u.Tasks[i]; n.Kind == store.TaskStep && n.Step == t.Step && n.Index == t.Index && len(details) > 0 {
				n.Details = details
			}
		}
		return u, nil
	}}, handoff)
	var claimed []*store.Task
	if res != nil {
		claimed = res.Claimed
	}
	if err != nil {
		return claimed, fmt.Errorf("complete %s of run %s: %w", store.DescribeTask(t), t.RunID, err)
	}
	return claimed, nil
}

// runStep runs step code for a task and returns its outcome, or the
// reason the result must be dropped.
func (r *Runtime) runStep(ctx context.Context, h *worker.Held) (*Outcome, error) {
	t := h.Task()
	f, err := r.Flow(t.Workflow, t.Version)
	if err != nil {
		// Claims ask only for the registered versions (Task.Handler), so
		// only a task enqueued without a handler gets here.
		return &Outcome{Err: fmt.Sprintf("this worker cannot run step %q: %v", t.Step, err)}, nil
	}
	spec, _ := f.Step(t.Step)
	tctx, tcancel := context.WithTimeout(ctx, spec.Timeout)
	defer tcancel()
	info := telemetry.OfTask(t)
	info.Kind = telemetry.StepStarted
	r.cfg.Telemetry.Emit(info)
	call := r.callOf(t)
	call.Logger = h.Logs().Logger(r.cfg.Logger)
	tctx = secrets.Observe(tctx, h.Logs().AddSecret)
	call.Heartbeat = func(details any) error {
		b, err := json.Marshal(details)
		if err != nil {
			return fmt.Errorf("heartbeat details of step %q do not encode as JSON: %w", t.Step, err)
		}
		if err := limits.Payload(b, r.cfg.MaxPayloadSize, "heartbeat details of step "+strconv.Quote(t.Step)); err != nil {
			return err
		}
		h.RecordDetails(b)
		return nil
	}
	// The attempt's end (step.completed, step.failed) is emitted by the
	// committer once its outcome commits.
	out, err := f.Invoke(tctx, call)
	if cause := context.Cause(ctx); cause != nil {
		return nil, cause
	}
	if err == nil && tctx.Err() != nil {
		err = tctx.Err()
	}
	if err == nil {
		if perr := limits.Payload(out.Output, r.cfg.MaxPayloadSize, "output of step "+strconv.Quote(t.Step)); perr != nil {
			err = flow.NonRetryable(perr)
		}
	}
	var snooze *flow.SnoozeError
	var cancel *flow.CancelError
	switch {
	case errors.As(err, &snooze):
		return &Outcome{Snoozed: true, Snooze: snooze.After}, nil
	case errors.As(err, &cancel):
		return &Outcome{Cancelled: true, CancelReason: cancel.Reason}, nil
	}
	if err != nil {
		retry := spec.Retry.Retryable(err)
		if errors.Is(tctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("step %q timed out after %s: %w", t.Step, spec.Timeout, err)
		}
		return &Outcome{Err: err.Error(), Retryable: retry}, nil
	}
	attrs, err := store.AttrsOf(f.SearchAttributes(), out.SearchAttributes)
	if err != nil {
		return &Outcome{Err: fmt.Sprintf("step %q: %v", t.Step, err)}, nil
	}
	return &Outcome{Event: out.Event, Output: out.Output, Wait: out.Wait, SearchAttributes: attrs}, nil
}

// callOf is the invocation of step code for a task's attempt.
func (r *Runtime) callOf(t *store.Task) flow.Call {
	return flow.Call{
		RunID: t.RunID, Step: t.Step, Index: t.Index, Attempt: t.Attempt,
		IdempotencyKey: fmt.Sprintf("%s/%s/%d", t.RunID, t.Step, t.Index),
		Input:          t.Payload, Item: t.Item, Details: t.Details,
		Now: r.cfg.Clock.Now,
		CreatedBy: func(ctx context.Context) (string, error) {
			c, err := r.createdBy(ctx, t.RunID)
			if err != nil {
				return "", fmt.Errorf("step %q: read the run's created_by: %w", t.Step, err)
			}
			return c.by, nil
		},
		OnBehalfOf: func(ctx context.Context) (string, error) {
			c, err := r.createdBy(ctx, t.RunID)
			if err != nil {
				return "", fmt.Errorf("step %q: read the run's on_behalf_of: %w", t.Step, err)
			}
			return c.onBehalfOf, nil
		},
	}
}

// creator is who started a run (MetaCreatedBy), and for whom
// (MetaOnBehalfOf).
type creator struct{ by, onBehalfOf string }

// createdBy returns the run's MetaCreatedBy and MetaOnBehalfOf ("" when
// it has none).
func (r *Runtime) createdBy(ctx context.Context, runID string) (creator, error) {
	r.cmu.Lock()
	c, ok := r.creators[runID]
	r.cmu.Unlock()
	if ok {
		return c, nil
	}
	run, err := r.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return creator{}, err
	}
	for key, dst := range map[string]*string{MetaCreatedBy: &c.by, MetaOnBehalfOf: &c.onBehalfOf} {
		if raw, ok := run.Metadata[key]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return creator{}, fmt.Errorf("run metadata %q is not a string: %w", key, err)
			}
		}
	}
	r.cmu.Lock()
	if len(r.creators) >= maxCreators || r.creators == nil {
		r.creators = map[string]creator{}
	}
	r.creators[runID] = c
	r.cmu.Unlock()
	return c, nil
}

func stepFailure(t *store.Task, msg string, retryable bool) engine.Event {
	if t.Index >= 0 {
		return engine.ItemFailed{Step: t.Step, Index: t.Index, Attempt: t.Attempt, Error: msg, Retryable: retryable}
	}
	return engine.StepFailed{Step: t.Step, Attempt: t.Attempt, Error: msg, Retryable: retryable}
}

// Ensure Runtime is an executor.
var _ worker.Executor = (*Runtime)(nil)

// Flows returns every registered flow version (stubs left out), by name
// then version.
func (r *Runtime) Flows() []*flow.Flow {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*flow.Flow
	for _, vs := range r.flows {
		for _, f := range vs {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b *flow.Flow) int {
		if c := strings.Compare(a.Name(), b.Name()); c != 0 {
			return c
		}
		return a.Version() - b.Version()
	})
	return out
}
