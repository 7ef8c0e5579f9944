package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
)

// RunRootAPI runs the tests of the client's calls that the HTTP API
// builds on: retrying a failed run, the run filters, run ids for
// idempotent starts, waiting for history, and inserting jobs by kind name.
func RunRootAPI(t *testing.T, b Backend) {
	runAll(t, b, []subtest{
		{"RetryChain", testRetryChain},
		{"RetryConcurrent", testRetryConcurrent},
		{"RetryRefused", testRetryRefused},
		{"RetryDocument", testRetryDocument},
		{"RetryJob", testRetryJob},
		{"ListFilters", testListFilters},
		{"StartWithRunID", testStartWithRunID},
		{"HistoryAfter", testHistoryAfter},
		{"InsertJobJSON", testInsertJobJSON},
		{"Delete", func(t *testing.T, b Backend) { runAll(t, b, deleteTests) }},
		{"Pause", func(t *testing.T, b Backend) { runAll(t, b, pauseTests) }},
		{"Reset", func(t *testing.T, b Backend) { runAll(t, b, resetTests) }},
		{"ResetWorkflow", func(t *testing.T, b Backend) { runAll(t, b, resetWfTests) }},
	})
}

// chainFlow is a -> b -> c; b fails for good while broken is set. calls
// counts each step's calls; c returns a's output with its own.
func chainFlow(name string, broken *atomic.Bool, calls *[3]atomic.Int32) *flow.Flow {
	fb := flow.New(name)
	a := flow.Step(fb, "a", func(ctx context.Context, in any) (string, error) {
		return "A" + string(rune('0'+calls[0].Add(1))), nil
	})
	flow.Step(fb, "b", func(ctx context.Context, in any) (string, error) {
		calls[1].Add(1)
		if broken.Load() {
			return "", flow.NonRetryable(errors.New("b is broken"))
		}
		return "B", nil
	}, flow.DependsOn("a"), flow.Retry(fastRetry))
	flow.Step(fb, "c", func(ctx context.Context, in any) (string, error) {
		calls[2].Add(1)
		av, err := a.Output(ctx)
		return av + "+C", err
	}, flow.DependsOn("b"))
	return fb.MustBuild()
}

func testRetryChain(t *testing.T, b Backend) {
	var broken atomic.Bool
	var calls [3]atomic.Int32
	broken.Store(true)
	e := newEnv(t, b, nil, chainFlow("chain", &broken, &calls))
	ctx := ctxT(t)
	r := e.run("chain", nil, nil)
	wantStatus(t, r, heph.StatusFailed)
	if st, _ := r.Step("c"); st.Status != hephtype.StepPending {
		t.Errorf("c is %s after b failed, want pending", st.Status)
	}

	broken.Store(false)
	rr, err := e.c.RetryRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status.Terminal() || rr.Error != "" || !rr.FinishedAt.IsZero() {
		t.Errorf("retried run: status %s, error %q, finished %v; want active, no error, not finished", rr.Status, rr.Error, rr.FinishedAt)
	}
	done, err := e.c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"c":"A1+C"}`) // a's output of its only run
	if a, b, c := calls[0].Load(), calls[1].Load(), calls[2].Load(); a != 1 || b != 2 || c != 1 {
		t.Errorf("calls a=%d b=%d c=%d, want 1, 2, 1", a, b, c)
	}
	if st, _ := done.Step("b"); st.Attempt != 2 {
		t.Errorf("b's attempt %d, want 2 (attempts go on counting)", st.Attempt)
	}
	if done.Error != "" || done.FinishedAt.IsZero() {
		t.Errorf("completed run: error %q, finished %v", done.Error, done.FinishedAt)
	}
	h := e.history(r.ID)
	if count(h, hephtype.EventRunFailed, "") != 1 || count(h, hephtype.EventRunRetried, "") != 1 || count(h, hephtype.EventStepCompleted, "a") != 1 {
		t.Errorf("history: %d run_failed, %d run_retried, %d completions of a; want 1 each",
			count(h, hephtype.EventRunFailed, ""), count(h, hephtype.EventRunRetried, ""), count(h, hephtype.EventStepCompleted, "a"))
	}
	if _, err := e.c.RetryRun(ctx, r.ID); !errors.Is(err, heph.ErrNotRetryable) || !strings.Contains(err.Error(), "is completed, only a failed run can be retried") {
		t.Errorf("retry of a completed run: %v, want ErrNotRetryable saying why", err)
	}
	if _, err := e.c.RetryRun(ctx, "no-such-run"); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("retry of an unknown run: %v, want ErrRunNotFound", err)
	}
}

// Two retries of one failure at once: one applies, the other is refused,
// and b runs once more.
func testRetryConcurrent(t *testing.T, b Backend) {
	var broken atomic.Bool
	var calls [3]atomic.Int32
	broken.Store(true)
	e := newEnv(t, b, nil, chainFlow("chain", &broken, &calls))
	ctx := ctxT(t)
	r := e.run("chain", nil, nil)
	wantStatus(t, r, heph.StatusFailed)
	broken.Store(false)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = e.c.RetryRun(ctx, r.ID) })
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, heph.ErrNotRetryable):
			refused++
		default:
			t.Errorf("retry: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("concurrent retries: %d applied, %d refused (%v); want one of each", ok, refused, errs)
	}
	done, err := e.c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, heph.StatusCompleted)
	if n := calls[1].Load(); n != 2 {
		t.Errorf("b ran %d times, want 2 (one new attempt)", n)
	}
	if n := count(e.history(r.ID), hephtype.EventRunRetried, ""); n != 1 {
		t.Errorf("%d run_retried entries, want 1", n)
	}
}

// What RetryRun refuses: a run that is not failed, a workflow run, a run
// whose business id another run holds since it failed.
func testRetryRefused(t *testing.T, b Backend) {
	var broken atomic.Bool
	broken.Store(true)
	fb := flow.New("keyed").BusinessKey("order", flow.ScopeActive)
	flow.EventStep(fb, "work", func(ctx context.Context, in any) (flow.Result[string], error) {
		if broken.Load() {
			return flow.Result[string]{}, flow.NonRetryable(errors.New("broken"))
		}
		return flow.Wait[string](), nil
	}, flow.Waits(0))
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, st, nil, wfs(Counter))
	if err := e.c.Register(fb.MustBuild()); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	key := &heph.StartOptions{BusinessValue: "42"}

	wf, err := e.c.StartWorkflow(ctx, "counter", struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.RetryRun(ctx, wf.ID); !errors.Is(err, heph.ErrNotRetryable) || !strings.Contains(err.Error(), "only a failed run can be retried") {
		t.Errorf("retry of an active workflow run: %v, want ErrNotRetryable saying only a failed run is retried", err)
	}

	first := e.run("keyed", nil, key)
	wantStatus(t, first, heph.StatusFailed)
	broken.Store(false)
	second, err := e.c.StartRun(ctx, "keyed", nil, key)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(second.ID, heph.StatusWaiting)
	if _, err := e.c.RetryRun(ctx, second.ID); !errors.Is(err, heph.ErrNotRetryable) || !strings.Contains(err.Error(), "is waiting") {
		t.Errorf("retry of a waiting run: %v, want ErrNotRetryable", err)
	}
	var de *store.DuplicateRunError
	if _, err := e.c.RetryRun(ctx, first.ID); !errors.Is(err, heph.ErrDuplicateRun) || !errors.As(err, &de) || de.ExistingRunID != second.ID {
		t.Fatalf("retry while another run holds the business id: %v, want ErrDuplicateRun naming %s", err, second.ID)
	}
	if r, err := e.c.GetRun(ctx, first.ID); err != nil || r.Status != heph.StatusFailed {
		t.Fatalf("refused retry: %v, %v; want the run failed still", r, err)
	}
	if err := e.c.CancelRun(ctx, second.ID, "make way"); err != nil {
		t.Fatal(err)
	}
	// The id is free: the retry applies, and the run holds the id again.
	if _, err := e.c.RetryRun(ctx, first.ID); err != nil {
		t.Fatalf("retry once the id is free: %v", err)
	}
	e.waitStatus(first.ID, heph.StatusWaiting)
	if _, err := e.c.StartRun(ctx, "keyed", nil, key); !errors.As(err, &de) || de.ExistingRunID != first.ID {
		t.Errorf("start while the retried run holds the id: %v, want ErrDuplicateRun naming %s", err, first.ID)
	}
}

// A document run and a job are retried like flows.
func testRetryDocument(t *testing.T, b Backend) {
	st, _ := b.New(t)
	var broken atomic.Bool
	var prep, fragile atomic.Int32
	broken.Store(true)
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "prep", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (string, error) {
		prep.Add(1)
		return "prepared", nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := flowdoc.RegisterAction(reg, "fragile", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		From string `json:"from"`
	}) (string, error) {
		fragile.Add(1)
		if broken.Load() {
			return "", flow.NonRetryable(errors.New("fragile broke"))
		}
		return "used " + in.From, nil
	}); err != nil {
		t.Fatal(err)
	}
	c := startClient(t, st, nil)
	ctx := ctxT(t)
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	const doc = `
name: doc-retry
steps:
  prep:
    action: prep
    next: use
  use:
    action: fragile
    args: {from: "{{steps.prep.output}}"}
    done: true
`
	if _, err := c.PutDocument(ctx, "doc-retry", heph.DocumentYAML, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	r, err := c.RunDocument(ctx, "doc-retry", 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, heph.StatusFailed)
	broken.Store(false)
	// A client that has the registry but never ran the document retries it.
	other := startClient(t, st, func(cfg *heph.Config) { cfg.Queues = map[string]int{"elsewhere": 1} })
	if err := other.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RetryRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	wantCompletedWith(ctx, t, c, r.ID, `{"use":"used prepared"}`)
	if p, f := prep.Load(), fragile.Load(); p != 1 || f != 2 {
		t.Errorf("calls prep=%d fragile=%d, want 1 and 2", p, f)
	}
}

func testRetryJob(t *testing.T, b Backend) {
	var broken atomic.Bool
	var calls atomic.Int32
	broken.Store(true)
	kind := job.MustNew("retry_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		calls.Add(1)
		if broken.Load() {
			return errors.New("job broke")
		}
		return nil
	}, &job.Options[jobArgs]{MaxAttempts: 2, Retry: flow.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	e := jobEnv(t, b, nil, kind)
	ctx := ctxT(t)
	j, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, heph.StatusFailed)
	broken.Store(false)
	if _, err := e.c.RetryRun(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, heph.StatusCompleted)
	got, err := e.c.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempt != 3 || got.Error != "" || calls.Load() != 3 {
		t.Errorf("job after its retry: attempt %d, error %q, %d calls; want attempt 3, no error, 3 calls", got.Attempt, got.Error, calls.Load())
	}
}
