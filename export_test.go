package hephaestus

import "context"

// SetUninstrumented leaves the clients made after it without metrics and
// spans (true) or with them (false): the baseline of
// BenchmarkTelemetryOverhead.
func SetUninstrumented(v bool) { uninstrumented.Store(v) }

// PublishCatalog publishes what c registered, as Start does: for
// BenchmarkPublishCatalog.
func PublishCatalog(c *Client) error { return c.publish(context.Background(), nil) }
