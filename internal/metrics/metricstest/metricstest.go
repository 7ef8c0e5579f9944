// Package metricstest flattens collected OpenTelemetry metrics for tests:
// one map from series to value, which a test compares with what it
// expects.
package metricstest

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Flatten maps "name{k=v,...}" (attributes sorted) to a sum's or a
// gauge's value, or to a histogram's count, with its sum as
// "name{...}#sum".
func Flatten(rm metricdata.ResourceMetrics) map[string]float64 {
	out := map[string]float64{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					k := key(m.Name, p.Attributes)
					out[k], out[k+"#sum"] = float64(p.Count), p.Sum
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					k := key(m.Name, p.Attributes)
					out[k], out[k+"#sum"] = float64(p.Count), float64(p.Sum)
				}
			}
		}
	}
	return out
}
