package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/workflow"
)

const (
	catalogEnvDSN   = "HEPH_CATALOG_CHILD_DSN"
	catalogEnvChild = "HEPH_CATALOG_CHILD"
	// catalogLease is the lease of every process: the registry marks a
	// run unserved after it, and a stopped worker stops counting.
	catalogLease = 2 * time.Second
)

type catalogIn struct {
	Item string `json:"item" jsonschema:"required"`
}

var (
	catalogF = func() *flow.Flow {
		// On a queue the server does not work: it marks the flow's runs
		// unserved from the catalog's queues.
		b := flow.New("cat.f").Defaults(flow.Queue("cat"))
		flow.Input[catalogIn](b)
		flow.Step(b, "a", func(ctx context.Context, in catalogIn) (string, error) { return "a-" + in.Item, nil })
		flow.Step(b, "b", func(ctx context.Context, in json.RawMessage) (string, error) { return "b", nil }, flow.DependsOn("a"))
		return b.MustBuild()
	}()
	catalogJ        = job.MustNew("cat.j", func(ctx context.Context, j *job.Job[catalogIn]) error { return nil }, &job.Options[catalogIn]{MaxAttempts: 2})
	catalogActivity = workflow.NewActivity("cat.upper", func(ctx context.Context, in string) (string, error) { return strings.ToUpper(in), nil })
	catalogW        = workflow.New("cat.w", func(ctx workflow.Context, in catalogIn) (string, error) { return catalogActivity.Execute(ctx, in.Item) })
)

// catalogChild is a worker process of TestCatalogProcesses: A has flow F
// and job kind J, B has workflow W. It says "ready" once started and
// stops when its stdin closes.
func catalogChild(dsn, which string) error {
	ctx := context.Background()
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, MaxConns: 4})
	if err != nil {
		return err
	}
	defer st.Close()
	queues := map[string]int{"default": 4}
	if which == "A" {
		queues["cat"] = 4 // B does not work it: nobody does while A is away
	}
	c, err := heph.New(&heph.Config{
		Store: st, Queues: queues, WorkerID: "catalog-" + which, BuildID: "build-" + which,
		LeaseDuration: catalogLease, MinPollInterval: 20 * time.Millisecond, PollInterval: 200 * time.Millisecond,
		Logger: e2e.QuietLogger(),
	})
	if err != nil {
		return err
	}
	switch which {
	case "A":
		if err := c.Register(catalogF); err != nil {
			return err
		}
		if err := c.RegisterJobs(catalogJ); err != nil {
			return err
		}
	case "B":
		if err := c.RegisterWorkflows(catalogW); err != nil {
			return err
		}
		if err := c.RegisterActivities(catalogActivity); err != nil {
			return err
		}
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return c.Stop(ctx)
}

// startCatalogChild starts worker process which and waits for it to be
// ready; closing the returned writer stops it.
func startCatalogChild(t *testing.T, dsn, which string) (stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), catalogEnvDSN+"="+dsn, catalogEnvChild+"="+which)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		_ = cmd.Process.Kill()
		t.Fatalf("worker %s did not start: %q %v", which, sc.Text(), cmd.Wait())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %s: %v", which, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestCatalogProcesses: a server with no Go code, worker A with flow F
// and job kind J, worker B with workflow W, on one PostgreSQL database.
// Through the server's HTTP API (the CLI's client) F, J and W start and
// complete, and a schedule of F every second never fails a tick; with A
// stopped new F runs wait as unserved, and complete when A is back.
func TestCatalogProcesses(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stopA := startCatalogChild(t, dsn, "A")
	startCatalogChild(t, dsn, "B")

	bare, err := heph.New(&heph.Config{Store: st, Logger: e2e.QuietLogger(), LeaseDuration: catalogLease, Queues: map[string]int{"default": 1},
		MinPollInterval: 20 * time.Millisecond, PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bare.Stop(context.Background()) }()
	srv, err := server.New(&server.Config{Client: bare, Store: st, Insecure: true, Logger: e2e.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	api, err := apiclient.New(&apiclient.Config{Addr: hs.URL})
	if err != nil {
		t.Fatal(err)
	}

	defs, _, err := api.Definitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Kind+":"+d.Name)
	}
	if got := strings.Join(names, " "); got != "flow:cat.f job:cat.j workflow:cat.w" {
		t.Fatalf("definitions of the server without code: %s", got)
	}
	start := func(kind, name string, input string) string {
		t.Helper()
		r, _, _, err := api.StartRun(ctx, &apiclient.StartRequest{Kind: kind, Name: name, Input: json.RawMessage(input)}, "")
		if err != nil {
			t.Fatalf("start %s %s: %v", kind, name, err)
		}
		return r.ID
	}
	wait := func(id string) *apiclient.Run {
		t.Helper()
		for {
			r, done, _, err := api.Result(ctx, id, 30*time.Second)
			if err != nil {
				t.Fatalf("result of %s: %v", id, err)
			}
			if done {
				return r
			}
		}
	}
	if _, _, _, err := api.StartRun(ctx, &apiclient.StartRequest{Kind: "flow", Name: "cat.f", Input: json.RawMessage(`{"item":5}`)}, ""); err == nil || !strings.Contains(err.Error(), "/item") {
		t.Fatalf("a bad input: %v; want a 400 naming /item", err)
	}
	for _, id := range []string{start("flow", "cat.f", `{"item":"x"}`), start("job", "cat.j", `{"item":"y"}`), start("workflow", "cat.w", `{"item":"z"}`)} {
		if r := wait(id); r.Status != "completed" {
			t.Fatalf("run %s: %s %s", id, r.Status, r.Error)
		}
	}
	if _, _, err := api.CreateSchedule(ctx, json.RawMessage(`{"id":"cat-every-second","target_kind":"flow","target_name":"cat.f","every":"1s","input":{"item":"tick"}}`)); err != nil {
		t.Fatal(err)
	}
	ticks := func(min int) []apiclient.ScheduleRun {
		t.Helper()
		for {
			rs, _, err := api.ScheduleRuns(ctx, "cat-every-second", 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) >= min {
				return rs
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d ticks, want %d", len(rs), min)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for _, tk := range ticks(3) {
		if tk.Outcome == "failed" {
			t.Fatalf("a tick failed: %+v", tk)
		}
		if tk.RunID != "" {
			if r := wait(tk.RunID); r.Status != "completed" {
				t.Fatalf("scheduled run %s: %s", tk.RunID, r.Status)
			}
		}
	}
	// Without A, a new run of F waits, marked unserved.
	stopA()
	id := start("flow", "cat.f", `{"item":"later"}`)
	for {
		r, _, err := api.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Condition != nil && r.Condition.Kind == hephtype.ConditionUnserved {
			break
		}
		if r.Status == "completed" {
			t.Fatal("a run of F completed with A stopped")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s never marked unserved: %+v", id, r)
		case <-time.After(200 * time.Millisecond):
		}
	}
	startCatalogChild(t, dsn, "A")
	if r := wait(id); r.Status != "completed" {
		t.Fatalf("run %s after A came back: %s", id, r.Status)
	}
	for _, tk := range ticks(1) {
		if tk.Outcome == "failed" {
			t.Fatalf("a tick failed: %+v", tk)
		}
	}
}
