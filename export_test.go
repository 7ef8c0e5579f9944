package hephaestus

import (
	"context"

	"github.com/hephaestus-go/hephaestus/store"
)

// SetUninstrumented leaves the clients made after it without metrics and
// spans (true) or with them (false): the baseline of
// BenchmarkTelemetryOverhead.
func SetUninstrumented(v bool) { uninstrumented.Store(v) }

// PublishCatalog publishes what c registered, as Start does: for
// BenchmarkPublishCatalog.
func PublishCatalog(c *Client) error { return c.publish(context.Background(), nil) }

// StepNotWaiting is what an event wait's delivery decides when the resume
// found the step of runID not waiting: nil when the wait is done, an
// error to try again.
func StepNotWaiting(ctx context.Context, c *Client, runID, step string) error {
	return c.stepNotWaiting(ctx, &store.EventWait{RunID: runID, Step: step})
}
