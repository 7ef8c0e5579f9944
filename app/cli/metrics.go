package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// serverMetrics is the metrics set-up of `heph server`: the SDK's meter
// provider with the readers OTEL_METRICS_EXPORTER asks for.
type serverMetrics struct {
	// provider is nil when no exporter is asked for (none).
	provider *sdkmetric.MeterProvider
	// scrape serves GET /metrics (prometheus), or is nil.
	scrape http.Handler
}

// newServerMetrics reads the standard variables: OTEL_METRICS_EXPORTER, a
// comma-separated list of none, prometheus (the default: served at
// /metrics on the server's listener) and otlp (pushed per
// OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL, grpc or http/protobuf, the
// default, to OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT every
// OTEL_METRIC_EXPORT_INTERVAL, as the exporters read them).
func newServerMetrics(ctx context.Context, getenv func(string) string) (*serverMetrics, error) {
	spec := strings.TrimSpace(getenv("OTEL_METRICS_EXPORTER"))
	if spec == "" {
		spec = "prometheus"
	}
	sm := &serverMetrics{}
	var opts []sdkmetric.Option
	for name := range strings.SplitSeq(spec, ",") {
		switch name = strings.TrimSpace(name); name {
		case "none":
		case "prometheus":
			if sm.scrape != nil {
				continue
			}
			reg := prometheus.NewRegistry()
			exp, err := otelprom.New(otelprom.WithRegisterer(reg))
			if err != nil {
				return nil, fmt.Errorf("metrics: the Prometheus exporter: %w", err)
			}
			opts = append(opts, sdkmetric.WithReader(exp))
			sm.scrape = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		case "otlp":
			exp, err := otlpExporter(ctx, getenv)
			if err != nil {
				return nil, err
			}
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		default:
			return nil, fmt.Errorf("OTEL_METRICS_EXPORTER=%q: %q is not none, prometheus or otlp", spec, name)
		}
	}
	if len(opts) == 0 {
		return sm, nil
	}
	res, err := resource.Merge(resource.Default(), resource.Environment())
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("metrics: the resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	sm.provider = sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithResource(res))...)
	return sm, nil
}

// otlpProtocol returns the OTLP protocol asked for a signal (METRICS,
// TRACES): OTEL_EXPORTER_OTLP_<signal>_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, with the variable it came from.
func otlpProtocol(getenv func(string) string, signal string) (proto, from string) {
	from = "OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"
	if proto = getenv(from); proto == "" {
		from = "OTEL_EXPORTER_OTLP_PROTOCOL"
		proto = getenv(from)
	}
	return proto, from
}

func otlpExporter(ctx context.Context, getenv func(string) string) (sdkmetric.Exporter, error) {
	proto, from := otlpProtocol(getenv, "METRICS")
	var (
		exp sdkmetric.Exporter
		err error
	)
	switch proto {
	case "", "http/protobuf":
		exp, err = otlpmetrichttp.New(ctx)
	case "grpc":
		exp, err = otlpmetricgrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%s=%q: heph exports OTLP metrics over grpc or http/protobuf", from, proto)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: the OTLP exporter: %w", err)
	}
	return exp, nil
}

// meterProvider is what the client records to: nil (the client's default,
// the global no-op) when nothing is exported.
func (sm *serverMetrics) meterProvider() metric.MeterProvider {
	if sm.provider == nil {
		return nil
	}
	return sm.provider
}

// handler serves GET /metrics from the Prometheus exporter, the rest
// from next.
func (sm *serverMetrics) handler(next http.Handler) http.Handler {
	if sm.scrape == nil {
		return next
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", sm.scrape)
	mux.Handle("/", next)
	return mux
}

// shutdown flushes and stops the exporters.
func (sm *serverMetrics) shutdown(ctx context.Context) error {
	if sm.provider == nil {
		return nil
	}
	return sm.provider.Shutdown(ctx)
}
