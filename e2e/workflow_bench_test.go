package e2e_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The code-first workflow benchmarks of docs/benchmarks.md, the same
// workloads as the flow benchmarks of bench_test.go:
//
//	(a) Throughput: 1,000 workflows of one activity, 50 concurrent callers
//	    each starting a workflow and waiting for its result in a loop:
//	    workflows/s.
//	(b) Latency: start-to-result of a one-activity workflow, 100 in a row.
//	(c) Chain: start-to-result of a workflow of 10 sequential activities.
//
// Run with -count 3 and take the median:
//
//	go test ./e2e -run '^$' -bench 'Workflows' -count 3

var (
	benchInc = workflow.NewActivity("inc", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	benchOne = workflow.New("bench_one", func(ctx workflow.Context, n int) (int, error) {
		return benchInc.Execute(ctx, n)
	})
	benchWait = workflow.New("bench_wait", func(ctx workflow.Context, n int) (int, error) {
		return workflow.WaitSignal[int](ctx, "go")
	})
	benchChain = workflow.New("bench_chain10", func(ctx workflow.Context, n int) (int, error) {
		for range 10 {
			var err error
			if n, err = benchInc.Execute(ctx, n); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
)

func benchWfClient(b *testing.B, open func(b *testing.B) store.Store) *heph.Client {
	st := open(b)
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 64}, Logger: e2e.QuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.RegisterWorkflows(benchOne, benchChain, benchWait); err != nil {
		b.Fatal(err)
	}
	if err := c.RegisterActivities(benchInc); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func BenchmarkWorkflowsSQLite(b *testing.B) {
	for _, mode := range []string{"FULL"} {
		b.Run(mode, func(b *testing.B) { runWorkflowBenchmarks(b, sqliteOpener(mode)) })
	}
}

func BenchmarkWorkflowsPostgres(b *testing.B) {
	runWorkflowBenchmarks(b, func(b *testing.B) store.Store {
		st, err := postgres.Open(context.Background(), &postgres.Config{DSN: pgtest.DSN(b)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func runWorkflowBenchmarks(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("a_throughput", func(b *testing.B) { benchWfThroughput(b, open) })
	b.Run("b_latency", func(b *testing.B) { benchWfLatency(b, open, benchOne, 100, 2) })
	b.Run("c_chain10", func(b *testing.B) { benchWfLatency(b, open, benchChain, 50, 11) })
	b.Run("w_waiting_memory", func(b *testing.B) { benchWfWaiting(b, open) })
}

// benchWfWaiting reports the heap the process keeps per waiting run: 5,000
// workflows that wait for a signal, each after its first decision.
func benchWfWaiting(b *testing.B, open func(b *testing.B) store.Store) {
	const n = 5000
	var st store.Store
	c := benchWfClient(b, func(b *testing.B) store.Store { st = open(b); return st })
	ctx := context.Background()
	// Every workflow has decided once when no task is left.
	idle := func() bool {
		_, any, err := st.NextReady(ctx, &store.NextReadyParams{Queues: []string{"default"}})
		if err != nil {
			b.Fatal(err)
		}
		return !any
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for b.Loop() {
		before := heap()
		for i := range n {
			if _, err := heph.StartWorkflow(ctx, c, benchWait, i, nil); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(5 * time.Minute)
		for !idle() {
			if time.Now().After(deadline) {
				b.Fatalf("%d workflows not all decided in 5 minutes", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		after := heap()
		b.ReportMetric(float64(int64(after)-int64(before))/n, "heap-B/waiting-run")
	}
}

func benchWfThroughput(b *testing.B, open func(b *testing.B) store.Store) {
	c := benchWfClient(b, open)
	ctx := context.Background()
	loadTest(b, "workflows/s", func(i int) error {
		out, err := heph.ExecuteWorkflow(ctx, c, benchOne, i, nil)
		if err == nil && out != i+1 {
			err = fmt.Errorf("workflow returned %d, want %d", out, i+1)
		}
		return err
	})
}

func benchWfLatency(b *testing.B, open func(b *testing.B) store.Store, def *workflow.Definition[int, int], n, want int) {
	c := benchWfClient(b, open)
	ctx := context.Background()
	latencyTest(b, n, func() error {
		out, err := heph.ExecuteWorkflow(ctx, c, def, 1, nil)
		if err == nil && out != want {
			err = fmt.Errorf("workflow returned %d, want %d", out, want)
		}
		return err
	})
}
