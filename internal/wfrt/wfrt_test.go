package wfrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	greet = workflow.NewActivity("greet", func(ctx context.Context, name string) (string, error) { return "hello " + name, nil })
	// greeter waits for a name by signal, publishes it, greets through an
	// activity and returns the greeting.
	greeter = workflow.New("greeter", func(ctx workflow.Context, prefix string) (string, error) {
		name, err := workflow.WaitSignal[string](ctx, "name")
		if err != nil {
			return "", err
		}
		workflow.Publish(ctx, name)
		g, err := greet.Execute(ctx, prefix+name)
		return g, err
	})
)

// rig is a workflow runtime on a real SQLite store, with a committer and
// a worker pool that routes the workflow task kinds to it.
func rig(t *testing.T) (*wfrt.Runtime, *commit.Committer, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	var rt *wfrt.Runtime
	var pool *worker.Pool
	handlers := func() []string { return rt.Handlers() }
	cm := commit.New(&commit.Config{Store: st, WorkerID: "w1", LeaseDuration: time.Minute, Handlers: handlers,
		AfterCommit: func(b []*commit.Request, c map[int64]bool, now time.Time) { pool.AfterCommit(b, c, now) }})
	rt = wfrt.New(&wfrt.Config{Store: st, Committer: cm, WorkerID: "w1", Release: func(ts []*store.Task) { pool.Release(ts) },
		CancelRun: func(ctx context.Context, id, reason string) error { return errors.New("not used") }})
	exec := worker.Kinds{}
	for _, k := range wfrt.Kinds {
		exec[k] = rt
	}
	pool = worker.New(&worker.Config{Store: st, Committer: cm, Executor: exec, Handlers: handlers,
		Queues: map[string]int{"default": 4}, ClaimBatch: 4, LeaseDuration: time.Minute, HeartbeatInterval: 20 * time.Second,
		MinPollInterval: 10 * time.Millisecond, PollInterval: 100 * time.Millisecond, ShutdownTimeout: time.Second})
	if err := rt.RegisterWorkflow(greeter.Name(), wfdef.Of(greeter), greeter); err != nil {
		t.Fatal(err)
	}
	if err := rt.RegisterActivity(greet); err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Stop(ctx)
		cm.Close()
		rt.Close()
		_ = st.Close()
	})
	return rt, cm, st
}

// A workflow started through the runtime receives a signal, publishes
// state that a query reads, runs an activity on the pool and completes;
// the signal is recorded once.
func TestSignalQueryActivityResult(t *testing.T) {
	rt, _, st := rig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rt.StartWorkflow(ctx, "missing", nil, nil); !errors.Is(err, wfrt.ErrWorkflowNotFound) {
		t.Fatalf("start of an unregistered workflow: %v, want ErrWorkflowNotFound", err)
	}
	if _, err := rt.StartWorkflow(ctx, "greeter", json.RawMessage("{"), nil); !errors.Is(err, limits.ErrInvalidInput) {
		t.Fatalf("start with input that is not JSON: %v, want ErrInvalidInput", err)
	}
	run, err := rt.StartWorkflow(ctx, "greeter", "dear ", &wfrt.StartOptions{ID: "g-1"})
	if err != nil {
		t.Fatal(err)
	}
	if q, err := rt.QueryWorkflow(ctx, run.ID); err != nil || string(q) != "null" {
		t.Fatalf("query before publishing: %s %v, want null", q, err)
	}
	if err := rt.SignalWorkflow(ctx, run.ID, "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	done, err := rt.Result(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != hephtype.StatusCompleted || string(done.Output) != `"hello dear Ada"` {
		t.Fatalf("run ended %s with %s (%s), want completed with the greeting", done.Status, done.Output, done.Error)
	}
	if q, err := rt.QueryWorkflow(ctx, run.ID); err != nil || string(q) != `"Ada"` {
		t.Fatalf("query: %s %v, want the published name", q, err)
	}
	found, err := rt.FindWorkflow(ctx, "greeter", "g-1")
	if err != nil || found.ID != run.ID {
		t.Fatalf("find by workflow id: %v %v, want run %s", found, err, run.ID)
	}
	h, err := st.History(ctx, &store.HistoryParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	signals := 0
	for _, e := range h {
		if e.Kind == hephtype.EventSignalReceived {
			signals++
		}
	}
	if signals != 1 {
		t.Fatalf("history has %d signal_received, want 1", signals)
	}
	if err := rt.SignalWorkflow(ctx, run.ID, "name", "late"); !errors.Is(err, engine.ErrRunFinished) {
		t.Fatalf("signal to a finished run: %v, want ErrRunFinished", err)
	}
}

// CancelUpdate cancels an active workflow run and refuses a finished one.
func TestCancelUpdate(t *testing.T) {
	active := &store.Run{ID: "r", Kind: hephtype.KindWorkflow, Workflow: "greeter", Status: hephtype.StatusRunning, State: json.RawMessage(`{"queue":"q"}`)}
	u, err := wfrt.CancelUpdate(active, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if u.Status != hephtype.StatusCancelled || u.Error != "stop" || len(u.Tasks) != 1 || u.Tasks[0].Queue != "q" || u.Tasks[0].Kind != store.TaskWorkflowOp {
		t.Fatalf("cancel update %+v: want cancelled, with one operation task (cancel children) on the run's queue", u)
	}
	finished := *active
	finished.Status = hephtype.StatusCompleted
	if _, err := wfrt.CancelUpdate(&finished, "stop"); !errors.Is(err, engine.ErrRunFinished) {
		t.Fatalf("cancel of a completed run: %v, want ErrRunFinished", err)
	}
}
