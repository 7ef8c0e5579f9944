// Package wfrt is the workflow runtime: it runs code-first workflows
// (package workflow) on the durable core. A workflow run advances by
// decisions: the runtime replays the workflow function over the run's
// history (internal/replay) and turns the commands of the new activation
// into what the store writes — activities become tasks, sleeps timer
// tasks, children and continue-as-new runs created by operation tasks.
//
// Who decides: the worker that delivers an outcome (an activity's result,
// a fired timer) decides at once, in the transaction that records the
// outcome, when this process has the workflow registered; otherwise the
// outcome is appended with a decision task that a process which has the
// workflow picks up. A decision is committed only if the history did not
// change since it was read (optimistic concurrency on the run's last
// sequence number): a refused decision is dropped and made again.
//
// It owns the registry of workflows and activities, the sticky cache of
// live instances, the deliveries of signals, timers, activity outcomes and
// children's reports, updates and their waiting callers, the operation
// tasks, and the in-process executor of workflow tasks. Every change it
// makes is fenced by a task's lease, checked against the sequence number
// its decision read, or keyed (docs/architecture.md, "Exactly once"). It
// may not claim tasks, hold leases or run loops of its own (the worker
// pool does), and knows nothing of flows.
package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Errors of code-first workflows (re-exported by the root package).
var (
	// ErrWorkflowNotFound: no workflow of that name is registered.
	ErrWorkflowNotFound = hephtype.ErrWorkflowNotFound
)

// Activity is an activity as the runtime registers it.
type Activity interface {
	Name() string
	Invoke(ctx context.Context, input json.RawMessage) (json.RawMessage, error)
	Options() workflow.ActivityOptions
}

// Config configures a Runtime.
type Config struct {
	Store     store.Store
	Clock     clock.Clock
	Logger    *slog.Logger
	Telemetry *telemetry.Hub
	// Tracer records the decisions made outside decision tasks (nil: not
	// traced); see internal/tracing.
	Tracer    *tracing.Tracer
	Committer *commit.Committer
	// Release gives claimed tasks back (the worker pool's).
	Release func([]*store.Task)
	// CancelRun cancels a run (a child, a continued chain): the client's.
	CancelRun            func(ctx context.Context, runID, reason string) error
	WorkerID             string
	WorkflowQueue        string
	StickyCacheSize      int
	DecisionRetryBackoff time.Duration
	MinPollInterval      time.Duration
	PollInterval         time.Duration
	MaxPayloadSize       int
	// Registered is called after a registration changed what this
	// process can run.
	Registered func()
	// Wake tells this process's workers that a task of a queue is ready
	// (one the runtime wrote outside the Committer: a request's).
	Wake func(queue string)
	// BuildID is this process's build (hephaestus.Config.BuildID): the
	// runs it starts of a pinned workflow are pinned to it, and it decides
	// only the pinned runs of its build (builds.go).
	BuildID string
	// LiveBuild returns the newest build of which a live worker serves
	// the pinned runs of a workflow, "" when none does (a start of a
	// workflow this process does not have pins to it). Nil: none.
	LiveBuild func(ctx context.Context, workflow string) string
	// Served reports whether a live worker of some process has a handler
	// (store.WorkflowHandler): a start of a workflow this process does not
	// register is accepted when one does (a server starting the workflows
	// of the Go workers that share its store). Nil accepts none.
	Served func(ctx context.Context, handler string) bool
	// Attrs returns the search attributes a workflow that this process
	// does not register declares (from the catalog), nil when it is not
	// known. Nil: none is known.
	Attrs func(ctx context.Context, workflow string) (map[string]store.AttrType, error)
}

// Runtime runs code-first workflows.
type Runtime struct {
	cfg     Config
	reg     wfRegistry
	sticky  *stickyCache
	updates updateWaiters
}

// New returns a Runtime.
func New(cfg *Config) *Runtime {
	c := &Runtime{cfg: *cfg}
	telemetry.Defaults(&c.cfg.Clock, &c.cfg.Logger, &c.cfg.Telemetry)
	if c.cfg.WorkflowQueue == "" {
		c.cfg.WorkflowQueue = defaultQueue
	}
	if c.cfg.StickyCacheSize <= 0 {
		c.cfg.StickyCacheSize = 1024
	}
	if c.cfg.DecisionRetryBackoff <= 0 {
		c.cfg.DecisionRetryBackoff = time.Second
	}
	if c.cfg.PollInterval <= 0 {
		c.cfg.PollInterval = time.Second
	}
	if c.cfg.MinPollInterval <= 0 {
		c.cfg.MinPollInterval = min(50*time.Millisecond, c.cfg.PollInterval)
	}
	if c.cfg.MaxPayloadSize <= 0 {
		c.cfg.MaxPayloadSize = limits.DefaultPayloadSize
	}
	if c.cfg.Release == nil {
		c.cfg.Release = func([]*store.Task) {}
	}
	c.sticky = newStickyCache(c.cfg.StickyCacheSize)
	return c
}

// Close drops the cached instances.
func (c *Runtime) Close() { c.sticky.close() }

// wfRegistry holds the registered workflows and activities.
type wfRegistry struct {
	mu         sync.RWMutex
	funcs      map[string]replay.Func
	queries    map[string]Queries
	decls      map[string]declared
	activities map[string]Activity
	// keys compute the concurrency key of the workflows that declare one.
	keys map[string]KeyFunc
	// auto holds the workflows that auto-upgrade (builds.go).
	auto map[string]bool
	// attrs are the search attributes each workflow declares.
	attrs map[string]map[string]store.AttrType
}

// AttrDecls is implemented by a workflow definition that declares search
// attributes (*workflow.Definition).
type AttrDecls interface {
	SearchAttributes() map[string]hephtype.AttrType
}

// AttrDecl returns the search attributes workflow declares: as registered
// here, or else as the catalog says (Config.Attrs); nil when it declares
// none or is not known.
func (c *Runtime) AttrDecl(ctx context.Context, workflow string) (map[string]store.AttrType, error) {
	c.reg.mu.RLock()
	decl, ok := c.reg.attrs[workflow]
	c.reg.mu.RUnlock()
	if ok || c.cfg.Attrs == nil {
		return decl, nil
	}
	return c.cfg.Attrs(ctx, workflow)
}

// AttrDecls returns the search attributes that the workflows registered
// here declare, by workflow.
func (c *Runtime) AttrDecls() map[string]map[string]store.AttrType {
	c.reg.mu.RLock()
	defer c.reg.mu.RUnlock()
	return maps.Clone(c.reg.attrs)
}

// Declarations are the update and signal names a workflow declares (a
// *workflow.Definition has them); empty lists declare nothing.
type Declarations interface {
	Declared() (updates, signals []string)
}

// declared are a registered workflow's declarations; nil: any name.
type declared struct{ updates, signals []string }

// checkName reports a name that a workflow registered here declares no
// message of: unknown is ErrUnknownUpdate or ErrUnknownSignal. Names of
// workflows not registered here, or that declare none of the kind, pass.
func (r *wfRegistry) checkName(workflowName, name string, signal bool) error {
	r.mu.RLock()
	d, ok := r.decls[workflowName]
	r.mu.RUnlock()
	names, unknown, what := d.updates, workflow.ErrUnknownUpdate, "update"
	if signal {
		names, unknown, what = d.signals, workflow.ErrUnknownSignal, "signal"
	}
	if !ok || len(names) == 0 || slices.Contains(names, name) || signal && strings.HasPrefix(name, eventSignalPrefix) {
		return nil
	}
	return &msgError{msg: fmt.Sprintf("workflow %q declares no %s %q (it declares %s)", workflowName, what, name, strings.Join(names, ", ")), is: unknown}
}

// Queries answers the named queries of a workflow (a
// *workflow.Definition does).
type Queries interface {
	AnswerQuery(name string, published, args json.RawMessage) (json.RawMessage, error)
}

func (r *wfRegistry) queriesOf(name string) (Queries, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	q, ok := r.queries[name]
	return q, ok
}

func (r *wfRegistry) workflow(name string) (replay.Func, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn, ok := r.funcs[name]
	return fn, ok
}

func (r *wfRegistry) activity(name string) (Activity, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.activities[name]
	return a, ok
}

// Handlers returns the handlers of the registered workflows and
// activities.
func (c *Runtime) Handlers() []string {
	r := &c.reg
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.funcs)+len(r.activities))
	for name := range r.funcs {
		out = append(out, store.WorkflowHandler(name))
		if !r.auto[name] && c.cfg.BuildID != "" {
			out = append(out, store.WorkflowBuildHandler(name, c.cfg.BuildID))
		}
	}
	for name := range r.activities {
		out = append(out, store.ActivityHandler(name))
	}
	return out
}

// Has reports whether the workflow is registered.
func (c *Runtime) Has(name string) bool {
	_, ok := c.reg.workflow(name)
	return ok
}

// RegisterWorkflow registers (or replaces) a workflow's code; def, when it
// implements them, answers its named queries (Queries) and declares its
// messages (Declarations). Cached instances, which run the code they were
// made with, are dropped.
func (c *Runtime) RegisterWorkflow(name string, fn replay.Func, def any) error {
	qs, _ := def.(Queries)
	kf, _ := def.(KeyFunc)
	var d declared
	if ds, ok := def.(Declarations); ok {
		d.updates, d.signals = ds.Declared()
	}
	if name == "" || fn == nil {
		return errors.New("a workflow needs a name and a function")
	}
	if len(name) > hephtype.MaxNameLen {
		return fmt.Errorf("workflow name %.20q… is %d bytes long; the limit is %d", name, len(name), hephtype.MaxNameLen)
	}
	r := &c.reg
	r.mu.Lock()
	if r.funcs == nil {
		r.funcs = map[string]replay.Func{}
	}
	r.funcs[name] = fn
	if r.keys == nil {
		r.keys = map[string]KeyFunc{}
	}
	if kf != nil && kf.HasConcurrencyKey() {
		r.keys[name] = kf
	} else {
		delete(r.keys, name)
	}
	if r.queries == nil {
		r.queries = map[string]Queries{}
	}
	if qs != nil {
		r.queries[name] = qs
	} else {
		delete(r.queries, name)
	}
	if r.decls == nil {
		r.decls = map[string]declared{}
	}
	r.decls[name] = d
	if r.auto == nil {
		r.auto = map[string]bool{}
	}
	r.auto[name] = autoUpgrades(def)
	if r.attrs == nil {
		r.attrs = map[string]map[string]store.AttrType{}
	}
	if ad, ok := def.(AttrDecls); ok {
		r.attrs[name] = ad.SearchAttributes()
	} else {
		delete(r.attrs, name)
	}
	r.mu.Unlock()
	c.sticky.closeAll()
	if c.cfg.Registered != nil {
		c.cfg.Registered()
	}
	return nil
}

// RegisterActivity registers (or replaces) an activity.
func (c *Runtime) RegisterActivity(a Activity) error {
	if a == nil || a.Name() == "" {
		return errors.New("an activity needs a name")
	}
	if len(a.Name()) > hephtype.MaxNameLen {
		return fmt.Errorf("activity name %.20q… is %d bytes long; the limit is %d", a.Name(), len(a.Name()), hephtype.MaxNameLen)
	}
	r := &c.reg
	r.mu.Lock()
	if r.activities == nil {
		r.activities = map[string]Activity{}
	}
	r.activities[a.Name()] = a
	r.mu.Unlock()
	if c.cfg.Registered != nil {
		c.cfg.Registered()
	}
	return nil
}

// StartOptions are the optional parameters of starting a workflow.
type StartOptions struct {
	ID       string
	Tags     []string
	Metadata map[string]any
	// RunID, when set, is the new run's id instead of a random one (see
	// flowrt.StartOptions.RunID).
	RunID string
	// ConcurrencyKey is stored on the run (store.Run.ConcurrencyKey).
	ConcurrencyKey string
	// ExecutionTimeout, when positive, is how long the run may take:
	// store.Run.Deadline. A run that continues as new keeps its
	// deadline.
	ExecutionTimeout time.Duration
	// SignalID, for SignalWithStart only, identifies its signal so that a
	// repeated call delivers it once (see SignalWithStart).
	SignalID string
	// SearchAttributes are the run's first search attributes, of those
	// the workflow declares (AttrDecl).
	SearchAttributes map[string]any
}

// StartWorkflow starts a run of the registered workflow name with input
// (encoded as JSON) and returns it as stored. The first activation is
// decided in the same transaction as the creation, so the run's first
// activities are queued when StartWorkflow returns.
func (c *Runtime) StartWorkflow(ctx context.Context, name string, input any, opts *StartOptions) (*store.Run, error) {
	return c.startWorkflow(ctx, name, input, opts, nil, nil)
}

// startWorkflow starts a run; signal, when set, reaches its first
// activation, and request, when set, goes with it (in a task created with
// the run).
func (c *Runtime) startWorkflow(ctx context.Context, name string, input any, opts *StartOptions, signal *replay.Event, request *store.NewRequest) (*store.Run, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	raw, err := limits.JSON(input)
	if err != nil {
		return nil, fmt.Errorf("start workflow %q: %w: input %w", name, limits.ErrInvalidInput, err)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the input"); err != nil {
		return nil, fmt.Errorf("start workflow %q: %w", name, err)
	}
	ckey := opts.ConcurrencyKey
	if ckey == "" {
		if ckey, err = c.concurrencyKey(name, raw); err != nil {
			return nil, fmt.Errorf("start workflow %q: %w", name, err)
		}
	} else if err := store.CheckConcurrencyKey(ckey); err != nil {
		return nil, fmt.Errorf("start workflow %q: StartOptions.ConcurrencyKey: %w", name, err)
	}
	spec := &runSpec{id: newID(), workflow: name, input: raw, tags: slices.Clone(opts.Tags), scope: businesskey.ScopeNone,
		concurrencyKey: ckey}
	if opts.RunID != "" {
		spec.id = opts.RunID
	}
	if len(opts.SearchAttributes) > 0 {
		decl, err := c.AttrDecl(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("start workflow %q: %w", name, err)
		}
		if len(decl) == 0 {
			return nil, fmt.Errorf("start workflow %q: %w: search attributes: workflow %q declares none (workflow.Definition.SearchAttribute)", name, limits.ErrInvalidInput, name)
		}
		if spec.attrs, err = store.AttrsOf(decl, opts.SearchAttributes); err != nil {
			return nil, fmt.Errorf("start workflow %q: %w", name, err)
		}
	}
	if spec.deadline, err = limits.Deadline(c.cfg.Clock.Now(), time.Time{}, opts.ExecutionTimeout, 0); err != nil {
		return nil, fmt.Errorf("start workflow %q: %w", name, err)
	}
	if opts.ID != "" {
		bid, err := businesskey.Build(workflowKey, opts.ID)
		if err != nil {
			return nil, fmt.Errorf("start workflow %q: %w: WorkflowOptions.ID: %w", name, limits.ErrInvalidInput, err)
		}
		spec.businessID, spec.scope = bid, businesskey.ScopeActive
	}
	if len(opts.Metadata) > 0 {
		spec.metadata = map[string]json.RawMessage{}
		for k, v := range opts.Metadata {
			b, err := json.Marshal(v)
			if err != nil || k == "" {
				return nil, fmt.Errorf("start workflow %q: %w: metadata %q is not a JSON value", name, limits.ErrInvalidInput, k)
			}
			spec.metadata[k] = b
		}
	}
	if signal != nil {
		spec.extra = []replay.Event{*signal}
	}
	if request != nil {
		r := *request
		r.RunID = spec.id
		spec.request = &r
	}
	if _, ok := c.reg.workflow(name); !ok && (c.cfg.Served == nil || !c.cfg.Served(ctx, store.WorkflowHandler(name))) {
		return nil, fmt.Errorf("start workflow %q: %w: register it with RegisterWorkflows, here or in a running worker process", name, ErrWorkflowNotFound)
	}
	spec.pin, spec.build = c.startBuild(ctx, name)
	r, err := c.createWorkflowRun(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start workflow %q: %w", name, err)
	}
	return r, nil
}

// FindWorkflow returns the current run of a workflow id: the newest run of
// the workflow with that id, followed through continue-as-new to the run
// that carries it on.
func (c *Runtime) FindWorkflow(ctx context.Context, name, id string) (*store.Run, error) {
	bid, err := businesskey.Build(workflowKey, id)
	if err != nil {
		return nil, fmt.Errorf("find workflow %q id %q: %w: %w", name, id, limits.ErrInvalidInput, err)
	}
	r, err := c.cfg.Store.FindRun(ctx, &store.FindRunParams{Workflow: name, BusinessID: bid})
	if err != nil {
		return nil, fmt.Errorf("find workflow %q id %q: %w", name, id, err)
	}
	return c.CurrentRun(ctx, r)
}

// CurrentRun follows a continued run to its successor, waiting a little
// for a successor that is being created.
func (c *Runtime) CurrentRun(ctx context.Context, r *store.Run) (*store.Run, error) {
	for r.Status == hephtype.StatusContinued {
		next, err := c.WaitForRun(ctx, continuedID(r.ID))
		if err != nil {
			return nil, fmt.Errorf("run %s continued as new: %w", r.ID, err)
		}
		r = next
	}
	return r, nil
}

// WaitForRun reads a run that a task is about to create (the successor of
// a continued run, a child), polling until it exists.
func (c *Runtime) WaitForRun(ctx context.Context, id string) (*store.Run, error) {
	poll := c.cfg.MinPollInterval / 5
	for {
		r, err := c.cfg.Store.GetRun(ctx, id)
		if err == nil || !errors.Is(err, store.ErrRunNotFound) {
			return r, err
		}
		select {
		case <-c.cfg.Clock.After(poll):
			poll = min(poll*2, c.cfg.PollInterval)
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s: %w (waiting for it to be created)", id, ctx.Err())
		}
	}
}

// SignalWorkflow sends a signal to a workflow run. Signals are buffered in
// the run's history and never lost: the workflow receives them in the
// order they were sent (WaitSignal, or a phase's handlers). A signal to a
// run that continued as new goes to the run that carries it on; a signal
// to a finished run fails with engine.ErrRunFinished.
func (c *Runtime) SignalWorkflow(ctx context.Context, runID, name string, payload any) error {
	// The signal's id, assigned as it is accepted: the run records it once
	// however often its commit is tried.
	return c.SignalWorkflowKeyed(ctx, runID, name, payload, "signal:"+newID())
}

// SignalWorkflowKeyed is SignalWorkflow with the key of the delivery
// given: the run refuses a key it has seen, so a repeated call (another
// process carrying out the same event wait) delivers nothing more and
// returns nil.
func (c *Runtime) SignalWorkflowKeyed(ctx context.Context, runID, name string, payload any, key string) error {
	raw, err := limits.JSON(payload)
	if err != nil {
		return fmt.Errorf("signal %q to run %s: %w: payload %w", name, runID, limits.ErrInvalidInput, err)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the signal's payload"); err != nil {
		return fmt.Errorf("signal %q to run %s: %w", name, runID, err)
	}
	for {
		r, err := c.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return fmt.Errorf("signal %q to run %s: %w", name, runID, err)
		}
		if r, err = c.CurrentRun(ctx, r); err != nil {
			return fmt.Errorf("signal %q: %w", name, err)
		}
		if r.Kind != hephtype.KindWorkflow {
			return fmt.Errorf("signal %q to run %s: %w: it is a %s, not a workflow", name, r.ID, limits.ErrInvalidInput, r.Kind)
		}
		if err := c.reg.checkName(r.Workflow, name, true); err != nil {
			return fmt.Errorf("signal to run %s: %w", r.ID, err)
		}
		_, err = c.deliver(ctx, &delivery{runID: r.ID, workflow: r.Workflow, events: []replay.Event{replay.SignalReceived(name, raw)}, strict: true, key: key})
		if errors.Is(err, store.ErrDuplicateChange) {
			return nil // delivered by an earlier attempt of this call (a commit retried after its outcome was lost)
		}
		if errors.Is(err, engine.ErrRunFinished) && r.ID != runID {
			continue // the successor itself continued meanwhile
		}
		if err != nil {
			return fmt.Errorf("signal %q to run %s: %w", name, r.ID, err)
		}
		return nil
	}
}

// SignalWithStart signals the active run of a workflow id, starting one
// first (with input) if there is none; a new run receives the signal in its
// first activation. It returns the run that got the signal.
//
// With opts.SignalID, a repeated call (a retried request) delivers the
// signal once: the id is the key of the delivery to an open run (the run
// refuses a key it has seen, store.ErrDuplicateChange), and the run a call
// starts has an id derived from it (SignalStartRunID), so that a repeat
// finds that run and delivers nothing. A repeat after the signalled run
// ended, or continued as new, when this call did not start it, is a new
// signal.
func (c *Runtime) SignalWithStart(ctx context.Context, name, id, signal string, payload, input any, opts *StartOptions) (*store.Run, error) {
	raw, err := limits.JSON(payload)
	if err != nil {
		return nil, fmt.Errorf("signal-with-start %q: %w: payload %w", name, limits.ErrInvalidInput, err)
	}
	o := StartOptions{}
	if opts != nil {
		o = *opts
	}
	o.ID = id
	if id == "" {
		return nil, fmt.Errorf("signal-with-start %q: %w: the workflow id is empty", name, limits.ErrInvalidInput)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the signal's payload"); err != nil {
		return nil, fmt.Errorf("signal-with-start %q: %w", name, err)
	}
	if err := c.reg.checkName(name, signal, true); err != nil {
		return nil, fmt.Errorf("signal-with-start: %w", err)
	}
	ev := replay.SignalReceived(signal, raw)
	key := "signal:" + newID()
	if o.SignalID != "" {
		key = signalIDPrefix + o.SignalID
		if err := store.CheckRequestID(key); err != nil {
			return nil, fmt.Errorf("signal-with-start %q: %w: the signal id: %w", name, limits.ErrInvalidInput, err)
		}
		o.RunID = SignalStartRunID(name, id, o.SignalID)
	}
	for attempt := 0; ; attempt++ {
		if o.SignalID != "" {
			// A run this signal started got it in its first activation.
			r, err := c.cfg.Store.GetRun(ctx, o.RunID)
			if err == nil {
				return r, nil
			}
			if !errors.Is(err, store.ErrRunNotFound) {
				return nil, fmt.Errorf("signal-with-start %q id %q: %w", name, id, err)
			}
		}
		r, err := c.FindWorkflow(ctx, name, id)
		switch {
		case err == nil && !r.Status.Terminal():
			_, err = c.deliver(ctx, &delivery{runID: r.ID, workflow: r.Workflow, events: []replay.Event{ev}, strict: true, key: key})
			if err == nil || errors.Is(err, store.ErrDuplicateChange) {
				return r, nil
			}
			if !errors.Is(err, engine.ErrRunFinished) {
				return nil, fmt.Errorf("signal-with-start %q id %q: %w", name, id, err)
			}
		case err == nil || errors.Is(err, store.ErrRunNotFound):
			r, err := c.startWorkflow(ctx, name, input, &o, &ev, nil)
			if err == nil {
				return r, nil
			}
			if !errors.Is(err, store.ErrDuplicateRun) && !errors.Is(err, store.ErrRunExists) {
				return nil, err
			}
		default:
			return nil, err
		}
		if attempt >= 10 {
			return nil, fmt.Errorf("signal-with-start %q id %q: the run kept changing under the request", name, id)
		}
	}
}

// eventSignalPrefix names the signals that deliver matched events
// (wfdef.EventSignalPrefix): every workflow takes them.
const eventSignalPrefix = "heph.event:"

// signalIDPrefix makes a SignalWithStart's signal id the key of its
// delivery, apart from the random keys of other signals.
const signalIDPrefix = "signal-id:"

// signalStartNamespace is the UUID namespace of SignalStartRunID.
var signalStartNamespace = uuid.MustParse("0b6f3f52-8d1e-5c7a-9e2b-4a7c1d3e5f60")

// SignalStartRunID is the id of the run a SignalWithStart of workflow name,
// workflow id id and signal id signalID starts.
func SignalStartRunID(name, id, signalID string) string {
	return uuid.NewSHA1(signalStartNamespace, []byte(name+"\x00"+id+"\x00"+signalID)).String()
}

// QueryWorkflow returns the state the workflow run published last
// (workflow.Publish), or JSON null if it published none. It reads the run
// as stored: it never replays the workflow, and works while the workflow
// runs an activity or waits. A run that continued as new is followed to
// the run that carries it on.
func (c *Runtime) QueryWorkflow(ctx context.Context, runID string) (json.RawMessage, error) {
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("query run %s: %w", runID, err)
	}
	if r.Status == hephtype.StatusContinued {
		if next, err := c.cfg.Store.GetRun(ctx, continuedID(r.ID)); err == nil {
			if next, err = c.CurrentRun(ctx, next); err == nil {
				r = next
			}
		}
	}
	if len(r.Published) == 0 {
		return json.RawMessage("null"), nil
	}
	return r.Published, nil
}

// ContinuedID is the id of the run that continues run as new.
func ContinuedID(run string) string { return continuedID(run) }

// FromStored maps a history row of a workflow run to its replay event.
func FromStored(e store.Event) replay.Event { return fromStored(e) }

// newSeed draws the seed of a run's deterministic random source.
func newSeed() uint64 { return rand.Uint64() }

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// Kinds are the task kinds this runtime executes.
var Kinds = []store.TaskKind{store.TaskDecision, store.TaskActivity, store.TaskWorkflowTimer, store.TaskWorkflowOp}

// workflowKey is the business key of workflow ids: a run of workflow w
// with ID v has the business id "id::v", unique per workflow.
const workflowKey = "id"

// Result waits until the workflow run ends, following continue-as-new to
// the run that ends the chain, and returns that run.
func (c *Runtime) Result(ctx context.Context, runID string) (*store.Run, error) {
	return c.result(ctx, runID, false)
}

// StartedResult is Result for a run this process has just started and
// not seen finish (Committer.WaitStarted).
func (c *Runtime) StartedResult(ctx context.Context, runID string) (*store.Run, error) {
	return c.result(ctx, runID, true)
}

func (c *Runtime) result(ctx context.Context, runID string, started bool) (*store.Run, error) {
	for {
		wait := c.cfg.Committer.WaitRun
		if started {
			wait, started = c.cfg.Committer.WaitStarted, false
		}
		r, err := wait(ctx, runID, c.cfg.PollInterval)
		if err != nil {
			return nil, err
		}
		if r.Status != hephtype.StatusContinued {
			return r, nil
		}
		next, err := c.WaitForRun(ctx, continuedID(r.ID))
		if err != nil {
			return nil, err
		}
		runID = next.ID
	}
}
