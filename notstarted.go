package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hephaestus-go/hephaestus/store"
)

// ErrNotStarted: a call would wait for a run that nothing runs: this
// client was not started (Client.Start) and no live worker of any process
// has what the run needs. Without it the wait would only end with its
// context.
var ErrNotStarted = errors.New("client not started, and no worker serves the run")

// checkServed fails fast with ErrNotStarted when neither this client
// (started) nor a live worker recorded in the store has a handler that
// starts with prefix (store.FlowHandler, store.WorkflowHandler). When the
// store cannot tell, it does not fail: the caller waits, as asked.
func (c *Client) checkServed(ctx context.Context, runID, prefix string) error {
	if c.pool.Started() {
		return nil
	}
	ws, err := c.cfg.Store.ListWorkers(ctx, &store.ListWorkersParams{Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil
	}
	for _, w := range ws {
		if slices.ContainsFunc(w.Handlers, func(h string) bool { return strings.HasPrefix(h, prefix) }) {
			return nil
		}
	}
	kind, name, _ := strings.Cut(strings.TrimSuffix(prefix, "@"), ":")
	return fmt.Errorf("hephaestus: run %s: %w: call Client.Start in this process, or start a worker process that registers %s %q",
		runID, ErrNotStarted, kind, name)
}

// servedElsewhere reports whether a live worker recorded in the store has
// the handler (false when the store cannot tell).
func (c *Client) servedElsewhere(ctx context.Context, handler string) bool {
	ws, err := c.cfg.Store.ListWorkers(ctx, &store.ListWorkersParams{Now: c.cfg.Clock.Now()})
	if err != nil {
		return false
	}
	for _, w := range ws {
		if slices.Contains(w.Handlers, handler) {
			return true
		}
	}
	return false
}

// servedOrCatalogued is the workflow runtime's Served hook: a workflow
// that a live worker serves, or that some process published to the
// catalog (its run waits, unserved, until a worker of it is live).
func (c *Client) servedOrCatalogued(ctx context.Context, handler string) bool {
	if c.servedElsewhere(ctx, handler) {
		return true
	}
	name, ok := strings.CutPrefix(handler, "workflow:")
	if !ok {
		return false
	}
	_, err := c.cfg.Store.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionWorkflow, Name: name})
	return err == nil
}
