package cli_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// heph retry and reset-workflow of a code-first workflow run, on a server
// over a SQLite file: the server has not the workflow; a worker in this
// process does, and reissues what the copied history left open.
func TestResetWorkflowSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "heph.db")
	srv := startServer(t, []string{"HEPH_INSECURE=true"}, "--sqlite", db)
	testResetWorkflow(t, srv.client(t, ""), func() store.Store { return openSQLite(t, db) })
}

// The same on PostgreSQL.
func TestResetWorkflowPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	srv := startServer(t, []string{"HEPH_POSTGRES=" + dsn, "HEPH_SCHEMA=cliresetwf", "HEPH_INSECURE=true"})
	c := srv.client(t, "")
	c.ok("ls") // the server migrated the schema
	testResetWorkflow(t, c, func() store.Store { return openPostgres(t, dsn, "cliresetwf") })
}

// startChargeWorker runs "cli_charge_wf" (waits for the signal "go", then
// charges its payload with "cli_charge", which fails while broken).
func startChargeWorker(t *testing.T, st store.Store, broken *atomic.Bool) {
	t.Helper()
	charge := workflow.NewActivity("cli_charge", func(_ context.Context, n int) (int, error) {
		if broken.Load() {
			return 0, flow.NonRetryable(errors.New("card declined"))
		}
		return n * 10, nil
	})
	wf := workflow.New("cli_charge_wf", func(ctx workflow.Context, _ struct{}) (map[string]int, error) {
		n, err := workflow.WaitSignal[int](ctx, "go")
		if err != nil {
			return nil, err
		}
		total, err := charge.Execute(ctx, n)
		return map[string]int{"total": total}, err
	})
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 4}, WorkerID: "e2e-charge", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(c.RegisterWorkflows(wf), c.RegisterActivities(charge)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = c.Stop(ctx)
	})
}

type resetRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output struct {
		Total int `json:"total"`
	} `json:"output"`
	ResetFrom string `json:"reset_from"`
	ResetTo   string `json:"reset_to"`
}

func testResetWorkflow(t *testing.T, c *client, open func() store.Store) {
	broken := &atomic.Bool{}
	broken.Store(true)
	startChargeWorker(t, open(), broken)
	eventually(t, "the worker in heph workers", func() bool {
		var ws []struct {
			Handlers []string `json:"handlers"`
		}
		c.json(&ws, "workers")
		return slices.ContainsFunc(ws, func(w struct {
			Handlers []string `json:"handlers"`
		}) bool {
			return slices.Contains(w.Handlers, "workflow:cli_charge_wf")
		})
	})
	var r resetRun
	c.json(&r, "start", "cli_charge_wf", "--kind", "workflow", "--input", `{}`)
	waitStatus(c, r.ID, "waiting") // its first decision made: the signal comes after it
	c.ok("signal", r.ID, "go", "--payload", "4")
	waitStatus(c, r.ID, "failed")
	c.fails(exitUsage, "accepts 1 arg(s)", "reset-workflow")
	c.fails(exitFailure, "point", "reset-workflow", r.ID, "--point", "later")

	broken.Store(false)
	out := c.ok("retry", r.ID)
	m := regexp.MustCompile(`^run ` + regexp.QuoteMeta(r.ID) + ` retried: new run (\S+) \(\w+\)\n$`).FindStringSubmatch(out.stdout)
	if m == nil {
		t.Fatalf("heph retry of a failed workflow run:\n%s", out)
	}
	retried := m[1]
	waitStatus(c, retried, "completed")
	var shown resetRun
	c.json(&shown, "show", retried)
	if shown.Output.Total != 40 || shown.ResetFrom != r.ID {
		t.Fatalf("the retried run: %+v", shown)
	}
	c.json(&shown, "show", r.ID)
	if shown.ResetTo != retried || shown.Status != "failed" {
		t.Fatalf("the failed run: %+v", shown)
	}

	var reset resetRun
	c.json(&reset, "reset-workflow", retried, "--point", "first", "--reapply-signals", "--reason", "again")
	if reset.ResetFrom != retried || reset.ID == retried {
		t.Fatalf("reset-workflow -o json: %+v", reset)
	}
	lines(t, c.ok("reset-workflow", retried, "--point", "first", "--reapply-signals"),
		`^run `+regexp.QuoteMeta(retried)+` reset: new run `+regexp.QuoteMeta(reset.ID)+` \(\w+\)$`)
	waitStatus(c, reset.ID, "completed")
	var h struct {
		Events []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"events"`
	}
	c.json(&h, "history", reset.ID)
	var kinds []string
	for _, e := range h.Events {
		if e.Kind != "step_started" {
			kinds = append(kinds, e.Kind)
		}
	}
	want := []string{"run_started", "workflow_reset", "signal_received", "decision", "step_scheduled", "step_completed", "decision", "run_completed"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("history of the reset run: %v, want %v", kinds, want)
	}
}
