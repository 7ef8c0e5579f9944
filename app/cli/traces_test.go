package cli

import (
	"context"
	"strings"
	"testing"
)

// OTEL_TRACES_EXPORTER: none (and unset) record nothing; otlp makes a
// provider over either protocol; anything else is refused with the
// variable named.
func TestServerTracesChoice(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		env     map[string]string
		want    bool   // a provider
		errPart string // the error names it
	}{
		{env: map[string]string{}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			errPart: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, errPart: `OTEL_TRACES_EXPORTER="jaeger"`},
	} {
		tp, err := newServerTraces(ctx, func(k string) string { return c.env[k] })
		switch {
		case c.errPart != "":
			if err == nil || !strings.Contains(err.Error(), c.errPart) {
				t.Errorf("%v: err %v; want one naming %s", c.env, err, c.errPart)
			}
		case err != nil:
			t.Errorf("%v: %v", c.env, err)
		case (tp != nil) != c.want:
			t.Errorf("%v: provider %v; want one: %v", c.env, tp, c.want)
		}
		if tp != nil {
			_ = tp.Shutdown(ctx)
		}
	}
}
