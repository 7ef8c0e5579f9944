// Package hephaestus is a durable workflow engine for Go.
//
// Define a flow with package flow, open a store (store/sqlite embeds one
// in your program with no set-up), create a Client, register the flow and
// start runs:
//
//	st, _ := sqlite.Open(ctx, &sqlite.Config{Path: "heph.db"})
//	c, _ := hephaestus.New(&hephaestus.Config{Store: st})
//	c.Register(orderFlow)
//	c.Start(ctx)                    // workers
//	run, _ := c.Run(ctx, "order", Order{ID: "42"}, nil)
//
// Code-first workflows (package workflow) run on the same core: register
// them and their activities, then start them with the typed helpers:
//
//	c.RegisterWorkflows(checkout)
//	c.RegisterActivities(charge, ship)
//	run, _ := hephaestus.StartWorkflow(ctx, c, checkout, cart, nil)
//	receipt, err := run.Get(ctx)
//
// Signals (SendSignal, SignalWorkflow, SignalWithStart), updates
// (RunUpdate, UpdateWorkflow, UpdateWithStart), named queries (RunQuery,
// QueryNamed), the published state (Query) and cancellation (CancelRun)
// reach running workflows from any process that reaches the store: it
// needs none of the workflow's code, since a worker that has the workflow
// validates updates and answers queries (see UpdateWorkflow). Declare the
// messages once in package workflow (workflow.NewUpdate, NewSignal,
// NewQuery) and use the same definitions in the workflow and its callers.
// Package hephtest runs workflows in memory and replays exported
// histories.
//
// Every state change of a run is one transaction in the store: the run,
// its history and its task queue change together. Steps run at least once;
// a crash or restart of the process loses no run, and a step whose worker
// died runs again once its lease expires.
package hephaestus

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/hephaestus-go/hephaestus/blobstore"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Errors that callers branch on.
var (
	// ErrFlowNotFound: no flow of that name (or version) is registered.
	ErrFlowNotFound = hephtype.ErrFlowNotFound
	// ErrFlowConflict: a flow was registered twice with the same name and
	// version but a different shape.
	ErrFlowConflict = hephtype.ErrFlowConflict
	// ErrInvalidInput: the run input (or a resume payload) does not fit.
	ErrInvalidInput = hephtype.ErrInvalidInput
	// ErrBusinessValueRequired: StartRun (or StartDocument) of a flow
	// with a business key had no StartOptions.BusinessValue. It comes
	// with ErrInvalidInput.
	ErrBusinessValueRequired = hephtype.ErrBusinessValueRequired
	// ErrRunNotFound: no run has that id (or business value).
	ErrRunNotFound = store.ErrRunNotFound
	// ErrDuplicateRun: the business id is taken within its scope.
	ErrDuplicateRun = store.ErrDuplicateRun
	// ErrNotWaiting: the run, or the named step, is not waiting.
	ErrNotWaiting = hephtype.ErrNotWaiting
	// ErrUnknownEvent: the step does not declare the event.
	ErrUnknownEvent = hephtype.ErrUnknownEvent
	// ErrUnknownStep: the flow has no step of that name.
	ErrUnknownStep = hephtype.ErrUnknownStep
	// ErrRunFinished: the run is completed, failed or cancelled.
	ErrRunFinished = hephtype.ErrRunFinished
	// ErrClosed: the client was stopped.
	ErrClosed = hephtype.ErrClosed
	// ErrPayloadTooLarge: a payload (a run input, a signal's payload, an
	// update's arguments, a resume payload, a step's or activity's output,
	// heartbeat details) is larger than Config.MaxPayloadSize. Inputs that
	// callers pass fail with it (and ErrInvalidInput) before anything is
	// written; an output that is too large fails its step or activity for
	// good, since retrying would produce it again.
	ErrPayloadTooLarge = hephtype.ErrPayloadTooLarge
)

// Config configures a Client. Only Store is required.
type Config struct {
	// Store is where runs, history and tasks live. Required.
	Store store.Store
	// PayloadCodec, when set, encodes every payload before it reaches
	// Store and decodes it when read back (docs/payloads.md): run inputs
	// and outputs, step and activity outputs, history entries, signals,
	// updates and queries, heartbeat details, published workflow state,
	// schedule inputs and webhook bodies. Build it with codec.NewChain
	// (compression with codec.NewZstd, encryption with codec.NewAESGCM
	// and a key ring from codec.KeyringFromEnv). Every process that
	// shares the store needs a chain that decodes what the others write
	// (the same keys, the write key of each among them). Defaults to nil:
	// payloads are stored as plain JSON (values written encoded by
	// another process are then returned as their envelopes).
	PayloadCodec *codec.Chain
	// PayloadBlobs, when set, is where payloads larger than
	// PayloadOffloadAbove (in their stored form, after PayloadCodec) are
	// kept: the row holds a reference (the content's SHA-256, its size and
	// codecs), the blob is written before the commit that refers to it,
	// and reads fetch it (docs/payloads.md#large-payloads). Open one with
	// blobstore/gocloudblob.Open ("file:///var/lib/heph/blobs",
	// "s3://bucket?..."), or implement blobstore.Store. Every process that shares the store
	// needs the same blob store. With it, MaxPayloadSize defaults to
	// 5 GiB. Defaults to nil: every payload is kept in the database.
	PayloadBlobs blobstore.Store
	// PayloadOffloadAbove is the size in bytes above which a payload is
	// offloaded to PayloadBlobs. Defaults to 256 KiB.
	PayloadOffloadAbove int
	// PayloadBlobGrace is how old a blob no row refers to must be for the
	// sweep to delete it (SweepPayloadBlobs): it must exceed the longest
	// commit, as a commit refers to its blobs only once it is done.
	// Defaults to 1 hour.
	PayloadBlobGrace time.Duration
	// PayloadBlobSweepInterval is how often a started client sweeps the
	// blob store (when PayloadBlobs is set). Defaults to 1 hour.
	PayloadBlobSweepInterval time.Duration

	// Queues maps queue names to how many steps of that queue this
	// process runs at once. Defaults to {"default": 16}.
	Queues map[string]int
	// ClaimBatch bounds the tasks claimed per query. Defaults to 64.
	ClaimBatch int
	// LeaseDuration is how long a claimed task stays leased without a
	// heartbeat; a worker that dies holds its tasks this long. Defaults to
	// 30 seconds.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often running tasks' leases are extended.
	// Defaults to a third of LeaseDuration; at most half of it.
	HeartbeatInterval time.Duration
	// WorkerRecordInterval is how often a started client refreshes its
	// record in the store's worker registry (Client.Workers, the server's
	// /api/v1/workers, the routing of starts to live builds): the record
	// counts as live for two intervals, so a process that dies without
	// stopping stops counting within two of them. Refreshes come at most
	// this far apart (a jitter makes them a little sooner). Defaults to
	// 5 seconds.
	WorkerRecordInterval time.Duration
	// MinPollInterval and PollInterval bound the adaptive poll of an idle
	// worker, which looks for due tasks it was not told about (tasks of
	// other processes whose notification was lost, or a store without
	// notifications). The wait starts at MinPollInterval after the worker
	// last found work and doubles, with ±20% jitter, up to PollInterval.
	// Local work, notifications and known timers wake a worker at once.
	// Default to 50 milliseconds and 1 second.
	MinPollInterval time.Duration
	PollInterval    time.Duration
	// ShutdownTimeout bounds how long Stop waits for running steps before
	// it cancels them. Defaults to 10 seconds.
	ShutdownTimeout time.Duration
	// MaxCommitBatch bounds the state changes committed in one
	// transaction. Defaults to 512.
	MaxCommitBatch int
	// Retention, when positive, deletes finished runs that finished longer
	// ago than this. Runs that are pending, running or waiting are never
	// deleted. Defaults to 0: keep everything.
	Retention time.Duration
	// RetentionPolicies keep the finished runs of some flows, workflows,
	// documents, job kinds or queues for times of their own (keep
	// successful jobs an hour, failures a week); runs no policy covers
	// follow Retention. The first policy that covers a workflow applies.
	RetentionPolicies []RetentionPolicy
	// EventRetention is how long sent events are kept (SendEvent); older
	// ones are deleted by the retention sweep. Defaults to
	// DefaultEventRetention (30 days); a negative duration keeps them
	// forever. A re-send with the ID of a deleted event stores it again.
	EventRetention time.Duration
	// RetentionInterval is how often the retention sweep runs. Defaults to
	// 1 hour.
	RetentionInterval time.Duration
	// WorkflowQueue is the queue of the decision, timer and operation tasks
	// of code-first workflows, and of their activities that name no
	// queue. Defaults to "default".
	WorkflowQueue string
	// StickyCacheSize bounds how many workflow runs this process keeps in
	// memory between decisions (sticky execution): a run evicted from the
	// cache replays its history at its next decision. Defaults to 1024.
	StickyCacheSize int
	// DecisionRetryBackoff is the delay before a failed workflow decision
	// (non-deterministic code, a workflow not registered here) is tried
	// again; it doubles with each failure, up to 5 minutes. Defaults to 1
	// second.
	DecisionRetryBackoff time.Duration
	// WorkerID names this process in leases. Defaults to a random id.
	WorkerID string
	// BuildID names the code this process runs: the catalog records which
	// build published each definition, and a code-first workflow run is
	// pinned to the build that started it (docs/deploying.md). At most
	// 64 bytes of letters, digits, '.', '_', '-' and '+'. Defaults to the
	// binary's VCS revision (with "-dirty" when modified), else its module
	// version, else a hash of the executable (DefaultBuildID).
	BuildID string
	// Clock is the source of time. Defaults to the system clock.
	Clock clock.Clock
	// MaxPayloadSize bounds, in bytes, every JSON payload the runtime
	// stores: run inputs, signal payloads, update arguments, resume
	// payloads, step and activity outputs, heartbeat details (see
	// ErrPayloadTooLarge). The same on every backend. Defaults to 2 MiB.
	MaxPayloadSize int
	// Logger receives the runtime's logs: failed commits, failing
	// decisions, lost leases, tasks no worker can run. Defaults to
	// slog.Default() (standard error, unless the program set another).
	Logger *slog.Logger
	// MeterProvider receives the runtime's OpenTelemetry metrics (runs,
	// steps, queues, commits, schedules: docs/observability.md). Defaults
	// to otel.GetMeterProvider(), the global provider, which records
	// nothing until the program installs an SDK.
	MeterProvider metric.MeterProvider
	// TracerProvider receives the runtime's OpenTelemetry spans: one trace
	// per run, with a span per step or activity attempt, decision, timer
	// wait and child run (docs/observability.md#traces). Defaults to
	// otel.GetTracerProvider(), the global provider, which records nothing
	// until the program installs an SDK: then no run gets a trace context
	// and the instrumentation costs one check per task.
	TracerProvider trace.TracerProvider
	// SecretKeys is the key ring that seals and opens named secrets
	// (SetSecret, Secret, {{secret.NAME}} in documents): read it with
	// ParseSecretKeys or ReadSecretKeys. Defaults to nil: secrets are
	// unavailable, and setting or reading one fails with
	// ErrSecretsUnavailable (listing and deleting them still work).
	SecretKeys *SecretKeys
	// Webhooks configures the delivery of webhook notifications
	// (docs/notifications.md). The zero value delivers, with the
	// defaults its fields name.
	Webhooks WebhookConfig
}

func (c *Config) withDefaults() (Config, error) {
	if c == nil {
		return Config{}, errors.New("hephaestus: nil *Config")
	}
	cfg := *c
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("Config.Store is required: open one with sqlite.Open or postgres.Open"))
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = map[string]int{"default": 16}
	}
	for q, n := range cfg.Queues {
		if q == "" || n < 0 {
			errs = append(errs, fmt.Errorf("Config.Queues[%q] = %d: queue names must be non-empty and concurrency at least 0", q, n))
		}
	}
	def := func(field string, v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			errs = append(errs, fmt.Errorf("Config.%s is %s; it must not be negative", field, *v))
		}
	}
	defInt := func(field string, v *int, d int) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			errs = append(errs, fmt.Errorf("Config.%s is %d; it must not be negative", field, *v))
		}
	}
	defInt("ClaimBatch", &cfg.ClaimBatch, worker.DefaultClaimBatch)
	defInt("MaxCommitBatch", &cfg.MaxCommitBatch, 512)
	def("LeaseDuration", &cfg.LeaseDuration, worker.DefaultLeaseDuration)
	def("HeartbeatInterval", &cfg.HeartbeatInterval, worker.DefaultHeartbeatInterval(cfg.LeaseDuration))
	def("WorkerRecordInterval", &cfg.WorkerRecordInterval, 5*time.Second)
	def("PollInterval", &cfg.PollInterval, worker.DefaultPollInterval)
	def("MinPollInterval", &cfg.MinPollInterval, min(worker.DefaultMinPollInterval, cfg.PollInterval))
	if cfg.MinPollInterval > cfg.PollInterval {
		errs = append(errs, fmt.Errorf("Config.MinPollInterval %s is above PollInterval %s", cfg.MinPollInterval, cfg.PollInterval))
	}
	def("ShutdownTimeout", &cfg.ShutdownTimeout, worker.DefaultShutdownTimeout)
	def("RetentionInterval", &cfg.RetentionInterval, time.Hour)
	if cfg.EventRetention == 0 {
		cfg.EventRetention = DefaultEventRetention
	}
	def("DecisionRetryBackoff", &cfg.DecisionRetryBackoff, time.Second)
	defInt("StickyCacheSize", &cfg.StickyCacheSize, 1024)
	if cfg.PayloadBlobs != nil {
		defInt("MaxPayloadSize", &cfg.MaxPayloadSize, limits.OffloadPayloadSize)
	}
	defInt("MaxPayloadSize", &cfg.MaxPayloadSize, limits.DefaultPayloadSize)
	defInt("PayloadOffloadAbove", &cfg.PayloadOffloadAbove, payloadstore.DefaultOffloadAbove)
	def("PayloadBlobGrace", &cfg.PayloadBlobGrace, time.Hour)
	def("PayloadBlobSweepInterval", &cfg.PayloadBlobSweepInterval, time.Hour)
	if cfg.WorkflowQueue == "" {
		cfg.WorkflowQueue = "default"
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.Retention < 0 {
		errs = append(errs, fmt.Errorf("Config.Retention is %s; it must not be negative", cfg.Retention))
	}
	for i, p := range cfg.RetentionPolicies {
		if len(p.Workflows) == 0 && p.Queue == "" {
			errs = append(errs, fmt.Errorf("Config.RetentionPolicies[%d] names no workflow and no queue", i))
		}
		if slices.Contains(p.Workflows, "") {
			errs = append(errs, fmt.Errorf("Config.RetentionPolicies[%d].Workflows holds an empty name", i))
		}
	}
	if cfg.HeartbeatInterval > cfg.LeaseDuration/2 && cfg.LeaseDuration > 0 {
		errs = append(errs, fmt.Errorf("Config.HeartbeatInterval %s must be at most half of LeaseDuration %s: a task whose lease was not extended is stopped LeaseDuration/5 before the lease ends, so a heartbeat must reach the store well before that", cfg.HeartbeatInterval, cfg.LeaseDuration))
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = newID()[24:]
	}
	if cfg.BuildID == "" {
		cfg.BuildID = DefaultBuildID()
	} else if err := checkBuildID(cfg.BuildID); err != nil {
		errs = append(errs, fmt.Errorf("Config.BuildID: %w", err))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if (cfg.PayloadCodec != nil || cfg.PayloadBlobs != nil) && cfg.Store != nil {
		var off *payloadstore.Offload
		if cfg.PayloadBlobs != nil {
			off = &payloadstore.Offload{Bucket: cfg.PayloadBlobs, Above: cfg.PayloadOffloadAbove}
		}
		cfg.Store = payloadstore.WrapOffload(cfg.Store, cfg.PayloadCodec, off)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, errors.Join(errs...)
}
