package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/metrics/metricstest"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// collect flattens what a reader collects (metricstest.Flatten).
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return metricstest.Flatten(rm)
}

// Record turns each kind of event into the instrument the documentation
// names, with its attributes: the outcome of a step (a retry counts as
// one), a workflow's attempts as activities, lease losses among task
// failures, schedule ticks by outcome; and it ignores what it does not
// measure.
func TestRecordClassifies(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := New(&Config{MeterProvider: mp, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	flow := func(k telemetry.Kind) telemetry.Event {
		return telemetry.Event{Kind: k, Workflow: "order", RunKind: hephtype.KindFlow, Step: "charge", Queue: "default", Duration: 2 * time.Second}
	}
	retried := flow(telemetry.StepFailed)
	retried.Retry = true
	activity := flow(telemetry.StepCompleted)
	activity.Workflow, activity.RunKind, activity.Step = "cart", hephtype.KindWorkflow, "charge_card"
	claim := flow(telemetry.TaskStarted)
	claim.TaskKind, claim.Duration = "step", 500*time.Millisecond
	lost := telemetry.Event{Kind: telemetry.TaskFailed, Queue: "default", TaskKind: "step", Err: fmt.Errorf("complete: %w", store.ErrLeaseLost)}
	expiring := telemetry.Event{Kind: telemetry.TaskFailed, Queue: "default", TaskKind: "step", Err: worker.ErrLeaseExpiring}
	plain := telemetry.Event{Kind: telemetry.TaskFailed, Queue: "default", TaskKind: "step", Err: errors.New("boom")}
	for _, e := range []telemetry.Event{
		flow(telemetry.RunStarted), flow(telemetry.RunStarted), flow(telemetry.RunCompleted), flow(telemetry.RunFailed),
		flow(telemetry.StepCompleted), retried, flow(telemetry.StepFailed), activity,
		claim, lost, expiring, plain,
		{Kind: telemetry.CommitCompleted, Count: 8, Duration: time.Millisecond},
		{Kind: telemetry.ScheduleFired, Schedule: "nightly"}, {Kind: telemetry.ScheduleSkipped, Schedule: "nightly"},
		{Kind: telemetry.ScheduleFired, Schedule: "nightly", Err: errors.New("start failed")},
		{Kind: telemetry.WorkerPoll, Queue: "default"}, {Kind: telemetry.WorkerFailed, Queue: "default"},
		{Kind: telemetry.StepStarted, Workflow: "order"}, // not measured
	} {
		m.Record(e)
	}
	got := collect(t, reader)
	want := map[string]float64{
		"heph.runs.started{kind=flow,workflow=order}":                                            2,
		"heph.runs.completed{kind=flow,workflow=order}":                                          1,
		"heph.runs.failed{kind=flow,workflow=order}":                                             1,
		"heph.run.duration{kind=flow,status=completed,workflow=order}":                           1,
		"heph.step.duration{outcome=completed,queue=default,step=charge,workflow=order}":         1,
		"heph.step.duration{outcome=retried,queue=default,step=charge,workflow=order}":           1,
		"heph.step.duration{outcome=failed,queue=default,step=charge,workflow=order}":            1,
		"heph.step.duration{outcome=failed,queue=default,step=charge,workflow=order}#sum":        2,
		"heph.activity.duration{outcome=completed,queue=default,step=charge_card,workflow=cart}": 1,
		"heph.step.retries{queue=default,step=charge,workflow=order}":                            1,
		"heph.task.claims{queue=default,task_kind=step}":                                         1,
		"heph.task.queue_wait{queue=default,step=charge,task_kind=step,workflow=order}#sum":      0.5,
		"heph.task.lease_losses{queue=default,task_kind=step}":                                   2,
		"heph.commit.batch_size{}#sum":                                                           8,
		"heph.schedule.ticks{outcome=fired,schedule=nightly}":                                    1,
		"heph.schedule.ticks{outcome=skipped,schedule=nightly}":                                  1,
		"heph.schedule.ticks{outcome=failed,schedule=nightly}":                                   1,
		"heph.worker.polls{queue=default}":                                                       1,
		"heph.worker.errors{queue=default}":                                                      1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "heph.runs.cancelled") || strings.Contains(k, "run_id") {
			t.Errorf("unexpected series %s", k)
		}
	}
}
