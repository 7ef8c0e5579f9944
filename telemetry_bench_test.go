package hephaestus_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// BenchmarkTelemetryOverhead runs workload (a) of docs/benchmarks.md
// (1,000 runs of a one-step flow, 50 concurrent callers, SQLite) four
// ways, in turn within each iteration so that the shared machine's
// changing load falls on each alike:
//
//   - off: no instrumentation at all (no metrics subscriber, no tracer);
//   - noop: the instrumentation with no SDK (the OpenTelemetry no-op
//     providers, as in a program that installs none);
//   - metrics: the metrics SDK, a ManualReader collected after each round;
//   - metrics+traces: both SDKs, the spans through a batch span processor
//     into an exporter that drops them.
//
// Each round opens a new database and client; only the 1,000 runs are
// timed. It reports each way's runs/s and its ratio to off.
//
//	go test -run '^$' -bench TelemetryOverhead -benchtime 5x -count 3 .
func BenchmarkTelemetryOverhead(b *testing.B) {
	type way struct {
		name  string
		setup func() (metric.MeterProvider, *sdkmetric.ManualReader, trace.TracerProvider, func())
	}
	ways := []way{
		{"off", func() (metric.MeterProvider, *sdkmetric.ManualReader, trace.TracerProvider, func()) {
			heph.SetUninstrumented(true)
			return noop.NewMeterProvider(), nil, tracenoop.NewTracerProvider(), func() { heph.SetUninstrumented(false) }
		}},
		{"noop", func() (metric.MeterProvider, *sdkmetric.ManualReader, trace.TracerProvider, func()) {
			return noop.NewMeterProvider(), nil, tracenoop.NewTracerProvider(), func() {}
		}},
		{"metrics", func() (metric.MeterProvider, *sdkmetric.ManualReader, trace.TracerProvider, func()) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			return mp, reader, tracenoop.NewTracerProvider(), func() { _ = mp.Shutdown(context.Background()) }
		}},
		{"metrics+traces", func() (metric.MeterProvider, *sdkmetric.ManualReader, trace.TracerProvider, func()) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			return mp, reader, tp, func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) }
		}},
	}
	took := make([]time.Duration, len(ways))
	for range b.N {
		for i, w := range ways {
			mp, reader, tp, done := w.setup()
			took[i] += benchRound(b, mp, reader, tp)
			done()
		}
	}
	for i, w := range ways {
		b.ReportMetric(float64(b.N*benchRuns)/took[i].Seconds(), w.name+"-runs/s")
		if i > 0 {
			b.ReportMetric(took[0].Seconds()/took[i].Seconds(), w.name+"/off")
		}
	}
}

const benchRuns, benchCallers = 1000, 50

// benchRound runs workload (a) once on a new SQLite database and returns
// how long the runs took.
func benchRound(b *testing.B, mp metric.MeterProvider, reader *sdkmetric.ManualReader, tp trace.TracerProvider) time.Duration {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(b.TempDir(), "h.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 64}, MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(echoFlow); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	start := time.Now()
	var wg sync.WaitGroup
	for range benchCallers {
		wg.Go(func() {
			for range benchRuns / benchCallers {
				if r, err := c.Run(ctx, "echo", "hi", nil); err != nil || r.Status != heph.StatusCompleted {
					b.Errorf("run: %+v, %v", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if reader != nil {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
