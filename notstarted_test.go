package hephaestus_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	echoFlow = func() *flow.Flow {
		b := flow.New("echo")
		flow.Step(b, "say", func(ctx context.Context, in string) (string, error) { return in, nil })
		return b.MustBuild()
	}()
	echoActivity = workflow.NewActivity("echo.say", func(ctx context.Context, in string) (string, error) { return in, nil })
	echoWorkflow = workflow.New("echo", func(ctx workflow.Context, in string) (string, error) { return echoActivity.Execute(ctx, in) })
	// pureWorkflow completes in its first activation: no worker needed.
	pureWorkflow = workflow.New("pure", func(ctx workflow.Context, in string) (string, error) { return "pure " + in, nil })
)

func newClient(t *testing.T, st store.Store) *heph.Client {
	t.Helper()
	c, err := heph.New(&heph.Config{Store: st, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	if err := c.Register(echoFlow); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(echoWorkflow, pureWorkflow); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterActivities(echoActivity); err != nil {
		t.Fatal(err)
	}
	return c
}

// Forgetting Start: Run and ExecuteWorkflow fail at once with
// ErrNotStarted instead of waiting until their context ends; once a worker
// of another client serves the flow and the workflow, they wait and get
// the result.
func TestNotStartedFailsFast(t *testing.T) {
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "h.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := newClient(t, st)
	r, err := c.Run(ctx, "echo", "hi", nil)
	if !errors.Is(err, heph.ErrNotStarted) || ctx.Err() != nil {
		t.Fatalf("Run on a client not started: %v; want ErrNotStarted at once", err)
	}
	if r == nil || r.Status.Terminal() {
		t.Fatalf("Run returned run %+v; want the stored run, waiting for a worker", r)
	}
	if _, err := heph.ExecuteWorkflow(ctx, c, echoWorkflow, "hi", nil); !errors.Is(err, heph.ErrNotStarted) || ctx.Err() != nil {
		t.Fatalf("ExecuteWorkflow on a client not started: %v; want ErrNotStarted at once", err)
	}
	// A workflow that ends in its first activation needs no worker.
	if out, err := heph.ExecuteWorkflow(ctx, c, pureWorkflow, "hi", nil); err != nil || out != "pure hi" {
		t.Fatalf("a workflow that needs no worker: %q, %v", out, err)
	}

	// Another client works: the first waits for it.
	w := newClient(t, st)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		ws, err := st.ListWorkers(ctx, &store.ListWorkersParams{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the worker never recorded itself")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if r, err := c.Run(ctx, "echo", "hello", nil); err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("Run served by another client: %+v, %v", r, err)
	}
	if out, err := heph.ExecuteWorkflow(ctx, c, echoWorkflow, "hello", nil); err != nil || out != "hello" {
		t.Fatalf("ExecuteWorkflow served by another client: %q, %v", out, err)
	}
}
