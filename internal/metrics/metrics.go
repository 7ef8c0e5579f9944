// Package metrics records the runtime's OpenTelemetry metrics: one
// subscriber of the telemetry hub turns events into counters and
// histograms, and observable gauges read the store (queue depth, the
// oldest ready task, active and blocked runs) when a reader collects.
//
// It uses the OpenTelemetry metric API only: what records the values (an
// SDK with a Prometheus or OTLP exporter) is the program's choice, and
// without one every instrument is a no-op. Attributes are bounded: names
// of workflows, steps, queues, schedules and fixed outcomes, never a run
// id. docs/observability.md lists every instrument.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/hephaestus-go/hephaestus"

// MaxQueues bounds the queues the queue gauges report, per collection.
const MaxQueues = 100

// gaugeTimeout bounds the store reads of one collection.
const gaugeTimeout = 5 * time.Second

// durationBuckets are the bounds, in seconds, of the duration histograms.
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// sizeBuckets are the bounds of the commit batch size histogram.
var sizeBuckets = []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// Config configures the metrics of a client.
type Config struct {
	MeterProvider metric.MeterProvider
	Store         store.Store
	Clock         clock.Clock
	Logger        *slog.Logger
	// Queues are the queues the queue gauges report: those the process
	// serves.
	Queues []string
}

// Metrics holds the instruments.
type Metrics struct {
	cfg   Config
	meter metric.Meter

	runsStarted, runsCompleted, runsFailed, runsCancelled metric.Int64Counter
	runDuration                                           metric.Float64Histogram
	stepDuration, activityDuration                        metric.Float64Histogram
	retries                                               metric.Int64Counter
	queueWait                                             metric.Float64Histogram
	claims, leaseLosses                                   metric.Int64Counter
	commitBatch                                           metric.Int64Histogram
	commitDuration                                        metric.Float64Histogram
	commitFailures                                        metric.Int64Counter
	decisionDuration                                      metric.Float64Histogram
	decisionFailures                                      metric.Int64Counter
	scheduleTicks                                         metric.Int64Counter
	conditions                                            metric.Int64Counter
	polls, pollErrors                                     metric.Int64Counter

	queueDepth, oldestAge, activeRuns, blockedRuns metric.Int64ObservableGauge
}

// New creates the instruments on cfg.MeterProvider.
func New(cfg *Config) (*Metrics, error) {
	m := &Metrics{cfg: *cfg, meter: cfg.MeterProvider.Meter(ScopeName)}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64Histogram {
		h, err := m.meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	m.runsStarted = counter("heph.runs.started", "{run}", "Runs created.")
	m.runsCompleted = counter("heph.runs.completed", "{run}", "Runs that completed.")
	m.runsFailed = counter("heph.runs.failed", "{run}", "Runs that failed.")
	m.runsCancelled = counter("heph.runs.cancelled", "{run}", "Runs that were cancelled.")
	m.runDuration = seconds("heph.run.duration", "Time from a run's creation to its end.")
	m.stepDuration = seconds("heph.step.duration", "Time from the start of a flow step's attempt to the commit of its outcome.")
	m.activityDuration = seconds("heph.activity.duration", "Time from the start of a workflow activity's attempt to the commit of its outcome.")
	m.retries = counter("heph.step.retries", "{attempt}", "Attempts of steps and activities that failed and were scheduled again.")
	m.queueWait = seconds("heph.task.queue_wait", "Time a task waited in its queue, from ready to started by a worker.")
	m.claims = counter("heph.task.claims", "{task}", "Tasks claimed and started by the workers of this process.")
	m.leaseLosses = counter("heph.task.lease_losses", "{task}", "Tasks whose lease this process lost while running them.")
	var err error
	m.commitBatch, err = m.meter.Int64Histogram("heph.commit.batch_size", metric.WithUnit("{change}"),
		metric.WithDescription("Changes committed per transaction of the group commit (0: claims only)."), metric.WithExplicitBucketBoundaries(sizeBuckets...))
	errs = append(errs, err)
	m.commitDuration = seconds("heph.commit.duration", "Time to commit a transaction of the group commit, retries included.")
	m.commitFailures = counter("heph.commit.failures", "{transaction}", "Transactions of the group commit that failed and were retried.")
	m.decisionDuration = seconds("heph.decision.duration", "Time a decision task of a code-first workflow took, to its commit.")
	m.decisionFailures = counter("heph.decision.failures", "{decision}", "Workflow decisions that failed and are retried later.")
	m.scheduleTicks = counter("heph.schedule.ticks", "{tick}", "Schedule ticks handled, by outcome (fired, failed, skipped).")
	m.conditions = counter("heph.run.conditions", "{condition}", "Conditions recorded on runs that do not progress.")
	m.polls = counter("heph.worker.polls", "{poll}", "Polls of a queue by this process's workers.")
	m.pollErrors = counter("heph.worker.errors", "{error}", "Polls of a queue that failed.")
	m.queueDepth = gauge("heph.queue.depth", "{task}", "Tasks in a queue by state (ready, scheduled, leased), read from the store.")
	m.oldestAge = gauge("heph.queue.oldest_age", "s", "Age of the oldest ready task of a queue (0 when none is ready), read from the store.")
	m.activeRuns = gauge("heph.runs.active", "{run}", "Active runs by status, read from the store.")
	m.blockedRuns = gauge("heph.runs.blocked", "{run}", "Active runs with a condition (they do not progress), read from the store.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("create the metric instruments: %w", err)
	}
	return m, nil
}

// Observe registers the gauges' callback; the returned function
// unregisters it.
func (m *Metrics) Observe() (stop func(), err error) {
	reg, err := m.meter.RegisterCallback(m.observe, m.queueDepth, m.oldestAge, m.activeRuns, m.blockedRuns)
	if err != nil {
		return nil, fmt.Errorf("register the metric gauges: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// observe reads the gauges from the store: one QueueStats and one
// RunStats over a one-second window, both bounded.
func (m *Metrics) observe(ctx context.Context, o metric.Observer) error {
	ctx, cancel := context.WithTimeout(ctx, gaugeTimeout)
	defer cancel()
	now := m.cfg.Clock.Now()
	qs, err := m.cfg.Store.QueueStats(ctx, &store.QueueStatsParams{Names: m.cfg.Queues, Now: now, TopKeys: 1})
	if err != nil {
		m.cfg.Logger.Warn("metrics: read the queues", slog.Any("err", err))
	}
	for i, q := range qs {
		if i == MaxQueues {
			break
		}
		name := attribute.String("queue", q.Queue.Name)
		for _, s := range []struct {
			state string
			n     int
		}{{"ready", q.Ready}, {"scheduled", q.Scheduled}, {"leased", q.Leased}} {
			o.ObserveInt64(m.queueDepth, int64(s.n), metric.WithAttributes(name, attribute.String("state", s.state)))
		}
		var age int64
		if !q.OldestReady.IsZero() {
			age = int64(max(now.Sub(q.OldestReady), 0) / time.Second)
		}
		o.ObserveInt64(m.oldestAge, age, metric.WithAttributes(name))
	}
	st, err := m.cfg.Store.RunStats(ctx, &store.RunStatsParams{Since: now.Add(-time.Second), Until: now, Bucket: time.Second, StaleAfter: time.Hour})
	if err != nil {
		m.cfg.Logger.Warn("metrics: read the active runs", slog.Any("err", err))
		return nil
	}
	for _, s := range store.ActiveStatuses() {
		o.ObserveInt64(m.activeRuns, int64(st.Active[s]), metric.WithAttributes(attribute.String("status", string(s))))
	}
	o.ObserveInt64(m.blockedRuns, int64(st.Blocked.Count))
	return nil
}

// Record is the hub subscriber: it records one event. The frequent events
// (runs, attempts, tasks, commits, decisions, polls) first ask their
// instruments whether they are enabled, so that with no SDK (the no-op or
// the global provider before an SDK is installed) no attribute set is
// built.
func (m *Metrics) Record(e telemetry.Event) {
	ctx := context.Background()
	switch e.Kind {
	case telemetry.RunStarted:
		if m.runsStarted.Enabled(ctx) {
			m.runsStarted.Add(ctx, 1, runAttrs(e))
		}
	case telemetry.RunCompleted, telemetry.RunFailed, telemetry.RunCancelled, telemetry.RunContinued:
		if !m.runDuration.Enabled(ctx) && !m.runsCompleted.Enabled(ctx) {
			return // no SDK: build no attributes
		}
		status := "continued"
		switch e.Kind {
		case telemetry.RunCompleted:
			status = "completed"
			m.runsCompleted.Add(ctx, 1, runAttrs(e))
		case telemetry.RunFailed:
			status = "failed"
			m.runsFailed.Add(ctx, 1, runAttrs(e))
		case telemetry.RunCancelled:
			status = "cancelled"
			m.runsCancelled.Add(ctx, 1, runAttrs(e))
		}
		m.runDuration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(
			attribute.String("workflow", e.Workflow), attribute.String("kind", string(e.RunKind)), attribute.String("status", status)))
	case telemetry.StepCompleted, telemetry.StepFailed:
		if !m.stepDuration.Enabled(ctx) && !m.activityDuration.Enabled(ctx) && !m.retries.Enabled(ctx) {
			return
		}
		outcome := "completed"
		switch {
		case e.Retry:
			outcome = "retried"
			m.retries.Add(ctx, 1, metric.WithAttributes(attribute.String("workflow", e.Workflow), attribute.String("step", e.Step), attribute.String("queue", e.Queue)))
		case e.Kind == telemetry.StepFailed:
			outcome = "failed"
		}
		h := m.stepDuration
		if e.RunKind == hephtype.KindWorkflow {
			h = m.activityDuration
		}
		h.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(attribute.String("workflow", e.Workflow), attribute.String("step", e.Step),
			attribute.String("queue", e.Queue), attribute.String("outcome", outcome)))
	case telemetry.TaskStarted:
		if !m.claims.Enabled(ctx) && !m.queueWait.Enabled(ctx) {
			return
		}
		m.claims.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", e.Queue), attribute.String("task_kind", e.TaskKind)))
		m.queueWait.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(attribute.String("workflow", e.Workflow), attribute.String("step", e.Step),
			attribute.String("queue", e.Queue), attribute.String("task_kind", e.TaskKind)))
	case telemetry.TaskFailed:
		if errors.Is(e.Err, store.ErrLeaseLost) || errors.Is(e.Err, worker.ErrLeaseLost) || errors.Is(e.Err, worker.ErrLeaseExpiring) {
			m.leaseLosses.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", e.Queue), attribute.String("task_kind", e.TaskKind)))
		}
	case telemetry.CommitCompleted:
		if !m.commitBatch.Enabled(ctx) && !m.commitDuration.Enabled(ctx) {
			return
		}
		m.commitBatch.Record(ctx, int64(e.Count))
		m.commitDuration.Record(ctx, e.Duration.Seconds())
	case telemetry.CommitFailed:
		m.commitFailures.Add(ctx, 1)
	case telemetry.DecisionCompleted:
		if !m.decisionDuration.Enabled(ctx) {
			return
		}
		m.decisionDuration.Record(ctx, e.Duration.Seconds(), metric.WithAttributes(attribute.String("workflow", e.Workflow)))
	case telemetry.DecisionFailed:
		m.decisionFailures.Add(ctx, 1, metric.WithAttributes(attribute.String("workflow", e.Workflow)))
	case telemetry.ScheduleFired, telemetry.ScheduleSkipped:
		outcome := "fired"
		switch {
		case e.Kind == telemetry.ScheduleSkipped:
			outcome = "skipped"
		case e.Err != nil:
			outcome = "failed"
		}
		m.scheduleTicks.Add(ctx, 1, metric.WithAttributes(attribute.String("schedule", e.Schedule), attribute.String("outcome", outcome)))
	case telemetry.RunCondition:
		m.conditions.Add(ctx, 1, metric.WithAttributes(attribute.String("workflow", e.Workflow), attribute.String("condition", e.Condition)))
	case telemetry.WorkerPoll:
		if !m.polls.Enabled(ctx) {
			return
		}
		m.polls.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", e.Queue)))
	case telemetry.WorkerFailed:
		m.pollErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("queue", e.Queue)))
	}
}

func runAttrs(e telemetry.Event) metric.AddOption {
	return metric.WithAttributes(attribute.String("workflow", e.Workflow), attribute.String("kind", string(e.RunKind)))
}
