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
// ways: without the instrumentation at all (off: no metrics subscriber, no
// tracer), with it and no SDK (noop: the OpenTelemetry no-op providers, as
// in a program that installs none), with the metrics SDK (a ManualReader
// collected after each round), and with both SDKs (metrics, and traces
// through a batch span processor into an exporter that drops them).
//
//	go test -run '^$' -bench TelemetryOverhead -benchtime 3x -count 5 .
//
// -count repeats the four in turn, so that the machine's changing load
// falls on each alike; compare medians.
func BenchmarkTelemetryOverhead(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		heph.SetUninstrumented(true)
		defer heph.SetUninstrumented(false)
		benchRuns(b, noop.NewMeterProvider(), nil, tracenoop.NewTracerProvider())
	})
	b.Run("noop", func(b *testing.B) {
		benchRuns(b, noop.NewMeterProvider(), nil, tracenoop.NewTracerProvider())
	})
	b.Run("metrics", func(b *testing.B) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		benchRuns(b, mp, reader, tracenoop.NewTracerProvider())
	})
	b.Run("metrics+traces", func(b *testing.B) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		benchRuns(b, mp, reader, tp)
	})
}

func benchRuns(b *testing.B, mp metric.MeterProvider, reader *sdkmetric.ManualReader, tp trace.TracerProvider) {
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
	const runs, callers = 1000, 50
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range runs / callers {
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
	}
	b.ReportMetric(float64(b.N*runs)/time.Since(start).Seconds(), "runs/s")
}
