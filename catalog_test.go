package hephaestus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

type catalogOrder struct {
	ID     string `json:"id" jsonschema:"required"`
	Amount int    `json:"amount"`
}

func catalogFlow(version int, extra bool) *flow.Flow {
	b := flow.New("cat.order").Version(version).Tags("shop")
	flow.Input[catalogOrder](b)
	flow.Step(b, "check", func(ctx context.Context, o catalogOrder) (int, error) { return o.Amount * 2, nil })
	flow.Step(b, "ship", func(ctx context.Context, in json.RawMessage) (string, error) { return "shipped", nil }, flow.DependsOn("check"), flow.Queue("ship"))
	if extra {
		flow.Step(b, "bill", func(ctx context.Context, in any) (any, error) { return nil, nil }, flow.DependsOn("ship"))
	}
	return b.MustBuild()
}

var (
	catalogJob      = job.MustNew("cat.email", func(ctx context.Context, j *job.Job[catalogOrder]) error { return nil }, &job.Options[catalogOrder]{MaxAttempts: 4, Unique: &job.Unique{ByArgs: true, Period: 100 * 365 * 24 * time.Hour}})
	catalogWorkflow = workflow.New("cat.saga", func(ctx workflow.Context, in catalogOrder) (string, error) { return "saga " + in.ID, nil })
)

// A client with no code lists, starts, inserts and shows what another
// client published to the catalog: the worker of that client runs it.
func TestCatalogAnyProcessStartsAnything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "h.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	worker, err := heph.New(&heph.Config{Store: st, PollInterval: 20 * time.Millisecond, BuildID: "build-a", Queues: map[string]int{"default": 2, "ship": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = worker.Stop(context.Background()) }()
	if err := worker.Register(catalogFlow(1, false)); err != nil {
		t.Fatal(err)
	}
	if err := worker.RegisterJobs(catalogJob); err != nil {
		t.Fatal(err)
	}
	if err := worker.RegisterWorkflows(catalogWorkflow); err != nil {
		t.Fatal(err)
	}
	// Nothing is published before Start.
	empty, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = empty.Stop(context.Background()) }()
	if ds, err := empty.Definitions(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("definitions before Start: %+v, %v", ds, err)
	}
	start := time.Now()
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Start with publishing took %s", time.Since(start))

	ds, err := empty.Definitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Kind+" "+d.Name)
		if d.Local || len(d.Published) != 1 || d.Builds[0] != "build-a" {
			t.Errorf("%s %s: local %v, published %d, builds %v", d.Kind, d.Name, d.Local, len(d.Published), d.Builds)
		}
	}
	if want := []string{"flow cat.order", "job cat.email", "workflow cat.saga"}; !slices.Equal(got, want) {
		t.Fatalf("definitions of a client without code: %v, want %v", got, want)
	}
	if ds[0].Latest != 1 || !strings.Contains(string(ds[0].Published[0].InputSchema), `"amount"`) || !slices.Equal(ds[0].Published[0].Queues, []string{"default", "ship"}) {
		t.Fatalf("flow definition: %+v", ds[0])
	}
	d, err := empty.Definition(ctx, "job", "cat.email")
	if err != nil || !strings.Contains(string(d.Published[0].Spec), `"max_attempts":4`) || !strings.Contains(string(d.Published[0].Spec), `"ByArgs":true`) {
		t.Fatalf("job definition: %+v, %v", d, err)
	}
	if _, err := empty.Definition(ctx, "", "nope"); !errors.Is(err, heph.ErrFlowNotFound) {
		t.Fatalf("unknown definition: %v", err)
	}

	// Starts from the stub, checked against the published schema.
	if _, err := empty.StartRun(ctx, "cat.order", map[string]any{"id": "o1", "amount": "many"}, nil); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `"/amount"`) {
		t.Fatalf("start with a bad field: %v; want ErrInvalidInput naming /amount", err)
	}
	if _, err := empty.StartRun(ctx, "cat.order", map[string]any{"amount": 1}, nil); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "id") {
		t.Fatalf("start without a required field: %v", err)
	}
	r, err := empty.StartRun(ctx, "cat.order", catalogOrder{ID: "o1", Amount: 21}, nil)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := empty.GetRun(ctx, r.ID)
	if err != nil || len(shown.Steps) != 2 || shown.Steps[0].Name != "check" || shown.Steps[1].Name != "ship" || !slices.Contains(shown.Tags, "shop") {
		t.Fatalf("run shown by the client without code: %+v, %v", shown, err)
	}
	if g, err := empty.Flow(ctx, "cat.order", 0); err != nil || g.Shape() != catalogFlow(1, false).Shape() {
		t.Fatalf("graph of a catalog flow: %v", err)
	}
	done, err := empty.WaitRun(ctx, r.ID)
	if err != nil || done.Status != hephtype.StatusCompleted {
		t.Fatalf("run of the stub: %+v, %v", done, err)
	}

	// Jobs: the kind's options hold (unique by arguments).
	j1, err := empty.InsertJobJSON(ctx, "cat.email", json.RawMessage(`{"id":"j","amount":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	j2, err := empty.InsertJobJSON(ctx, "cat.email", json.RawMessage(`{"amount":1,"id":"j"}`), nil)
	if err != nil || !j2.Duplicate || j2.ID != j1.ID {
		t.Fatalf("second insert of equal arguments: %+v, %v; want a duplicate of %s", j2, err, j1.ID)
	}
	if _, err := empty.InsertJobJSON(ctx, "cat.email", json.RawMessage(`{"id":7}`), nil); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `"/id"`) {
		t.Fatalf("job with a bad field: %v", err)
	}
	if done, err := empty.WaitRun(ctx, j1.ID); err != nil || done.Status != hephtype.StatusCompleted {
		t.Fatalf("job: %+v, %v", done, err)
	}
	// Workflows by name.
	wr, err := empty.StartWorkflow(ctx, "cat.saga", catalogOrder{ID: "w"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done, err := empty.WaitRun(ctx, wr.ID); err != nil || string(done.Output) != `"saga w"` {
		t.Fatalf("workflow: %+v, %v", done, err)
	}
	// The stub never makes the client without code claim: it has no
	// handler of the flow.
	if ds, _ := empty.Definitions(ctx); !ds[0].Served || ds[0].Local {
		t.Fatalf("served/local: %+v", ds[0])
	}

	// A changed flow under the same version is refused at Start; a new
	// version is published beside it.
	changed, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"other": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = changed.Stop(context.Background()) }()
	if err := changed.Register(catalogFlow(1, true)); err != nil {
		t.Fatal(err)
	}
	if err := changed.Start(ctx); !errors.Is(err, heph.ErrFlowConflict) || !strings.Contains(err.Error(), "new version") {
		t.Fatalf("Start with a changed flow version: %v; want ErrFlowConflict", err)
	}
	// Registered after Start: published at once.
	if err := worker.Register(catalogFlow(2, true)); err != nil {
		t.Fatal(err)
	}
	d, err = empty.Definition(ctx, "flow", "cat.order")
	if err != nil || !slices.Equal(d.Versions, []int{1, 2}) || d.Latest != 2 {
		t.Fatalf("after registering version 2: %+v, %v", d, err)
	}

	// With no worker live, starts are accepted and wait; another client
	// without the code (and without the stub yet) cancels a run.
	if err := worker.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := empty.StartWorkflow(ctx, "cat.saga", catalogOrder{ID: "later"}, nil); err != nil {
		t.Fatalf("start a catalogued workflow with no live worker: %v", err)
	}
	waiting, err := empty.StartRun(ctx, "cat.order", catalogOrder{ID: "o2"}, &heph.StartOptions{Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = fresh.Stop(context.Background()) }()
	if err := fresh.CancelRun(ctx, waiting.ID, "no longer wanted"); err != nil {
		t.Fatalf("cancel from a client without the code: %v", err)
	}
	if r, err := fresh.GetRun(ctx, waiting.ID); err != nil || r.Status != hephtype.StatusCancelled || len(r.Steps) != 3 {
		t.Fatalf("cancelled run: %+v, %v", r, err)
	}
}

// BenchmarkPublishCatalog: what publishing adds to Client.Start, with 20
// flows, 5 job kinds and 5 workflows registered: the first publish
// (inserts) and the usual one (all stored already), on SQLite and
// PostgreSQL.
func BenchmarkPublishCatalog(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			var st store.Store
			var err error
			if backend == "sqlite" {
				st, err = sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(b.TempDir(), "h.db")})
			} else {
				st, err = postgres.Open(context.Background(), &postgres.Config{DSN: pgtest.DSN(b)})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			c, err := heph.New(&heph.Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = c.Stop(context.Background()) }()
			for i := range 20 {
				if err := c.Register(catalogFlow(i+1, i%2 == 0)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 5 {
				k := job.MustNew(fmt.Sprintf("bench.job%d", i), func(ctx context.Context, j *job.Job[catalogOrder]) error { return nil }, nil)
				w := workflow.New(fmt.Sprintf("bench.wf%d", i), func(ctx workflow.Context, in catalogOrder) (string, error) { return "", nil })
				if err := c.RegisterJobs(k); err != nil {
					b.Fatal(err)
				}
				if err := c.RegisterWorkflows(w); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			if err := heph.PublishCatalog(c); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds()), "first-µs")
			b.ResetTimer()
			for b.Loop() {
				if err := heph.PublishCatalog(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
