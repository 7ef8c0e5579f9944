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

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// BenchmarkMetricsOverhead runs workload (a) of docs/benchmarks.md (1,000
// runs of a one-step flow, 50 concurrent callers, SQLite) with the
// metrics going nowhere (the no-op provider, as without an SDK) and into
// the SDK with a ManualReader collected after each round.
//
//	go test -run '^$' -bench MetricsOverhead -benchtime 3x -count 3 .
func BenchmarkMetricsOverhead(b *testing.B) {
	b.Run("noop", func(b *testing.B) { benchRuns(b, noop.NewMeterProvider(), nil) })
	b.Run("sdk", func(b *testing.B) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		benchRuns(b, mp, reader)
	})
}

func benchRuns(b *testing.B, mp metric.MeterProvider, reader *sdkmetric.ManualReader) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(b.TempDir(), "h.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 64}, MeterProvider: mp})
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
