package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/maintenance"
	"github.com/hephaestus-go/hephaestus/internal/metrics"
	"github.com/hephaestus-go/hephaestus/internal/notify"
	"github.com/hephaestus-go/hephaestus/internal/remote"
	"github.com/hephaestus-go/hephaestus/internal/schedule"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/internal/triggers"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Client starts, inspects and steers runs, and (after Start) runs the
// workers of its queues. It is safe for concurrent use.
//
// A Client composes the runtime services (internal/...): the committer
// (group commit), the worker pool (claims, leases, wake-ups, drain), the
// flow runtime, the workflow runtime, maintenance (retention, the worker
// registry), the runtime of remote workers and telemetry. It holds no
// loop of its own.
type Client struct {
	cfg    Config
	hub    *telemetry.Hub
	commit *commit.Committer
	pool   *worker.Pool
	flows  *flowrt.Runtime
	wf     *wfrt.Runtime
	maint  *maintenance.Service
	sched  *schedule.Service
	// triggers starts runs on events (triggers.go).
	triggers *triggers.Service
	meter    *metrics.Metrics
	tracer   *tracing.Tracer

	// gaugesMu guards stopGauges, the unregistration of the metric gauges
	// while the client is started.
	gaugesMu   sync.Mutex
	stopGauges func()

	// declared are the schedules declared in code (DeclareSchedules).
	declared declaredSchedules

	// docs is the action registry of stored documents (RegisterDocuments).
	docs docRegistry

	// handlers are what this process can run (Task.Handler), for claims.
	handlers atomic.Pointer[[]string]

	// kinds are the registered job kinds by name (a job.Untyped), for
	// InsertJobJSON.
	kinds sync.Map

	// watches are the callers of HistoryAfter waiting for their runs.
	watches commit.Watches

	// remote serves workers outside the process (remote.go).
	remote *remote.Runtime

	// notify sends webhook deliveries (webhooks.go); nil when the store
	// keeps no webhooks or Config.Webhooks.Disabled.
	notify *notify.Service

	// cat is the client's side of the deployment's catalog (catalog.go).
	cat catalogState

	// policies are the version policies kept from earlier starts
	// (versions.go).
	policies policyCache
}

// uninstrumented, set by a benchmark only, leaves the clients made after
// it without metrics and spans: the baseline that measures what the
// instrumentation costs.
var uninstrumented atomic.Bool

// Store returns the store the client works on: Config.Store, wrapped by
// Config.PayloadCodec when one is set (payloads read from it are
// decoded, and those written to it encoded). Give it to what reads the
// same runs beside the client (the server's Config.Store).
func (c *Client) Store() store.Store { return c.cfg.Store }

// EncryptsPayloads reports whether the client encrypts the payloads it
// stores (Config.PayloadCodec has a key to write with): the server then
// shows them only to the roles allowed to read payloads.
func (c *Client) EncryptsPayloads() bool {
	return c.cfg.PayloadCodec != nil && c.cfg.PayloadCodec.WriteKey() != ""
}

// New returns a Client for cfg. It starts no goroutine: call Start to run
// workers; a Client without workers can still start and steer runs that
// other processes execute.
func New(cfg *Config) (*Client, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("hephaestus: %w", err)
	}
	cl := &Client{cfg: c, hub: telemetry.New(c.Clock)}
	queues := slices.Sorted(maps.Keys(c.Queues))
	if !slices.Contains(queues, c.WorkflowQueue) {
		queues = append(queues, c.WorkflowQueue)
	}
	cl.meter, err = metrics.New(&metrics.Config{MeterProvider: c.MeterProvider, Store: c.Store, Clock: c.Clock, Logger: c.Logger, Queues: queues})
	if err != nil {
		return nil, fmt.Errorf("hephaestus: %w", err)
	}
	if !uninstrumented.Load() {
		cl.hub.Subscribe(cl.meter.Record)
		cl.tracer = tracing.New(c.TracerProvider)
	}
	cl.commit = commit.New(&commit.Config{
		Store: c.Store, Clock: c.Clock, Logger: c.Logger, Telemetry: cl.hub, Tracer: cl.tracer, WorkerID: c.WorkerID,
		LeaseDuration: c.LeaseDuration, MaxCommitBatch: c.MaxCommitBatch, Handlers: cl.claimHandlers,
		AfterCommit: func(batch []*commit.Request, claimed map[int64]bool, now time.Time) {
			cl.pool.AfterCommit(batch, claimed, now)
			cl.watches.Committed(batch)
		},
	})
	cl.flows = flowrt.New(&flowrt.Config{
		Store: c.Store, Clock: c.Clock, Logger: c.Logger, Telemetry: cl.hub, Committer: cl.commit,
		WorkerID: c.WorkerID, MaxPayloadSize: c.MaxPayloadSize, Registered: cl.updateHandlers,
		Load: cl.loadDocumentFlow, Catalog: cl.catalogStub, CheckInput: cl.checkInput,
	})
	cl.wf = wfrt.New(&wfrt.Config{
		Store: c.Store, Clock: c.Clock, Logger: c.Logger, Telemetry: cl.hub, Tracer: cl.tracer, Committer: cl.commit,
		Release: func(ts []*store.Task) { cl.pool.Release(ts) }, CancelRun: cl.CancelRun,
		WorkerID: c.WorkerID, WorkflowQueue: c.WorkflowQueue, StickyCacheSize: c.StickyCacheSize,
		DecisionRetryBackoff: c.DecisionRetryBackoff, MinPollInterval: c.MinPollInterval, PollInterval: c.PollInterval,
		MaxPayloadSize: c.MaxPayloadSize, Registered: cl.updateHandlers, Wake: func(q string) { cl.pool.Wake(q) },
		Served: cl.servedOrCatalogued, BuildID: c.BuildID, LiveBuild: cl.liveBuild, Attrs: cl.catalogWorkflowAttrs,
	})
	exec := worker.Kinds{store.TaskStep: cl.flows, store.TaskTimer: cl.flows}
	for _, k := range wfrt.Kinds {
		exec[k] = cl.wf
	}
	cl.pool = worker.New(&worker.Config{
		Store: c.Store, Clock: c.Clock, Logger: c.Logger, Telemetry: cl.hub, Tracer: cl.tracer, Committer: cl.commit, Executor: exec,
		Handlers: cl.claimHandlers, Queues: c.Queues, ClaimBatch: c.ClaimBatch, LeaseDuration: c.LeaseDuration,
		HeartbeatInterval: c.HeartbeatInterval, MinPollInterval: c.MinPollInterval, PollInterval: c.PollInterval,
		ShutdownTimeout: c.ShutdownTimeout,
	})
	cl.remote = remote.New(&remote.Config{
		Store: c.Store, Clock: c.Clock, Logger: c.Logger, Pool: cl.pool, Flows: cl.flows, Workflows: cl.wf,
		WorkerID: c.WorkerID, LeaseDuration: c.LeaseDuration, MinPollInterval: c.MinPollInterval, PollInterval: c.PollInterval,
		MaxPayloadSize: c.MaxPayloadSize,
	})
	cl.maint = maintenance.New(&maintenance.Config{
		Store: c.Store, Clock: c.Clock, Logger: c.Logger, Telemetry: cl.hub, Committer: cl.commit, WorkerID: c.WorkerID,
		Queues: c.Queues, Handlers: cl.claimHandlers, LeaseDuration: c.LeaseDuration,
		BuildID: c.BuildID, RecordInterval: c.WorkerRecordInterval,
		Retention: c.Retention, RetentionInterval: c.RetentionInterval, EventRetention: c.EventRetention,
		Policies: c.retentionPolicies(), OnQueue: cl.flows.FlowsOnQueue, MoreQueues: cl.catalogQueues,
		TimeOut: cl.timeOutRun, DeadlineInterval: c.PollInterval,
		SweepBlobs: cl.sweepBlobs(), SweepInterval: c.PayloadBlobSweepInterval,
	})
	cl.sched = cl.newSchedules()
	cl.triggers = cl.newTriggers()
	if err := cl.wf.RegisterActivity(eventWaitActivity{cl}); err != nil {
		return nil, fmt.Errorf("hephaestus: %w", err)
	}
	cl.notify = cl.newNotifier()
	cl.updateHandlers()
	return cl, nil
}

// Start starts the workers of the configured queues, the heartbeat of
// their leases and the maintenance services (retention, the worker
// registry). It returns at once; Stop ends them. Calling Start twice is a
// no-op.
func (c *Client) Start(ctx context.Context) error {
	// Steps read secrets (Secret, {{secret.NAME}}) through their context,
	// which the pool derives from this one.
	ctx = secrets.WithResolver(ctx, secretResolver{c})
	// Document steps that wait for an event register it through theirs.
	ctx = triggers.WithAwaiter(ctx, c.awaitDocumentStep)
	if err := c.startCatalog(ctx); err != nil {
		return err
	}
	if err := c.pool.Start(ctx); err != nil {
		return err
	}
	c.gaugesMu.Lock()
	if c.stopGauges == nil {
		stop, err := c.meter.Observe()
		if err != nil {
			c.gaugesMu.Unlock()
			return fmt.Errorf("hephaestus: %w", err)
		}
		c.stopGauges = stop
	}
	c.gaugesMu.Unlock()
	c.maint.Start(ctx)
	c.triggers.Start(ctx)
	if c.notify != nil {
		c.notify.Start(ctx)
	}
	return c.startSchedules(ctx)
}

// Stop shuts the client down gracefully: it stops claiming tasks, lets
// running steps finish for up to Config.ShutdownTimeout (or until ctx
// ends), then cancels the rest (their tasks run again elsewhere once their
// leases expire), commits what is pending and returns. Safe to call twice
// and before Start.
func (c *Client) Stop(ctx context.Context) error {
	c.sched.Stop()
	c.triggers.Stop()
	if c.notify != nil {
		c.notify.Stop()
	}
	c.gaugesMu.Lock()
	if c.stopGauges != nil {
		c.stopGauges()
		c.stopGauges = nil
	}
	c.gaugesMu.Unlock()
	c.pool.Stop(ctx)
	c.maint.Stop()
	c.commit.Close()
	c.wf.Close()
	return nil
}

// Prune deletes now the finished runs that Config.Retention and
// Config.RetentionPolicies no longer keep, and returns how many it
// deleted. It does nothing when neither asks for deletion.
func (c *Client) Prune(ctx context.Context) (int, error) { return c.maint.Prune(ctx) }

// updateHandlers recomputes what this process can run, after a
// registration.
func (c *Client) updateHandlers() {
	if c.flows == nil || c.wf == nil {
		return // during New
	}
	hs := c.flows.Handlers()
	hs = append(hs, c.wf.Handlers()...)
	slices.Sort(hs)
	c.handlers.Store(&hs)
}

// claimHandlers is the non-nil list of handlers claims ask for.
func (c *Client) claimHandlers() []string {
	if p := c.handlers.Load(); p != nil && *p != nil {
		return *p
	}
	return []string{}
}

// Register makes flows known to the client. Register every version that
// still has runs: a run stays on the version it started with, and new runs
// take the latest. Registering a flow again with the same version and the
// same shape is a no-op; with a different shape it is ErrFlowConflict.
func (c *Client) Register(flows ...*flow.Flow) error {
	for _, f := range flows {
		if f == nil {
			return errors.New("hephaestus: Register: nil flow")
		}
		if err := c.flows.Register(f); err != nil {
			return err
		}
		if err := c.declare(TargetFlow, f.Name(), f.Schedules()); err != nil {
			return fmt.Errorf("hephaestus: Register %q: %w", f.Name(), err)
		}
		if err := c.publishLater(func() ([]*store.Definition, error) {
			d, err := c.flowDefinition(f)
			return []*store.Definition{d}, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// StartOptions are the optional parameters of StartRun.
type StartOptions struct {
	// BusinessValue is the value of the flow's business key; required
	// when the flow declares one (the run's business id is key::value).
	BusinessValue string
	// Version pins a registered version instead of the latest.
	Version int
	// Tags are added to the flow's tags on the run.
	Tags []string
	// Metadata is merged over the flow's metadata on the run. The keys
	// "created_by", "on_behalf_of", "document" and "job" are reserved
	// (ErrInvalidInput).
	Metadata map[string]any
	// CreatedBy names the user who starts the run. It is stored in the
	// run's metadata ("created_by", a JSON string), and step code reads
	// it with flow.CreatedBy (a document's actions as ActionCall.CreatedBy,
	// {{run.created_by}} and run.created_by), so tools run as that user.
	CreatedBy string
	// OnBehalfOf names the end user a trusted caller (an API token with
	// the act-as permission) starts the run for, when CreatedBy is that
	// caller. It is stored in the run's metadata ("on_behalf_of", a JSON
	// string, reserved), and step code reads it with flow.OnBehalfOf (a
	// document's actions as ActionCall.OnBehalfOf, {{run.on_behalf_of}}).
	OnBehalfOf string
	// ConcurrencyKey groups the run's steps for flow control: a queue's
	// per-key concurrency and rate limits and its fair rotation between
	// keys (see docs/jobs.md). It overrides the key the flow computes
	// from the input; "" keeps that one.
	ConcurrencyKey string
	// RunID, when set, is the new run's id instead of a random one: a
	// UUID in canonical form (ErrInvalidInput otherwise). A start that
	// finds a run with this id already starts nothing and returns that
	// run with an error that wraps ErrRunExists: derive the id from an
	// idempotency key to make a start idempotent.
	RunID string
	// ExecutionTimeout, when positive, bounds how long the run may take,
	// counted from its start: a run not finished by then fails as timed
	// out (its steps are cancelled as by CancelRun; see docs/operations.md,
	// Time limits). Zero takes the flow's default
	// (flow.Builder.ExecutionTimeout), if any; negative is ErrInvalidInput.
	ExecutionTimeout time.Duration
	// SearchAttributes are the run's first search attributes, by name:
	// each must be declared by the flow (flow.Builder.SearchAttribute)
	// with a value of its type (an int from any Go integer or a whole
	// JSON number, a time from a time.Time or RFC 3339 text, a
	// keyword_list from a []string). Anything else is ErrInvalidInput
	// naming the attribute. Step code upserts them later
	// (flow.SetSearchAttributes).
	SearchAttributes map[string]any
}

func (o *StartOptions) check() error {
	if o == nil {
		return nil
	}
	return checkRunID("StartOptions.RunID", o.RunID)
}

func (o *StartOptions) runID() string {
	if o == nil {
		return ""
	}
	return o.RunID
}

// StartRun starts a run of the named flow with input (encoded as JSON) and
// returns it as stored, without waiting for it to progress.
//
// With StartOptions.RunID of a run that exists, it returns that run and an
// error that wraps ErrRunExists.
func (c *Client) StartRun(ctx context.Context, flowName string, input any, opts *StartOptions) (*Run, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	r, err := startPicked(c, func(keep bool) (*versionPicker, error) { return c.flowPicker(ctx, flowName, keep) },
		func(p *versionPicker) (*store.Run, error) {
			o, err := p.apply(input, opts.internal())
			if err != nil {
				return nil, err
			}
			if err := c.ensureStub(ctx, flowName, o.Version); err != nil {
				return nil, fmt.Errorf("start %q: %w", flowName, err)
			}
			return c.flows.Start(ctx, flowName, input, o)
		})
	if err != nil {
		return c.existingRun(ctx, opts.runID(), err)
	}
	return c.toRun(r), nil
}

func (o *StartOptions) internal() *flowrt.StartOptions {
	if o == nil {
		return nil
	}
	return &flowrt.StartOptions{BusinessValue: o.BusinessValue, Version: o.Version, Tags: o.Tags, Metadata: o.Metadata, CreatedBy: o.CreatedBy, OnBehalfOf: o.OnBehalfOf,
		ConcurrencyKey: o.ConcurrencyKey, RunID: o.RunID, ExecutionTimeout: o.ExecutionTimeout,
		SearchAttributes: o.SearchAttributes}
}

// StartRequest is one run for StartRuns.
type StartRequest struct {
	Input   any
	Options *StartOptions
}

// StartRuns starts many runs of a flow at once, committed together (in
// batches of Config.MaxCommitBatch): the way to enqueue jobs in bulk. Every
// request is checked first; if one is invalid, none is started. Runs that
// the store refuses (a business-key conflict, a RunID that exists) leave
// a nil in the result, and the error joins the reasons, each naming its
// request's index.
func (c *Client) StartRuns(ctx context.Context, flowName string, reqs []StartRequest) ([]*Run, error) {
	in := make([]flowrt.StartRequest, len(reqs))
	pick, err := c.flowPicker(ctx, flowName, false)
	if err != nil {
		return nil, err
	}
	for i, rq := range reqs {
		if err := rq.Options.check(); err != nil {
			return nil, fmt.Errorf("start %q, request %d: %w", flowName, i, err)
		}
		o, err := pick.apply(rq.Input, rq.Options.internal())
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		in[i] = flowrt.StartRequest{Input: rq.Input, Options: o}
		if i == 0 || o.Version != in[i-1].Options.Version {
			if err := c.ensureStub(ctx, flowName, o.Version); err != nil {
				return nil, fmt.Errorf("start %q, request %d: %w", flowName, i, err)
			}
		}
	}
	stored, err := c.flows.StartMany(ctx, flowName, in)
	if stored == nil {
		return nil, err
	}
	runs := make([]*Run, len(stored))
	for i, r := range stored {
		runs[i] = c.toRun(r)
	}
	return runs, err
}

// Run starts a run and waits until it finishes (see WaitRun). When this
// client was not started and no live worker of another process has the
// flow, it returns ErrNotStarted (with the run, which is stored and waits
// for a worker) instead of waiting until ctx ends.
func (c *Client) Run(ctx context.Context, flowName string, input any, opts *StartOptions) (*Run, error) {
	r, err := c.StartRun(ctx, flowName, input, opts)
	if err != nil {
		return r, err // with a RunID that exists, that run
	}
	if !r.Status.Terminal() {
		if err := c.checkServed(ctx, r.ID, "flow:"+flowName+"@"); err != nil {
			return r, err
		}
		// Just started here: no need to read it back before waiting.
		done, err := c.commit.WaitStarted(ctx, r.ID, c.cfg.PollInterval)
		if err != nil {
			return nil, err
		}
		return c.toRun(done), nil
	}
	return c.WaitRun(ctx, r.ID)
}

// WaitRun waits until the run is completed, failed or cancelled, and
// returns it. A run that waits for a resume keeps WaitRun waiting; bound
// it with ctx.
func (c *Client) WaitRun(ctx context.Context, runID string) (*Run, error) {
	r, err := c.commit.WaitRun(ctx, runID, c.cfg.PollInterval)
	if err != nil {
		return nil, err
	}
	return c.toRun(r), nil
}

// GetRun returns a run by id.
func (c *Client) GetRun(ctx context.Context, runID string) (*Run, error) {
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, ErrRunNotFound) {
			return nil, err // "run ID not found" says it all
		}
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	due, err := c.scheduled(ctx, []*store.Run{r})
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	if r.Kind == hephtype.KindFlow {
		if _, err := c.flows.Lookup(r.Workflow, r.Version); err != nil {
			// A flow this process lacks: its stub from the catalog names
			// the run's steps (a document's run names none here).
			_ = c.ensureStub(ctx, r.Workflow, r.Version)
		}
	}
	out := c.toRun(r)
	out.ScheduledFor = due[r.ID]
	return out, nil
}

// scheduled returns, by run id, the ScheduledFor of the runs that are
// pending or running and whose every task is due later; one query for
// them all, none when no run is pending or running.
func (c *Client) scheduled(ctx context.Context, runs []*store.Run) (map[string]time.Time, error) {
	var ids []string
	for _, r := range runs {
		if r.Status == StatusPending || r.Status == StatusRunning {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	ready, err := c.cfg.Store.EarliestReady(ctx, &store.EarliestReadyParams{RunIDs: ids})
	if err != nil {
		return nil, err
	}
	now := c.cfg.Clock.Now()
	for id, at := range ready {
		if !at.After(now) {
			delete(ready, id)
		}
	}
	return ready, nil
}

// ListOptions filters ListRuns; zero fields do not filter.
type ListOptions struct {
	Flow          string
	Statuses      []hephtype.RunStatus
	BusinessID    string
	Tags          []string
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Kind keeps the runs of one kind: KindFlow (flows, documents, jobs)
	// or KindWorkflow. Another value is ErrInvalidInput.
	Kind RunKind
	// Queue keeps the runs that have a task (a step, a timer, a decision,
	// an activity) queued or running in this queue, and every run of the
	// flows, documents and job kinds registered in this client with a
	// step on it: a finished run has no task left, so a finished run
	// matches through its flow's declaration only (a job inserted with
	// JobOptions.Queue, once finished, matches its kind's queue; a
	// finished workflow run matches no queue).
	Queue string
	// Metadata keeps the runs whose metadata has each key with a value
	// equal to the given one: a JSON string equals the string it holds; a
	// number, a boolean or null equals its JSON text ("42", "true",
	// "null"); an object or an array equals nothing.
	Metadata map[string]string
	// Text keeps the runs in which it occurs, ignoring the case of ASCII
	// letters, in the id, the flow or workflow name, the business id, a
	// tag or the error. It reads every run the other filters keep.
	Text string
	// Version keeps the runs of one flow or document version (0: any).
	// Negative is ErrInvalidInput.
	Version int
	// Parent keeps the runs whose parent is this run: the child
	// workflows a workflow run started.
	Parent string
	// Build keeps the runs of one build (Run.BuildID).
	Build string
	// IDs keeps only these runs (empty: any); at most 1000 of them, more
	// is ErrInvalidInput.
	IDs []string
	// Scheduled keeps the runs that are scheduled now: pending or running
	// with every task due later (Run.ScheduledFor).
	Scheduled bool
	// Where keeps the runs whose search attributes meet a filter
	// (docs/operations.md, Search attributes), such as
	// `amount > 100 and region in [eu, us] and updated < 2026-11-01`. It
	// may name the attributes that Flow declares, or, without Flow, any
	// flow known to the client. A filter that does not read, or names an
	// attribute not declared, is ErrInvalidInput naming the position.
	Where string
	// Limit defaults to 100.
	Limit int
	// Cursor continues from RunList.Next.
	Cursor string
}

// RunList is one page of runs, newest first.
type RunList struct {
	Runs []*Run
	// Next is the cursor of the next page, empty on the last.
	Next string
}

// ListRuns lists runs, newest first.
func (c *Client) ListRuns(ctx context.Context, opts *ListOptions) (*RunList, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	if opts.Kind != "" && opts.Kind != KindFlow && opts.Kind != KindWorkflow {
		return nil, fmt.Errorf("list runs: %w: ListOptions.Kind %q is not %q or %q", ErrInvalidInput, opts.Kind, KindFlow, KindWorkflow)
	}
	params := c.listParams(opts)
	if opts.Where != "" {
		f, err := c.whereFilter(ctx, opts.Flow, opts.Where)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		params.Attrs = f
	}
	p, err := c.cfg.Store.ListRuns(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	due, err := c.scheduled(ctx, p.Runs)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := &RunList{Next: p.Next}
	for _, r := range p.Runs {
		run := c.toRun(r)
		run.ScheduledFor = due[r.ID]
		out.Runs = append(out.Runs, run)
	}
	return out, nil
}

// listParams are the store's parameters of a list of runs.
func (c *Client) listParams(opts *ListOptions) *store.ListRunsParams {
	params := &store.ListRunsParams{
		Workflow: opts.Flow, Statuses: opts.Statuses, BusinessID: opts.BusinessID, Tags: opts.Tags,
		CreatedAfter: opts.CreatedAfter, CreatedBefore: opts.CreatedBefore, Limit: opts.Limit, Cursor: opts.Cursor,
		Kind: opts.Kind, Queue: opts.Queue, Metadata: opts.Metadata, Text: opts.Text,
		Version: opts.Version, ParentID: opts.Parent, IDs: opts.IDs, BuildID: opts.Build,
	}
	if opts.Queue != "" {
		params.QueueWorkflows = c.flows.FlowsOnQueue(opts.Queue)
	}
	if opts.Scheduled {
		params.DueAfter = c.cfg.Clock.Now()
	}
	return params
}

// ResumeOptions are the optional parameters of ResumeRun.
type ResumeOptions struct {
	// Step names the waiting step; it may be empty when exactly one step
	// of the run is waiting.
	Step string
	// Payload becomes the step's output (encoded as JSON).
	Payload any
}

// ResumeRun completes a waiting step of a run with an event the step
// declares. It fails with ErrNotWaiting when the step (or the run) is not
// waiting, ErrUnknownEvent for an undeclared event, ErrRunFinished for
// a finished run, and ErrGateStep for an approval gate of a flow document
// (decide it with Approve or Reject); nothing changes then.
func (c *Client) ResumeRun(ctx context.Context, runID, event string, opts *ResumeOptions) error {
	return c.resume(ctx, runID, event, opts, refuseGates)
}

// resume is ResumeRun with a guard (nil for the decisions of gates).
func (c *Client) resume(ctx context.Context, runID, event string, opts *ResumeOptions, guard func(f *flow.Flow, step string) error) error {
	if opts == nil {
		opts = &ResumeOptions{}
	}
	payload, err := json.Marshal(opts.Payload)
	if err != nil {
		return fmt.Errorf("resume run %s: %w: payload does not encode as JSON: %w", runID, ErrInvalidInput, err)
	}
	if err := c.ensureDocumentFlow(ctx, runID); err != nil {
		return fmt.Errorf("resume run %s: %w", runID, err)
	}
	return c.flows.Resume(ctx, runID, opts.Step, event, payload, guard)
}

// CancelRun cancels a run: running step code sees its context cancelled,
// and nothing more of the run executes. A finished run gives
// ErrRunFinished.
func (c *Client) CancelRun(ctx context.Context, runID, reason string) error {
	if reason == "" {
		reason = "cancelled"
	}
	if err := c.ensureDocumentFlow(ctx, runID); err != nil {
		return fmt.Errorf("cancel run %s: %w", runID, err)
	}
	run, err := c.flows.Cancel(ctx, runID, reason, func(run *store.Run) (*store.Update, error) {
		return wfrt.CancelUpdate(run, reason)
	})
	if err != nil {
		return err
	}
	if run != nil && run.Kind == hephtype.KindWorkflow {
		c.wf.Cancelled(run)
	}
	return nil
}

// HistoryEvent is one entry of a run's history.
type HistoryEvent = store.Event

// History returns a run's history in order.
func (c *Client) History(ctx context.Context, runID string) ([]HistoryEvent, error) {
	h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("history of run %s: %w", runID, err)
	}
	return h, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }
