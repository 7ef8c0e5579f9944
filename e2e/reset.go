package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
)

// resetTests are the tests of Client.ResetRun (in RunRootAPI).
var resetTests = []subtest{
	{"ResetTenStepsWhileStepRuns", testResetTenSteps},
	{"ResetDocumentAndJob", testResetDocumentAndJob},
	{"ResetRefused", testResetRefused},
	{"ResetFailedAndPaused", testResetFailedAndPaused},
}

// tenSteps is s1 -> s2 -> ... -> s10: step sN returns "sN#k" on its k-th
// call. The first call of s8 signals started and holds until its context
// ends (then signals stopped and fails with the cause).
func tenSteps(name string, calls *[10]atomic.Int32, started, stopped chan<- struct{}) *flow.Flow {
	fb := flow.New(name)
	for i := 1; i <= 10; i++ {
		var opts []flow.StepOption
		if i > 1 {
			opts = append(opts, flow.DependsOn(fmt.Sprintf("s%d", i-1)))
		}
		flow.Step(fb, fmt.Sprintf("s%d", i), func(ctx context.Context, in any) (string, error) {
			k := calls[i-1].Add(1)
			if i == 8 && k == 1 {
				started <- struct{}{}
				<-ctx.Done()
				stopped <- struct{}{}
				return "", context.Cause(ctx)
			}
			return fmt.Sprintf("s%d#%d", i, k), nil
		}, opts...)
	}
	return fb.MustBuild()
}

// histLines shows a history entry by entry: kind, step, attempt, and the
// name (the actor of run_reset) and data of a reset.
func histLines(h []heph.HistoryEvent) []string {
	var out []string
	for _, ev := range h {
		s := string(ev.Kind)
		if ev.Step != "" {
			s += " " + ev.Step
		}
		if ev.Attempt != 0 {
			s += fmt.Sprintf(" a=%d", ev.Attempt)
		}
		if ev.Kind == hephtype.EventRunReset {
			s += fmt.Sprintf(" by=%s %s", ev.Name, ev.Data)
		}
		out = append(out, s)
	}
	return out
}

func sameHistory(t *testing.T, got []heph.HistoryEvent, want []string) {
	t.Helper()
	g := histLines(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

// ran is the history of step sN's attempt a that completed.
func ran(step string, a int) []string {
	return []string{fmt.Sprintf("step_scheduled %s a=%d", step, a), fmt.Sprintf("step_started %s a=%d", step, a), fmt.Sprintf("step_completed %s a=%d", step, a)}
}

// testResetTenSteps: a 10-step chain reset to step 4 while step 8 runs.
// Step 8's running attempt is stopped (its context ends, its result is
// refused and leaves no trace); steps 1-3 keep their outputs and run
// once; steps 4-8 run again with attempt 2, steps 9-10 once; the output
// is the new step 10's, and the history is, entry by entry, the run up to
// step 8, the reset by alice, step 8's cancellation, and the run from step
// 4 on.
func testResetTenSteps(t *testing.T, b Backend) {
	var calls [10]atomic.Int32
	started, stopped := make(chan struct{}, 1), make(chan struct{}, 1)
	e := newEnv(t, b, nil, tenSteps("ten", &calls, started, stopped))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "ten", "in", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	rr, err := e.c.ResetRun(ctx, r.ID, "s4", &heph.ResetOptions{By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status != heph.StatusRunning {
		t.Errorf("reset run is %s, want running", rr.Status)
	}
	if st, _ := rr.Step("s3"); st.Status != hephtype.StepCompleted {
		t.Errorf("s3 after the reset is %s, want completed (kept)", st.Status)
	}
	if st, _ := rr.Step("s5"); st.Status != hephtype.StepPending {
		t.Errorf("s5 after the reset is %s, want pending", st.Status)
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the running step 8 was never stopped")
	}
	done, err := e.c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"s10":"s10#1"}`)
	for i, want := range []int32{1, 1, 1, 2, 2, 2, 2, 2, 1, 1} {
		if got := calls[i].Load(); got != want {
			t.Errorf("s%d ran %d times, want %d", i+1, got, want)
		}
	}
	if st, _ := done.Step("s3"); string(st.Output) != `"s3#1"` {
		t.Errorf("s3's output %s, want the kept \"s3#1\"", st.Output)
	}
	want := []string{"run_started"}
	for i := 1; i <= 7; i++ {
		want = append(want, ran(fmt.Sprintf("s%d", i), 1)...)
	}
	want = append(want, "step_scheduled s8 a=1",
		`run_reset s4 by=alice {"steps":["s4","s5","s6","s7","s8","s9","s10"]}`, "step_cancelled s8")
	for i := 4; i <= 8; i++ {
		want = append(want, ran(fmt.Sprintf("s%d", i), 2)...)
	}
	want = append(want, ran("s9", 1)...)
	want = append(want, ran("s10", 1)...)
	sameHistory(t, e.history(r.ID), append(want, "run_completed"))
}

const resetDoc = `
name: doc-reset
steps:
  prep:
    action: count
    args: {n: "prep"}
    next: use
  use:
    action: count
    args: {n: "{{steps.prep.output}}"}
    done: true
`

// testResetDocumentAndJob: a completed stored document's run reset to its
// second step runs it again with the first step's kept output; a
// completed job reset (no step named: a job has one) runs again. Both
// complete again; the histories are checked entry by entry.
func testResetDocumentAndJob(t *testing.T, b Backend) {
	st, _ := b.New(t)
	var counts [2]atomic.Int32
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "count", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		N string `json:"n"`
	}) (string, error) {
		return fmt.Sprintf("%s/%d", in.N, counts[0].Add(1)), nil
	}); err != nil {
		t.Fatal(err)
	}
	kind := job.MustNew("reset_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		counts[1].Add(1)
		return nil
	}, nil)
	c := startClient(t, st, nil)
	ctx := ctxT(t)
	if err := errors.Join(c.RegisterDocuments(ctx, reg), c.RegisterJobs(kind)); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, st: st}
	if _, err := c.PutDocument(ctx, "doc-reset", heph.DocumentYAML, []byte(resetDoc)); err != nil {
		t.Fatal(err)
	}
	r, err := c.RunDocument(ctx, "doc-reset", 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, r.Output, `{"use":"prep/1/2"}`)
	if _, err := c.ResetRun(ctx, r.ID, "use", &heph.ResetOptions{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"use":"prep/1/3"}`)
	want := append([]string{"run_started"}, ran("prep", 1)...)
	want = append(append(want, ran("use", 1)...), "run_completed", `run_reset use by=bob {"steps":["use"]}`)
	sameHistory(t, e.history(r.ID), append(append(want, ran("use", 2)...), "run_completed"))

	j, err := heph.InsertJob(ctx, c, kind, jobArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(j.ID, heph.StatusCompleted)
	if _, err := c.ResetRun(ctx, j.ID, "", &heph.ResetOptions{By: "carol"}); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(j.ID, heph.StatusCompleted)
	if n := counts[1].Load(); n != 2 {
		t.Errorf("the job ran %d times, want 2", n)
	}
	h := e.history(j.ID)
	step := h[1].Step
	want = append([]string{"run_started"}, ran(step, 1)...)
	want = append(want, "run_completed", fmt.Sprintf(`run_reset %s by=carol {"steps":[%q]}`, step, step))
	sameHistory(t, h, append(append(want, ran(step, 2)...), "run_completed"))
}

// testResetRefused: an unknown step (named with the steps there are), a
// step that has not run, a cancelled run, a workflow run and a missing
// run are refused, with nothing written; a reset with the key of an
// earlier one resets nothing more.
func testResetRefused(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	var calls [10]atomic.Int32
	started, stopped := make(chan struct{}, 1), make(chan struct{}, 1)
	e.c = startWfClient(t, st, nil, wfs(Counter))
	if err := e.c.Register(tenSteps("ten", &calls, started, stopped), approvalFlow("approval", 0)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "ten", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := e.c.ResetRun(ctx, r.ID, "s44", nil); !errors.Is(err, heph.ErrUnknownStep) || !strings.Contains(err.Error(), `"s44"`) {
		t.Errorf("reset to an unknown step: %v, want ErrUnknownStep naming it", err)
	}
	if _, err := e.c.ResetRun(ctx, r.ID, "s9", nil); !errors.Is(err, heph.ErrNotResettable) || !strings.Contains(err.Error(), `step "s9" has not run yet`) {
		t.Errorf("reset to a step not run: %v, want ErrNotResettable", err)
	}
	if _, err := e.c.ResetRun(ctx, r.ID, "", nil); !errors.Is(err, heph.ErrUnknownStep) || !strings.Contains(err.Error(), "the step to reset to is empty") {
		t.Errorf("reset to no step: %v", err)
	}
	for range 2 {
		if _, err := e.c.ResetRun(ctx, r.ID, "s7", &heph.ResetOptions{Key: "k1"}); err != nil {
			t.Fatal(err)
		}
	}
	<-stopped
	if n := count(e.history(r.ID), hephtype.EventRunReset, ""); n != 1 {
		t.Errorf("two resets with one key: %d run_reset entries, want 1", n)
	}
	e.waitStatus(r.ID, heph.StatusCompleted)
	if _, err := e.c.ResetRun(ctx, r.ID, "s1", &heph.ResetOptions{Key: strings.Repeat("k", 195)}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("reset with a key too long: %v, want ErrInvalidInput", err)
	}
	wf, err := e.c.StartWorkflow(ctx, "counter", struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.ResetRun(ctx, wf.ID, "s1", nil); !errors.Is(err, heph.ErrNotResettable) || !strings.Contains(err.Error(), "code-first workflow") {
		t.Errorf("reset of a workflow run: %v, want ErrNotResettable", err)
	}
	if _, err := e.c.ResetRun(ctx, "no-such-run", "s1", nil); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("reset of a missing run: %v, want ErrRunNotFound", err)
	}
	ap, err := e.c.StartRun(ctx, "approval", "doc", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(ap.ID, heph.StatusWaiting)
	if err := e.c.CancelRun(ctx, ap.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.ResetRun(ctx, ap.ID, "approve", nil); !errors.Is(err, heph.ErrNotResettable) || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("reset of a cancelled run: %v, want ErrNotResettable", err)
	}
	if n := count(e.history(ap.ID), hephtype.EventRunReset, ""); n != 0 {
		t.Errorf("refused resets wrote %d run_reset entries", n)
	}
}

// testResetFailedAndPaused: a failed run whose business id another run
// holds is refused with ErrDuplicateRun; once that run is cancelled, the
// reset reopens the failed run (its error cleared). Paused, the run is
// reset again: the step's new attempt is not claimable while paused, and
// runs once after unpause.
func testResetFailedAndPaused(t *testing.T, b Backend) {
	var broken atomic.Bool
	broken.Store(true)
	fb := flow.New("keyed-reset").BusinessKey("order", flow.ScopeActive)
	flow.EventStep(fb, "work", func(ctx context.Context, in any) (flow.Result[string], error) {
		if broken.Load() {
			return flow.Result[string]{}, flow.NonRetryable(errors.New("broken"))
		}
		return flow.Wait[string](), nil
	}, flow.Waits(0))
	e := newEnv(t, b, nil, fb.MustBuild())
	ctx := ctxT(t)
	key := &heph.StartOptions{BusinessValue: "42"}
	failed := e.run("keyed-reset", nil, key)
	wantStatus(t, failed, heph.StatusFailed)
	broken.Store(false)
	holder, err := e.c.StartRun(ctx, "keyed-reset", nil, key)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(holder.ID, heph.StatusWaiting)
	if _, err := e.c.ResetRun(ctx, failed.ID, "work", nil); !errors.Is(err, heph.ErrDuplicateRun) {
		t.Fatalf("reset of a failed run whose business id is taken: %v, want ErrDuplicateRun", err)
	}
	if err := e.c.CancelRun(ctx, holder.ID, "make way"); err != nil {
		t.Fatal(err)
	}
	rr, err := e.c.ResetRun(ctx, failed.ID, "work", &heph.ResetOptions{By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status.Terminal() || rr.Error != "" || !rr.FinishedAt.IsZero() {
		t.Errorf("reopened run: status %s, error %q, finished %v", rr.Status, rr.Error, rr.FinishedAt)
	}
	e.waitStatus(failed.ID, heph.StatusWaiting)

	if err := e.c.PauseRun(ctx, failed.ID, &heph.PauseOptions{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.ResetRun(ctx, failed.ID, "work", &heph.ResetOptions{By: "bob"}); err != nil {
		t.Fatalf("reset of a paused run: %v", err)
	}
	if ts := e.probeClaim(time.Now().Add(24 * time.Hour)); len(ts) != 0 {
		t.Fatalf("claimable while paused: %d tasks", len(ts))
	}
	if err := e.c.UnpauseRun(ctx, failed.ID, nil); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(failed.ID, heph.StatusWaiting)
	want := []string{"run_started", "step_scheduled work a=1", "step_started work a=1", "step_failed work a=1", "run_failed work",
		`run_reset work by=alice {"steps":["work"]}`, "step_scheduled work a=2", "step_started work a=2", "step_waiting work a=2",
		"run_paused", `run_reset work by=bob {"steps":["work"]}`, "step_cancelled work", "step_scheduled work a=3", "run_unpaused",
		"step_started work a=3", "step_waiting work a=3"}
	for {
		h := e.history(failed.ID)
		if len(h) >= len(want) {
			sameHistory(t, h, want)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("history %v", histLines(h))
		case <-time.After(5 * time.Millisecond):
		}
	}
}
