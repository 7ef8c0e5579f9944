package cli_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

// heph show of a workflow blocked on a signal prints it under "Waiting
// for:", with the command that sends it.
func TestShowWaitingForCLI(t *testing.T) {
	t.Parallel()
	c, st := sqliteClient(t)
	wf := workflow.New("cli.waits", func(ctx workflow.Context, _ string) (string, error) {
		return workflow.WaitSignal[string](ctx, "activate")
	})
	if err := c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)
	r, err := c.StartWorkflow(t.Context(), "cli.waits", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		ws, err := c.WaitingFor(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the workflow never waited for its signal")
		case <-time.After(10 * time.Millisecond): // polling for the decision, not timing it
		}
	}
	wantLines(t, "show", ok(t, env, "show", r.ID), `^Waiting for:$`, `^  signal activate \(heph signal `+regexp.QuoteMeta(r.ID)+` activate\)$`)
}
