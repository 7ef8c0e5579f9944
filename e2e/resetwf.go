package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// resetWfTests are the tests of Client.ResetWorkflow and of RetryRun on
// workflow runs (in RunRootAPI).
var resetWfTests = []subtest{
	{"ResetWorkflowMidHistory", testResetWorkflowMidHistory},
	{"RetryFailedWorkflow", testRetryFailedWorkflow},
	{"ResetWorkflowRefused", testResetWorkflowRefused},
	{"ResetWorkflowRemote", testResetWorkflowRemote},
}

// resettable is a workflow with an activity, a timer, a child and a
// signal, then a last activity; version 2 of its code (v) calls another
// activity after the signal. calls counts each activity's executions.
type resettable struct {
	v       atomic.Int32
	broken  atomic.Bool
	calls   [3]atomic.Int32 // first, last, other
	kids    atomic.Int32
	wf      *workflow.Definition[int, string]
	acts    []heph.Activity
	kidDef  *workflow.Definition[int, int]
	first   *workflow.Activity[int, int]
	last    *workflow.Activity[int, int]
	other   *workflow.Activity[int, int]
	workers []heph.Workflow
}

func newResettable() *resettable {
	r := &resettable{}
	r.v.Store(1)
	r.first = workflow.NewActivity("rw_first", func(_ context.Context, n int) (int, error) { r.calls[0].Add(1); return n + 1, nil })
	r.last = workflow.NewActivity("rw_last", func(_ context.Context, n int) (int, error) {
		r.calls[1].Add(1)
		if r.broken.Load() {
			return 0, flow.NonRetryable(errors.New("rw_last is broken"))
		}
		return n * 2, nil
	})
	r.other = workflow.NewActivity("rw_other", func(_ context.Context, n int) (int, error) { r.calls[2].Add(1); return n * 100, nil })
	r.kidDef = workflow.New("rw_kid", func(_ workflow.Context, n int) (int, error) {
		//heph:nondeterministic-ok test instrumentation: counts the child's activations, changing no command
		r.kids.Add(1)
		return n + 10, nil
	})
	r.wf = workflow.New("resettable", func(ctx workflow.Context, n int) (string, error) {
		a, err := r.first.Execute(ctx, n)
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return "", err
		}
		k, err := r.kidDef.ExecuteChild(ctx, a)
		if err != nil {
			return "", err
		}
		s, err := workflow.WaitSignal[int](ctx, "go")
		if err != nil {
			return "", err
		}
		act := r.last
		//heph:nondeterministic-ok the test's code change: version 2 of the code, after the history's point
		if r.v.Load() == 2 {
			act = r.other // the changed code
		}
		out, err := act.Execute(ctx, k+s)
		if err != nil {
			return "", err
		}
		//heph:nondeterministic-ok the code's version, as above
		return "v" + strconv.Itoa(int(r.v.Load())) + ":" + strconv.Itoa(out), nil
	})
	r.acts = []heph.Activity{r.first, r.last, r.other}
	r.workers = []heph.Workflow{r.wf, r.kidDef}
	return r
}

// signalPoint is the number of decisions before the run's first signal:
// the point where it waited for it.
func signalPoint(h []heph.HistoryEvent) string {
	n := 0
	for _, e := range h {
		if e.Kind == hephtype.EventSignalReceived {
			break
		}
		if e.Kind == hephtype.EventDecision {
			n++
		}
	}
	return strconv.Itoa(n)
}

// sameEntries checks that got[i] records what want[i] does, entry by entry.
func sameEntries(t *testing.T, what string, got, want []heph.HistoryEvent) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s: %d entries, want at least %d:\n%v\n%v", what, len(got), len(want), kinds(got), kinds(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.Kind || g.Name != w.Name || g.Index != w.Index || g.Step != w.Step || g.Error != w.Error || !jsonEqual(g.Data, w.Data) {
			t.Fatalf("%s: entry %d is %s %q #%d %s, want %s %q #%d %s", what, i+1, g.Kind, g.Name, g.Index, g.Data, w.Kind, w.Name, w.Index, w.Data)
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// wantKinds checks the kinds of h (step_started and step_retrying left
// out) against want.
func wantKinds(t *testing.T, what string, h []heph.HistoryEvent, want ...hephtype.EventKind) {
	t.Helper()
	var got []hephtype.EventKind
	for _, e := range h {
		if e.Kind != hephtype.EventStepStarted && e.Kind != hephtype.EventStepRetrying {
			got = append(got, e.Kind)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func resetInfoOf(t *testing.T, e heph.HistoryEvent) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("workflow_reset data %s: %v", e.Data, err)
	}
	return m
}

// testResetWorkflowMidHistory: a completed run reset to the decision where
// it waited for the signal, with changed code and the signal re-applied:
// the activity, timer and child before the point are not run again; the
// new code runs from there.
func testResetWorkflowMidHistory(t *testing.T, b Backend) {
	rw := newResettable()
	e := newWfEnv(t, b, nil, rw.workers, rw.acts...)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, rw.wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to wait for its signal", func() bool { return count(e.history(r.ID), hephtype.EventChildCompleted, "") == 1 })
	if err := r.Signal(ctx, "go", 3); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Get(ctx); err != nil || out != "v1:30" { // (1+1+10+3)*2
		t.Fatalf("first run: %q, %v", out, err)
	}
	old := e.history(r.ID)
	point := signalPoint(old)
	rw.v.Store(2)
	nr, err := e.c.ResetWorkflow(ctx, r.ID, &heph.ResetWorkflowOptions{Point: point, ReapplySignals: true, By: "alice", Reason: "new code"})
	if err != nil {
		t.Fatal(err)
	}
	if nr.ID == r.ID || nr.ResetFrom != r.ID {
		t.Fatalf("new run %s reset from %q, want a new run from %s", nr.ID, nr.ResetFrom, r.ID)
	}
	again, err := e.c.ResetWorkflow(ctx, r.ID, &heph.ResetWorkflowOptions{Point: point, ReapplySignals: true, By: "alice"})
	if err != nil || again.ID != nr.ID {
		t.Fatalf("the same reset again: %v, %v; want run %s", again, err, nr.ID)
	}
	out, err := heph.GetWorkflow(e.c, rw.wf, nr.ID).Get(ctx)
	if err != nil || out != "v2:1500" { // (2+12... ) k=12, s=3: 15*100
		t.Fatalf("reset run: %q, %v; want v2:1500", out, err)
	}
	if n := [3]int32{rw.calls[0].Load(), rw.calls[1].Load(), rw.calls[2].Load()}; n != [3]int32{1, 1, 1} || rw.kids.Load() != 1 {
		t.Fatalf("activity calls %v, children %d; want each once", n, rw.kids.Load())
	}
	oldRun, err := e.c.GetRun(ctx, r.ID)
	if err != nil || oldRun.ResetTo != nr.ID || oldRun.Status != heph.StatusCompleted {
		t.Fatalf("old run: %+v, %v; want completed, reset to %s", oldRun, err, nr.ID)
	}
	oh := e.history(r.ID)
	sameEntries(t, "the old run's history", oh, old)
	if len(oh) != len(old)+1 || oh[len(old)].Kind != hephtype.EventWorkflowReset || oh[len(old)].Name != nr.ID {
		t.Fatalf("old history: %v, want one workflow_reset naming %s at the end", kinds(oh), nr.ID)
	}
	if m := resetInfoOf(t, oh[len(old)]); m["by"] != "alice" || m["reason"] != "new code" || m["point"] != point || m["from"] != r.ID || m["to"] != nr.ID {
		t.Fatalf("workflow_reset data %v", m)
	}
	nh := e.history(nr.ID)
	cut := 0
	for cut < len(old) && old[cut].Kind != hephtype.EventSignalReceived {
		cut++
	}
	sameEntries(t, "the new run's copied history", nh, old[:cut])
	wantKinds(t, "the new run's history after the point", nh[cut:],
		hephtype.EventWorkflowReset, hephtype.EventSignalReceived,
		hephtype.EventDecision, hephtype.EventStepScheduled,
		hephtype.EventStepCompleted, hephtype.EventDecision, hephtype.EventRunCompleted)
	if nh[cut].Name != r.ID || nh[cut+1].Name != "go" || string(nh[cut+1].Data) != "3" || nh[cut+3].Name != "rw_other" {
		t.Fatalf("new history after the point: %+v", nh[cut:cut+4])
	}
}

// testRetryFailedWorkflow: RetryRun of a workflow run that failed in its
// last activity resets it to its last good decision: only that activity
// runs again, and the run completes.
func testRetryFailedWorkflow(t *testing.T, b Backend) {
	rw := newResettable()
	rw.broken.Store(true)
	e := newWfEnv(t, b, nil, rw.workers, rw.acts...)
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, rw.wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to wait for its signal", func() bool { return count(e.history(r.ID), hephtype.EventChildCompleted, "") == 1 })
	if err := r.Signal(ctx, "go", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx); err == nil {
		t.Fatal("the broken run completed")
	}
	old := e.history(r.ID)
	rw.broken.Store(false)
	nr, err := e.c.RetryRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if nr.ID == r.ID || nr.ResetFrom != r.ID {
		t.Fatalf("retry: run %s from %q", nr.ID, nr.ResetFrom)
	}
	if again, err := e.c.RetryRun(ctx, r.ID); err != nil || again.ID != nr.ID {
		t.Fatalf("retry again: %v, %v; want run %s", again, err, nr.ID)
	}
	out, err := heph.GetWorkflow(e.c, rw.wf, nr.ID).Get(ctx)
	if err != nil || out != "v1:32" { // (12+4)*2
		t.Fatalf("retried run: %q, %v", out, err)
	}
	if rw.calls[0].Load() != 1 || rw.calls[1].Load() != 2 || rw.kids.Load() != 1 {
		t.Fatalf("calls: first %d, last %d, children %d; want 1, 2, 1", rw.calls[0].Load(), rw.calls[1].Load(), rw.kids.Load())
	}
	// The failing decision is the last one; its outcome (step_failed) and
	// it are dropped: the copy ends with the step_scheduled of rw_last.
	cut := len(old)
	for old[cut-1].Kind != hephtype.EventStepScheduled {
		cut--
	}
	nh := e.history(nr.ID)
	sameEntries(t, "the retried run's copied history", nh, old[:cut])
	wantKinds(t, "the retried run's history after the point", nh[cut:],
		hephtype.EventWorkflowReset, hephtype.EventStepCompleted, hephtype.EventDecision, hephtype.EventRunCompleted)
	if o, err := e.c.GetRun(ctx, r.ID); err != nil || o.Status != heph.StatusFailed || o.ResetTo != nr.ID {
		t.Fatalf("old run: %+v, %v", o, err)
	}
	if _, err := e.c.RetryRun(ctx, nr.ID); !errors.Is(err, heph.ErrNotRetryable) {
		t.Fatalf("retry of the completed run: %v, want ErrNotRetryable", err)
	}
}

// testResetWorkflowRefused: bad points and runs that cannot be reset are
// refused, and nothing is written.
func testResetWorkflowRefused(t *testing.T, b Backend) {
	rw := newResettable()
	e := newWfEnv(t, b, nil, rw.workers, rw.acts...)
	ctx := ctxT(t)
	// A workflow id: the active run holds it, and the reset passes it on.
	r, err := heph.StartWorkflow(ctx, e.c, rw.wf, 1, &heph.WorkflowOptions{ID: "order-7"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to wait for its signal", func() bool { return count(e.history(r.ID), hephtype.EventChildCompleted, "") == 1 })
	before := e.history(r.ID)
	for _, p := range []string{"0", "x", "99"} {
		if _, err := e.c.ResetWorkflow(ctx, r.ID, &heph.ResetWorkflowOptions{Point: p}); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("point %q: %v, want ErrInvalidInput", p, err)
		}
	}
	var kid string
	for _, ev := range before {
		if ev.Kind == hephtype.EventChildStarted {
			kid = ev.Name
		}
	}
	runs, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: kid})
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("child runs: %v, %v", runs, err)
	}
	if _, err := e.c.ResetWorkflow(ctx, runs.Runs[0].ID, nil); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("reset of a child run: %v, want ErrInvalidInput", err)
	}
	if h := e.history(r.ID); len(h) != len(before) {
		t.Fatalf("refused resets wrote %v", kinds(h[len(before):]))
	}
	// Reset while it waits (first): it is cancelled, the new run starts over.
	nr, err := e.c.ResetWorkflow(ctx, r.ID, &heph.ResetWorkflowOptions{Point: heph.ResetPointFirst})
	if err != nil {
		t.Fatal(err)
	}
	if o := e.waitStatus(r.ID, heph.StatusCancelled); o.ResetTo != nr.ID {
		t.Fatalf("old run: reset to %q", o.ResetTo)
	}
	if cur, err := e.c.FindWorkflow(ctx, rw.wf.Name(), "order-7"); err != nil || cur.ID != nr.ID {
		t.Fatalf("the run of workflow id order-7: %v, %v; want the new run %s", cur, err, nr.ID)
	}
	waitFor(t, "the new run's child", func() bool { return count(e.history(nr.ID), hephtype.EventChildCompleted, "") == 1 })
	if err := e.c.SignalWorkflow(ctx, nr.ID, "go", 1); err != nil {
		t.Fatal(err)
	}
	if out, err := heph.GetWorkflow(e.c, rw.wf, nr.ID).Get(ctx); err != nil || out != "v1:26" {
		t.Fatalf("reset run: %q, %v", out, err)
	}
	if rw.calls[0].Load() != 2 || rw.kids.Load() != 2 {
		t.Fatalf("from the first decision everything runs again: first %d, children %d", rw.calls[0].Load(), rw.kids.Load())
	}
}

// testResetWorkflowRemote: a reset by a client that has not the workflow
// (as the API server): the worker that has it reissues, with the new
// run's first decision, the activity, timer and child the copy left open.
func testResetWorkflowRemote(t *testing.T, b Backend) {
	rw := newResettable()
	e := newWfEnv(t, b, nil, rw.workers, rw.acts...)
	other := startClient(t, e.st, func(cfg *heph.Config) { cfg.Queues = map[string]int{"elsewhere": 1} })
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, rw.wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to wait for its signal", func() bool { return count(e.history(r.ID), hephtype.EventChildCompleted, "") == 1 })
	old := e.history(r.ID)
	// Decision 1 scheduled rw_first: its outcome and all after it go.
	nr, err := other.ResetWorkflow(ctx, r.ID, &heph.ResetWorkflowOptions{Point: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if nr.Status != heph.StatusPending {
		t.Fatalf("the new run is %s, want pending (a worker decides it)", nr.Status)
	}
	if o := e.waitStatus(r.ID, heph.StatusCancelled); o.ResetTo != nr.ID {
		t.Fatalf("the old run: reset to %q", o.ResetTo)
	}
	waitFor(t, "the new run's child", func() bool { return count(e.history(nr.ID), hephtype.EventChildCompleted, "") == 1 })
	if err := e.c.SignalWorkflow(ctx, nr.ID, "go", 2); err != nil {
		t.Fatal(err)
	}
	out, err := heph.GetWorkflow(e.c, rw.wf, nr.ID).Get(ctx)
	if err != nil || out != "v1:28" { // (1+1+10+2)*2
		t.Fatalf("reset run: %q, %v", out, err)
	}
	if rw.calls[0].Load() != 2 || rw.kids.Load() != 2 {
		t.Fatalf("rw_first ran %d times, the child %d; want twice each", rw.calls[0].Load(), rw.kids.Load())
	}
	cut := 1
	for old[cut].Kind != hephtype.EventDecision {
		cut++
	}
	for cut++; cut < len(old) && old[cut].Kind == hephtype.EventStepScheduled; cut++ {
	}
	nh := e.history(nr.ID)
	sameEntries(t, "the new run's copied history", nh, old[:cut])
	wantKinds(t, "the new run's history after the point", nh[cut:],
		hephtype.EventWorkflowReset, // the reissue writes no entry, only tasks
		hephtype.EventStepCompleted, hephtype.EventDecision, hephtype.EventTimerStarted,
		hephtype.EventTimerFired, hephtype.EventDecision, hephtype.EventChildStarted,
		hephtype.EventChildCompleted, hephtype.EventDecision,
		hephtype.EventSignalReceived, hephtype.EventDecision, hephtype.EventStepScheduled,
		hephtype.EventStepCompleted, hephtype.EventDecision, hephtype.EventRunCompleted)
}
