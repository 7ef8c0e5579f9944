package hephaestus

// SetUninstrumented leaves the clients made after it without metrics and
// spans (true) or with them (false): the baseline of
// BenchmarkTelemetryOverhead.
func SetUninstrumented(v bool) { uninstrumented.Store(v) }
