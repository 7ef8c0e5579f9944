package e2e

// A rolling deploy of code-first workflows (docs/deploying.md#rolling-deploys-of-workflows):
// build b1 of a workflow has runs in flight when build b2, with changed
// code, is deployed beside it; new runs go to b2, b1's runs finish on b1,
// b1 drains, stops and is retired; a workflow that auto-upgrades, its
// change guarded by a patch, moves its runs to b2 when b1 stops.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	deployA = workflow.NewActivity("deploy.a", func(_ context.Context, n int) (string, error) { return fmt.Sprintf("a%d", n), nil })
	deployB = workflow.NewActivity("deploy.b", func(_ context.Context, s string) (string, error) { return s + "+b", nil })
	deployC = workflow.NewActivity("deploy.c", func(_ context.Context, n int) (string, error) { return fmt.Sprintf("c%d", n), nil })
)

// deployV1 and deployV2 are two builds of workflow "deploy": v2 runs
// another activity first, so that v2's code replaying a history of v1's
// fails with a non-determinism error.
func deployV1() *workflow.Definition[int, string] {
	return workflow.New("deploy", func(ctx workflow.Context, n int) (string, error) {
		a, err := deployA.Execute(ctx, n)
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
			return "", err
		}
		b, err := deployB.Execute(ctx, a)
		return "v1:" + b, err
	})
}

func deployV2() *workflow.Definition[int, string] {
	return workflow.New("deploy", func(ctx workflow.Context, n int) (string, error) {
		c, err := deployC.Execute(ctx, n)
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
			return "", err
		}
		b, err := deployB.Execute(ctx, c)
		return "v2:" + b, err
	})
}

// leafV1 and leafV2 are two builds of a child workflow, and chain (the
// same code in both builds) waits for a signal, then runs a leaf child
// and continues as new until n is 0: the child and the continued runs
// pin to the build that decided them, so a chain started on b1 returns
// b1's leaf's answer.
func leafV1() *workflow.Definition[int, string] {
	return workflow.New("leaf", func(workflow.Context, int) (string, error) { return "v1", nil })
}

func leafV2() *workflow.Definition[int, string] {
	return workflow.New("leaf", func(workflow.Context, int) (string, error) { return "v2", nil })
}

func chain(leaf *workflow.Definition[int, string]) *workflow.Definition[int, string] {
	return workflow.New("chain", func(ctx workflow.Context, n int) (string, error) {
		if n == 2 {
			if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
				return "", err
			}
		}
		out, err := leaf.ExecuteChild(ctx, n)
		if err != nil {
			return "", err
		}
		if n > 0 {
			return "", workflow.ContinueAsNew(ctx, n-1)
		}
		return "chain-" + out, nil
	})
}

// upgradeV1 and upgradeV2 are two builds of an auto-upgrading workflow:
// v2 adds an activity after the signal, guarded by a patch.
func upgradeV1() *workflow.Definition[int, string] {
	return workflow.New("upgrade", func(ctx workflow.Context, n int) (string, error) {
		a, err := deployA.Execute(ctx, n)
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
			return "", err
		}
		b, err := deployB.Execute(ctx, a)
		return "v1:" + b, err
	}).Versioning(workflow.AutoUpgrade)
}

func upgradeV2() *workflow.Definition[int, string] {
	return workflow.New("upgrade", func(ctx workflow.Context, n int) (string, error) {
		a, err := deployA.Execute(ctx, n)
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
			return "", err
		}
		if workflow.Patched(ctx, "add-c") {
			c, err := deployC.Execute(ctx, n)
			if err != nil {
				return "", err
			}
			a += "+" + c
		}
		b, err := deployB.Execute(ctx, a)
		return "v2:" + b, err
	}).Versioning(workflow.AutoUpgrade)
}

// failedDecisions counts the decisions that failed (a non-determinism
// error, say), as the runtime logs them.
type failedDecisions struct{ n atomic.Int64 }

func (f *failedDecisions) Enabled(context.Context, slog.Level) bool { return true }
func (f *failedDecisions) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "decision failed") || strings.Contains(r.Message, "decision keeps") {
		f.n.Add(1)
	}
	return nil
}
func (f *failedDecisions) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f *failedDecisions) WithGroup(string) slog.Handler      { return f }

// RunRollingDeploy runs the rolling deploy on b with n runs in flight.
func RunRollingDeploy(t *testing.T, b Backend, n int) {
	st, reopen := b.New(t)
	failed := &failedDecisions{}
	build := func(st store.Store, id string, ws ...heph.Workflow) *heph.Client {
		t.Helper()
		c := startClient(t, st, func(cfg *heph.Config) {
			cfg.BuildID, cfg.Logger, cfg.Queues = id, slog.New(failed), map[string]int{"default": 16}
		})
		if err := c.RegisterWorkflows(ws...); err != nil {
			t.Fatal(err)
		}
		if err := c.RegisterActivities(deployA, deployB, deployC); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := ctxT(t)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()

	b1 := build(st, "b1", deployV1(), upgradeV1(), leafV1(), chain(leafV1()))
	old := startMany(t, ctx, b1, "deploy", n, nil)
	chains := startMany(t, ctx, b1, "chain", 10, func(int) int { return 2 })
	upgrading := startMany(t, ctx, b1, "upgrade", 10, nil)
	for _, r := range append(append(old, chains...), upgrading...) {
		if r.BuildID != "b1" {
			t.Fatalf("run %s of %s started on b1 records build %q", r.ID, r.Flow, r.BuildID)
		}
	}

	// Build b2 deploys beside b1, and a process without the workflows
	// (a server, say) starts runs too: they pin to the newest live build.
	b2 := build(reopen(t), "b2", deployV2(), upgradeV2(), leafV2(), chain(leafV2()))
	front, err := heph.New(&heph.Config{Store: reopen(t), Queues: map[string]int{"default": 0}, BuildID: "front", Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(front) })
	// The worker records are written by the clients' maintenance loops,
	// after Start: wait for both.
	waitBuilds(t, ctx, front, "deploy", func(bs []heph.WorkflowBuild) bool {
		return len(bs) == 2 && bs[0].BuildID == "b2" && bs[0].Newest && bs[1].BuildID == "b1" && bs[1].LiveWorkers == 1
	})
	fresh := append(startMany(t, ctx, b2, "deploy", 10, nil), startMany(t, ctx, front, "deploy", 10, nil)...)
	for _, r := range fresh {
		if r.BuildID != "b2" {
			t.Fatalf("run %s started after b2 was deployed records build %q, want b2", r.ID, r.BuildID)
		}
	}

	// b1 drains: it cannot be retired while its runs are open.
	err = front.RetireBuild(ctx, "deploy", "b1")
	var inUse *heph.BuildInUseError
	if !errors.As(err, &inUse) || inUse.OpenRuns != n {
		t.Fatalf("RetireBuild(b1) with %d runs in flight: %v, want a BuildInUseError counting them", n, err)
	}
	bs, err := front.WorkflowBuilds(ctx, "deploy")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[{b2 20 1 true false} {b1 %d 1 false true}]", n)
	if got := fmtBuilds(bs); got != want {
		t.Fatalf("builds while b1 drains: %s, want %s", got, want)
	}

	// The signals come from the front process; every run finishes on the
	// build that started it.
	finish(t, ctx, front, old, "v1:", "b1")
	finish(t, ctx, front, chains, "chain-v1", "b1")
	finish(t, ctx, front, fresh, "v2:", "b2")
	if bs, err = front.WorkflowBuilds(ctx, "deploy"); err != nil {
		t.Fatal(err)
	}
	if got := fmtBuilds(bs); got != "[{b2 0 1 true false} {b1 0 1 false false}]" {
		t.Fatalf("builds after b1 drained: %s", got)
	}

	// b1 stops and is retired; the runs that auto-upgrade move to b2 at
	// their next decision, through the patch.
	stopClient(b1)
	if err := front.RetireBuild(ctx, "deploy", "b1"); err != nil {
		t.Fatalf("RetireBuild(b1) once drained and stopped: %v", err)
	}
	if bs, err = front.WorkflowBuilds(ctx, "deploy"); err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[1].BuildID != "b1" || bs[1].RetiredAt.IsZero() || bs[1].LiveWorkers != 0 {
		t.Fatalf("builds after b1 retired: %+v", bs)
	}
	finish(t, ctx, front, upgrading, "v2:", "b2")
	for _, r := range upgrading {
		got, err := front.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("\"v2:a%s+c%s+b\"", r.Input, r.Input); string(got.Output) != want {
			t.Fatalf("auto-upgraded run %s: output %s, want %s (the patched branch)", r.ID, got.Output, want)
		}
	}
	if k := failed.n.Load(); k != 0 {
		t.Fatalf("%d decisions failed during the deploy, want none", k)
	}
}

func fmtBuilds(bs []heph.WorkflowBuild) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("{%s %d %d %v %v}", b.BuildID, b.OpenRuns, b.LiveWorkers, b.Newest, b.Draining)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// startMany starts n runs of a workflow, 8 at a time; run i has input
// in(i), or i when in is nil.
func startMany(t *testing.T, ctx context.Context, c *heph.Client, name string, n int, in func(int) int) []*heph.Run {
	if in == nil {
		in = func(i int) int { return i }
	}
	t.Helper()
	out := make([]*heph.Run, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = c.StartWorkflow(ctx, name, in(i), nil)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return out
}

// finish signals "go" to the runs and waits for each to complete with an
// output that starts with prefix, recording build.
func finish(t *testing.T, ctx context.Context, c *heph.Client, runs []*heph.Run, prefix, build string) {
	t.Helper()
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, r := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := c.SignalWorkflow(ctx, r.ID, "go", "now"); err != nil {
				errs[i] = err
				return
			}
			got, err := c.WorkflowResult(ctx, r.ID)
			switch {
			case err != nil:
				errs[i] = err
			case got.Status != heph.StatusCompleted || !strings.HasPrefix(string(got.Output), `"`+prefix):
				errs[i] = fmt.Errorf("run %s of %s: %s %s %s, want completed with %s…", r.ID, r.Flow, got.Status, got.Output, got.Error, prefix)
			case got.BuildID != build:
				errs[i] = fmt.Errorf("run %s of %s records build %q, want %q", r.ID, r.Flow, got.BuildID, build)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// waitBuilds polls the builds of a workflow until ok holds.
func waitBuilds(t *testing.T, ctx context.Context, c *heph.Client, name string, ok func([]heph.WorkflowBuild) bool) {
	t.Helper()
	for {
		bs, err := c.WorkflowBuilds(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if ok(bs) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("builds of %s: %s", name, fmtBuilds(bs))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
