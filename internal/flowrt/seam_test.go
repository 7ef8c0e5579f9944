package flowrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// rig is a flow runtime on a real SQLite store, with a committer and a
// worker pool whose executor the test chooses.
type rig struct {
	st     store.Store
	commit *commit.Committer
	flows  *flowrt.Runtime
	pool   *worker.Pool
	hub    *telemetry.Hub
}

func newRig(t *testing.T, exec func(r *rig) worker.Executor, flows ...*flow.Flow) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{st: st, hub: telemetry.New(nil)}
	handlers := func() []string { return r.flows.Handlers() }
	r.commit = commit.New(&commit.Config{Store: st, Telemetry: r.hub, WorkerID: "w1", LeaseDuration: time.Minute, Handlers: handlers,
		AfterCommit: func(b []*commit.Request, c map[int64]bool, now time.Time) { r.pool.AfterCommit(b, c, now) }})
	r.flows = flowrt.New(&flowrt.Config{Store: st, Telemetry: r.hub, Committer: r.commit, WorkerID: "w1"})
	for _, f := range flows {
		if err := r.flows.Register(f); err != nil {
			t.Fatal(err)
		}
	}
	r.pool = worker.New(&worker.Config{Store: st, Telemetry: r.hub, Committer: r.commit, Executor: exec(r), Handlers: handlers,
		Queues: map[string]int{"default": 4}, ClaimBatch: 4, LeaseDuration: time.Minute, HeartbeatInterval: 20 * time.Second,
		MinPollInterval: 10 * time.Millisecond, PollInterval: 100 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	if err := r.pool.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Tasks still handed out are not waited for.
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		r.pool.Stop(stopped)
		r.commit.Close()
		_ = st.Close()
	})
	return r
}

// job is a task handed to the "remote" worker, and how it reports that
// it is done with it.
type job struct {
	held *worker.Held
	done chan error
}

// remoteExecutor hands each claimed task to another goroutine, the way the
// server will hand tasks to workers over HTTP, and waits until that
// goroutine completed it (or the lease went).
type remoteExecutor struct{ jobs chan job }

func (e *remoteExecutor) Execute(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
	j := job{held: h, done: make(chan error, 1)}
	select {
	case e.jobs <- j:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	select {
	case err := <-j.done:
		return nil, err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func twoSteps(t *testing.T) *flow.Flow {
	b := flow.New("remote")
	a := flow.Step(b, "a", func(ctx context.Context, in int) (int, error) { return 0, errors.New("must not run in process") })
	flow.Step(b, "b", func(ctx context.Context, in int) (int, error) { return 0, errors.New("must not run in process") },
		flow.DependsOn(a.Name()), flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	f, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func waitDone(t *testing.T, r *rig, runID string) *store.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := r.commit.WaitRun(ctx, runID, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("wait for run %s: %v", runID, err)
	}
	return run
}

func next(t *testing.T, jobs chan job) job {
	t.Helper()
	select {
	case j := <-jobs:
		return j
	case <-time.After(30 * time.Second):
		t.Fatal("no task reached the remote worker")
		return job{}
	}
}

// The task seam: tasks claimed by the pool are completed from outside it,
// by another goroutine holding only the task (with its lease token), as a
// remote worker will: claim → heartbeat (details) → fail → the retry
// carries the details → complete. A completion with a stale lease token
// is refused with ErrLeaseLost and writes nothing.
func TestRemoteExecutorCompletesThroughTheSeam(t *testing.T) {
	exec := &remoteExecutor{jobs: make(chan job)}
	r := newRig(t, func(*rig) worker.Executor { return exec }, twoSteps(t))
	run, err := r.flows.Start(context.Background(), "remote", 20, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stale []*store.Task

	// Step a: completed remotely with the output 21.
	j := next(t, exec.jobs)
	ta := j.held.Task()
	if ta.Step != "a" || ta.RunID != run.ID || ta.Owner != "w1" {
		t.Fatalf("first task: %+v, want step a of run %s leased to w1", ta, run.ID)
	}
	if _, err := r.flows.Complete(ta, &flowrt.Outcome{Output: json.RawMessage("21")}, ""); err != nil {
		t.Fatalf("remote completion of step a: %v", err)
	}
	stale = append(stale, ta)
	j.done <- nil

	// Step b, attempt 1: heartbeat details, then a retryable failure.
	j = next(t, exec.jobs)
	tb := j.held.Task()
	if tb.Step != "b" || tb.Attempt != 1 || string(tb.Payload) == "" {
		t.Fatalf("second task: %+v, want attempt 1 of step b", tb)
	}
	j.held.RecordDetails(json.RawMessage(`{"cursor":7}`))
	if _, err := r.flows.Complete(tb, &flowrt.Outcome{Err: "remote worker: disk full", Retryable: true, Details: j.held.Details()}, ""); err != nil {
		t.Fatalf("remote failure of step b: %v", err)
	}
	j.done <- nil

	// Step b, attempt 2 reads the details attempt 1 recorded, and completes.
	j = next(t, exec.jobs)
	tb2 := j.held.Task()
	if tb2.Step != "b" || tb2.Attempt != 2 || string(tb2.Details) != `{"cursor":7}` {
		t.Fatalf("retry of b: step %q attempt %d details %s, want attempt 2 with the recorded details", tb2.Step, tb2.Attempt, tb2.Details)
	}
	if _, err := r.flows.Complete(tb2, &flowrt.Outcome{Output: json.RawMessage("42")}, ""); err != nil {
		t.Fatalf("remote completion of step b: %v", err)
	}
	stale = append(stale, tb, tb2)
	j.done <- nil

	done := waitDone(t, r, run.ID)
	if done.Status != hephtype.StatusCompleted || string(done.Output) == "" {
		t.Fatalf("run ended %s with output %s, want completed", done.Status, done.Output)
	}
	var out map[string]int
	if err := json.Unmarshal(done.Output, &out); err != nil || out["b"] != 42 {
		t.Fatalf("run output %s, want b = 42 from the remote worker", done.Output)
	}

	// Fencing: every earlier lease is spent; completing again is refused
	// and the history does not change.
	before, err := r.st.History(context.Background(), &store.HistoryParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range stale {
		_, err := r.flows.Complete(old, &flowrt.Outcome{Output: json.RawMessage("99")}, "")
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("second completion of %s attempt %d: %v, want store.ErrLeaseLost", old.Step, old.Attempt, err)
		}
	}
	after, err := r.st.History(context.Background(), &store.HistoryParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("stale completions wrote %d history entries", len(after)-len(before))
	}
	var kinds []string
	for _, e := range after {
		if e.Kind == hephtype.EventStepStarted {
			var d worker.StartedData
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Worker != "w1" {
				t.Fatalf("step_started data %s, want worker w1", e.Data)
			}
		}
		kinds = append(kinds, string(e.Kind))
	}
	if n := countOf(kinds, string(hephtype.EventStepCompleted)); n != 2 {
		t.Fatalf("history %v has %d step_completed, want 2", kinds, n)
	}
}

// A completion must carry the task's current lease token: one with
// another token (a lease taken over since) is refused and writes nothing;
// the holder's completion then goes through.
func TestRemoteCompletionWithAnotherToken(t *testing.T) {
	exec := &remoteExecutor{jobs: make(chan job)}
	r := newRig(t, func(*rig) worker.Executor { return exec }, twoSteps(t))
	run, err := r.flows.Start(context.Background(), "remote", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := next(t, exec.jobs)
	ta := j.held.Task()
	forged := *ta
	forged.Token++
	if _, err := r.flows.Complete(&forged, &flowrt.Outcome{Output: json.RawMessage("5")}, ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("completion with token %d (lease is %d): %v, want store.ErrLeaseLost", forged.Token, ta.Token, err)
	}
	h, err := r.st.History(context.Background(), &store.HistoryParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if e.Kind == hephtype.EventStepCompleted {
			t.Fatalf("the refused completion wrote %+v", e)
		}
	}
	if _, err := r.flows.Complete(ta, &flowrt.Outcome{Output: json.RawMessage("5")}, ""); err != nil {
		t.Fatalf("completion by the holder: %v", err)
	}
	j.done <- nil
	j = next(t, exec.jobs) // step b follows
	if j.held.Task().Step != "b" {
		t.Fatalf("after a: %+v, want step b", j.held.Task())
	}
	j.done <- nil
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
