package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hephaestus-go/hephaestus/app/demo"
)

// With OTEL_TRACES_EXPORTER=otlp the server pushes the runs' spans over
// OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT: a collector stand-in receives
// the seeded example runs' traces, each run's steps in its root's trace.
func TestTracesExportedOverOTLP(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		spans = map[string][]string{} // span name -> trace ids (hex)
		roots = map[string]string{}   // span id of a "run …" span -> its name
		under = map[string][]string{} // parent span id -> child names
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id, tid, parent := string(s.SpanId), string(s.TraceId), string(s.ParentSpanId)
					spans[s.Name] = append(spans[s.Name], tid)
					if s.Name == "run "+demo.OrderFlow {
						roots[id] = s.Name
					}
					under[parent] = append(under[parent], s.Name)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()
	startServer(t, []string{"HEPH_EXAMPLES=true", "HEPH_INSECURE=true", "OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}, "--sqlite", t.TempDir()+"/heph.db")
	eventually(t, "an example order's root span with its steps under it", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range roots {
			n := 0
			for _, name := range under[id] {
				if name == "step validate_order" || name == "step ship_order" {
					n++
				}
			}
			if n == 2 {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	if len(spans["end "+demo.OrderFlow]) == 0 {
		t.Errorf("no end span of an order; spans: %v", keys(spans))
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
