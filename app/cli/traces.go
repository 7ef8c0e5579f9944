package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// newServerTraces is the tracing set-up of `heph server`: the SDK's
// tracer provider with the exporter OTEL_TRACES_EXPORTER asks for: none
// (the default: no span is recorded, no run gets a trace context) or otlp
// (a batch span processor, as OTEL_BSP_* say, pushing per
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, grpc or http/protobuf, the
// default, to OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT). The sampler is the
// SDK's, per OTEL_TRACES_SAMPLER. It returns nil when nothing is exported.
func newServerTraces(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	spec := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	var exp sdktrace.SpanExporter
	for name := range strings.SplitSeq(spec, ",") {
		switch name = strings.TrimSpace(name); name {
		case "", "none":
		case "otlp":
			if exp != nil {
				continue
			}
			proto, from := otlpProtocol(getenv, "TRACES")
			var err error
			switch proto {
			case "", "http/protobuf":
				exp, err = otlptracehttp.New(ctx)
			case "grpc":
				exp, err = otlptracegrpc.New(ctx)
			default:
				return nil, fmt.Errorf("%s=%q: heph exports OTLP traces over grpc or http/protobuf", from, proto)
			}
			if err != nil {
				return nil, fmt.Errorf("traces: the OTLP exporter: %w", err)
			}
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: %q is not none or otlp", spec, name)
		}
	}
	if exp == nil {
		return nil, nil
	}
	res, err := resource.Merge(resource.Default(), resource.Environment())
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("traces: the resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// tracerProvider is what the client traces to: nil (the client's default,
// the global provider) when nothing is exported.
func tracerProvider(tp *sdktrace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return nil
	}
	return tp
}
