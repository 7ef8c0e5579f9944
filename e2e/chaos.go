package e2e

// The workload of the chaos suite (e2e/chaos_test.go): a DAG flow and
// code-first workflows that the tests run under faults (killed and frozen
// worker processes, killed database connections, activations that outlive
// their lease, commits whose outcome is lost), and the checker that reads
// the runs' histories afterwards and finds every state change applied
// twice and every run lost. The definitions live here, outside the test
// files, so that the worker processes the tests start (the test binary
// again) register exactly the same ones.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Names of the chaos workload's definitions and messages.
const (
	ChaosFlowName     = "chaos_dag"
	ChaosWorkflowName = "chaos_wf"
	ChaosChildName    = "chaos_child"
	// ChaosSignal is the signal the workflows wait for.
	ChaosSignal = "sig"
	// ChaosUpdate is the update the workflows accept.
	ChaosUpdate = "add"
	// ChaosUpdatesOpen is what a workflow publishes (for queries) when
	// its phase accepts updates.
	ChaosUpdatesOpen = "updates"
)

// ChaosFlowInput is the input of the chaos flow.
type ChaosFlowInput struct {
	N int `json:"n"`
	// SlowMs, when set, makes the step "right" take this long (past a
	// short lease: heartbeats must keep it, or a lost lease re-run it).
	SlowMs int `json:"slow_ms,omitempty"`
}

// ChaosExec reports an execution of step or activity code to the hook
// set with SetChaosTrace.
type ChaosExec struct {
	// Phase is "start" when the code begins, "done" when it returns.
	Phase string
	RunID string
	// Step is the flow step, or the activity.
	Step string
	// Index is the map element (-1 for other steps; 0 for activities).
	Index    int
	Attempt  int
	Activity bool
	// Slow: a step that runs for SlowMs (see ChaosFlowInput).
	Slow bool
}

var (
	chaosTrace atomic.Pointer[func(ChaosExec)]
	chaosExecs atomic.Int64
)

// SetChaosTrace makes every execution of the chaos workload's step and
// activity code call fn as it starts and as it returns (nil: no calls).
func SetChaosTrace(fn func(ChaosExec)) {
	if fn == nil {
		chaosTrace.Store(nil)
		return
	}
	chaosTrace.Store(&fn)
}

// ChaosExecutions counts the executions of the chaos workload's step and
// activity code in this process (each started execution once, whatever
// became of it).
func ChaosExecutions() int64 { return chaosExecs.Load() }

// chaosWork is the body every step and activity of the workload runs: it
// reports the execution and takes a little while (d, or 1-4 ms), so that
// faults land in the middle of step code as often as between steps.
func chaosWork(ctx context.Context, e ChaosExec, d time.Duration) error {
	chaosExecs.Add(1)
	tr := chaosTrace.Load()
	if tr != nil {
		e.Phase = "start"
		(*tr)(e)
	}
	if d <= 0 {
		d = time.Duration(1000+rand.IntN(3000)) * time.Microsecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if tr != nil {
		e.Phase = "done"
		(*tr)(e)
	}
	return nil
}

func flowExec(ctx context.Context, slow time.Duration) error {
	info, _ := flow.CallInfo(ctx)
	return chaosWork(ctx, ChaosExec{RunID: info.RunID, Step: info.Step, Index: info.Index, Attempt: info.Attempt, Slow: slow > 0}, slow)
}

var chaosRetry = flow.RetryPolicy{MaxAttempts: 5, InitialBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}

// ChaosFlow is the DAG flow of the workload: split fans out to left,
// right, flaky (which fails its first attempt and is retried) and the map
// step square (one element per number split returns); join fans in.
//
//	split -> left, right, flaky, square[3] -> join
func ChaosFlow() *flow.Flow {
	b := flow.New(ChaosFlowName).BusinessKey("n", flow.ScopeForever)
	flow.Input[ChaosFlowInput](b)
	split := flow.Step(b, "split", func(ctx context.Context, in ChaosFlowInput) ([]int, error) {
		if err := flowExec(ctx, 0); err != nil {
			return nil, err
		}
		return []int{in.N, in.N + 1, in.N + 2}, nil
	})
	left := flow.Step(b, "left", func(ctx context.Context, in ChaosFlowInput) (int, error) {
		if err := flowExec(ctx, 0); err != nil {
			return 0, err
		}
		xs, err := split.Output(ctx)
		sum := 0
		for _, x := range xs {
			sum += x
		}
		return 2 * sum, err
	}, flow.DependsOn("split"))
	right := flow.Step(b, "right", func(ctx context.Context, in ChaosFlowInput) (int, error) {
		if err := flowExec(ctx, time.Duration(in.SlowMs)*time.Millisecond); err != nil {
			return 0, err
		}
		return 3 * in.N, nil
	}, flow.DependsOn("split"))
	flaky := flow.Step(b, "flaky", func(ctx context.Context, in ChaosFlowInput) (int, error) {
		if err := flowExec(ctx, 0); err != nil {
			return 0, err
		}
		if info, _ := flow.CallInfo(ctx); info.Attempt == 1 {
			return 0, errors.New("chaos: the first attempt of flaky fails")
		}
		return in.N + 7, nil
	}, flow.DependsOn("split"), flow.Retry(chaosRetry))
	flow.Map(b, "square", func(ctx context.Context, x int) (int, error) {
		if err := flowExec(ctx, 0); err != nil {
			return 0, err
		}
		return x * x, nil
	}, flow.DependsOn("split"), flow.Retry(chaosRetry))
	flow.Step(b, "join", func(ctx context.Context, in ChaosFlowInput) (int, error) {
		if err := flowExec(ctx, 0); err != nil {
			return 0, err
		}
		l, err1 := left.Output(ctx)
		r, err2 := right.Output(ctx)
		f, err3 := flaky.Output(ctx)
		sq, err4 := flow.Output[[]int](ctx, "square")
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return 0, err
		}
		sum := l + r + f
		for _, x := range sq {
			sum += x
		}
		return sum, nil
	}, flow.DependsOn("left", "right", "flaky", "square"))
	return b.MustBuild()
}

// ChaosFlowOutput is the output a chaos flow run must end with.
func ChaosFlowOutput(in ChaosFlowInput) int {
	n := in.N
	return 2*(3*n+3) + 3*n + (n + 7) + n*n + (n+1)*(n+1) + (n+2)*(n+2)
}

// ChaosFlowSteps are the steps of the chaos flow (square has 3 elements).
var ChaosFlowSteps = []string{"split", "left", "right", "flaky", "square", "join"}

// ChaosWfInput is the input of the chaos workflow.
type ChaosWfInput struct {
	N int `json:"n"`
	// Signals is how many ChaosSignal signals the workflow waits for.
	Signals int `json:"signals"`
	// Updates is how many ChaosUpdate updates its phase accepts.
	Updates int `json:"updates"`
	// SleepMs is the duration of its durable sleep.
	SleepMs int `json:"sleep_ms"`
	// SlowChild: the child's first activation (in a process) blocks for
	// SlowActivation. SlowParent: so does the activation of the parent
	// that receives the child's result.
	SlowChild  bool `json:"slow_child,omitempty"`
	SlowParent bool `json:"slow_parent,omitempty"`
}

// ChaosWfOutput is the chaos workflow's result: what its activities
// returned, the signal payloads and update arguments it received in the
// order it received them, and its child's result.
type ChaosWfOutput struct {
	Act     int      `json:"act"`
	Signals []string `json:"signals"`
	Updates []string `json:"updates"`
	Child   string   `json:"child"`
	Final   int      `json:"final"`
}

// ChaosChildInput is the input of the child workflow.
type ChaosChildInput struct {
	N    int  `json:"n"`
	Slow bool `json:"slow,omitempty"`
	// Gen is the generation: the child continues as new once, carrying
	// its activity's result in Acc.
	Gen int `json:"gen,omitempty"`
	Acc int `json:"acc,omitempty"`
}

// SlowActivation is how long a slow activation blocks: longer than the
// short leases of the slow-activation test.
const SlowActivation = time.Second

var (
	// chaosSlowDone remembers the activations that blocked already (in
	// this process), so that only the first one of a run does: a replay
	// of the same code must not block again.
	chaosSlowDone sync.Map
	chaosSlowHook atomic.Pointer[func(begin bool)]
)

// SetChaosSlowHook makes every slow activation call fn(true) as it begins
// to block and fn(false) as it ends (nil: no calls).
func SetChaosSlowHook(fn func(begin bool)) {
	if fn == nil {
		chaosSlowHook.Store(nil)
		return
	}
	chaosSlowHook.Store(&fn)
}

// chaosSlowActivation blocks the running activation for SlowActivation,
// the first time it is called with key in this process.
func chaosSlowActivation(key string) {
	if _, done := chaosSlowDone.LoadOrStore(key, true); done {
		return
	}
	hook := chaosSlowHook.Load()
	if hook != nil {
		(*hook)(true)
		defer (*hook)(false)
	}
	time.Sleep(SlowActivation)
}

func activityExec(ctx context.Context) (workflow.ActivityInfo, error) {
	info, _ := workflow.GetActivityInfo(ctx)
	return info, chaosWork(ctx, ChaosExec{RunID: info.RunID, Step: info.Activity, Attempt: info.Attempt, Activity: true}, 0)
}

var (
	// chaosDouble doubles its input; for multiples of 4 its first
	// attempt fails and is retried.
	chaosDouble = workflow.NewActivity("chaos.double", func(ctx context.Context, n int) (int, error) {
		info, err := activityExec(ctx)
		if err != nil {
			return 0, err
		}
		if n%4 == 0 && info.Attempt == 1 {
			return 0, errors.New("chaos: the first attempt of chaos.double fails")
		}
		return 2 * n, nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: chaosRetry})
	chaosTriple = workflow.NewActivity("chaos.triple", func(ctx context.Context, n int) (int, error) {
		if _, err := activityExec(ctx); err != nil {
			return 0, err
		}
		return 3 * n, nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: chaosRetry})
)

// ChaosChild is the child workflow: an activity, then it continues as
// new, and the new run sleeps on a durable timer and returns (to the
// parent of the first run).
var ChaosChild = workflow.New(ChaosChildName, func(ctx workflow.Context, in ChaosChildInput) (string, error) {
	if in.Slow {
		//heph:nondeterministic-ok chaos instrumentation: a real delay of the first activation only, changing no command
		chaosSlowActivation(workflow.GetInfo(ctx).RunID + "/first") // a first activation that outlives a short lease
	}
	if in.Gen == 0 {
		v, err := chaosTriple.Execute(ctx, in.N)
		if err != nil {
			return "", err
		}
		return "", workflow.ContinueAsNew(ctx, ChaosChildInput{N: in.N, Gen: 1, Acc: v})
	}
	if err := workflow.Sleep(ctx, 20*time.Millisecond); err != nil {
		return "", err
	}
	return fmt.Sprintf("child-%d-%d", in.N, in.Acc), nil
})

// ChaosWorkflow runs an activity, sleeps on a durable timer, starts a
// child, waits for its signals, accepts its updates in a phase, collects
// the child's result and runs a last activity.
var ChaosWorkflow = workflow.New(ChaosWorkflowName, func(ctx workflow.Context, in ChaosWfInput) (ChaosWfOutput, error) {
	var out ChaosWfOutput
	a, err := chaosDouble.Execute(ctx, in.N)
	if err != nil {
		return out, err
	}
	if err := workflow.Sleep(ctx, time.Duration(in.SleepMs)*time.Millisecond); err != nil {
		return out, err
	}
	child := ChaosChild.StartChild(ctx, ChaosChildInput{N: in.N, Slow: in.SlowChild})
	for range in.Signals {
		s, err := workflow.WaitSignal[string](ctx, ChaosSignal)
		if err != nil {
			return out, err
		}
		out.Signals = append(out.Signals, s)
	}
	if in.Updates > 0 {
		workflow.Publish(ctx, ChaosUpdatesOpen)
		ups, err := workflow.Phase(ctx, []string(nil),
			workflow.OnUpdate(ChaosUpdate, func(ctx workflow.Context, arg string, s []string) (workflow.Reply[[]string, int], error) {
				s = append(slices.Clip(s), arg)
				if len(s) >= in.Updates {
					return workflow.RespondAndStop(s, len(s)), nil
				}
				return workflow.Respond(s, len(s)), nil
			}))
		if err != nil {
			return out, err
		}
		out.Updates = ups
	}
	workflow.Publish(ctx, "child")
	c, err := child.Get(ctx)
	if err != nil {
		return out, err
	}
	if in.SlowParent {
		//heph:nondeterministic-ok chaos instrumentation: a real delay of one activation only, changing no command
		chaosSlowActivation(workflow.GetInfo(ctx).RunID + "/after-child") // a decision on the child's result that outlives a short lease
	}
	f, err := chaosDouble.Execute(ctx, a+len(out.Signals))
	if err != nil {
		return out, err
	}
	out.Act, out.Child, out.Final = a, c, f
	return out, nil
})

// ChaosWorkflowOutput is the output a chaos workflow run must end with,
// given the signal payloads and update arguments sent to it, in order.
func ChaosWorkflowOutput(in ChaosWfInput, signals, updates []string) ChaosWfOutput {
	a := 2 * in.N
	return ChaosWfOutput{Act: a, Signals: signals, Updates: updates, Child: chaosChildOutput(in.N), Final: 2 * (a + len(signals))}
}

func chaosChildOutput(n int) string { return fmt.Sprintf("child-%d-%d", n, 3*n) }

// RegisterChaos registers the chaos workload in c, whose store is st:
// the chaos job kind's snoozing jobs read their history from it.
func RegisterChaos(c *heph.Client, st store.Store) error {
	if err := c.Register(ChaosFlow()); err != nil {
		return err
	}
	if err := c.RegisterWorkflows(ChaosWorkflow, ChaosChild); err != nil {
		return err
	}
	if err := c.RegisterJobs(chaosJobKind(st)); err != nil {
		return err
	}
	return c.RegisterActivities(chaosDouble, chaosTriple)
}

// --- The checker -------------------------------------------------------------

// ChaosRun is a run of the workload and what was sent to it.
type ChaosRun struct {
	ID string
	// Flow: a run of ChaosFlow with FlowIn; Job: a chaos job with JobIn;
	// otherwise a run of ChaosWorkflow with WfIn.
	Flow   bool
	FlowIn ChaosFlowInput
	Job    bool
	JobIn  ChaosJobArgs
	WfIn   ChaosWfInput
	// Signals are the payloads of the signals sent, in the order sent;
	// Updates the arguments of the updates (each its own update id).
	Signals []string
	Updates []string
}

// ChaosFigures are what the checker counted.
type ChaosFigures struct {
	// Runs checked: flows, workflows and their children (two runs each:
	// the child continues as new once).
	Runs, Flows, Workflows, Children int
	// Jobs counts the chaos jobs the test inserted, ScheduledJobs those
	// the schedule's ticks started (Ticks: the log's started entries),
	// Snoozes the step_snoozed entries of all of them.
	Jobs, ScheduledJobs, Ticks, Snoozes int
	// Attempts counts step_started entries (one per attempt of a step or
	// activity whose outcome was applied); Reexecutions those of them
	// that say "reexecution": an earlier claim of the attempt lost its
	// lease (or was given back) and its result, if any, was dropped.
	Attempts, Reexecutions int
	// Duplicates counts state changes applied more than once.
	Duplicates int
	// Lost counts runs that did not reach their expected end (status,
	// output, and every state change they must have).
	Lost int
}

// CheckChaos checks every run of the workload, as the store has it, once
// the runs ended: each reached its expected status and output, and no
// history holds a state change twice. It returns the figures and one
// line per problem found.
func CheckChaos(ctx context.Context, st store.Store, runs []ChaosRun) (ChaosFigures, []string) {
	k := &chaosChecker{ctx: ctx, st: st, lost: map[string]bool{}, parents: map[string]ChaosRun{},
		want: map[string]bool{}, children: map[string]map[int]*store.Run{}}
	for _, r := range runs {
		k.checkRun(r)
	}
	// The children: two runs per workflow (the child continues as new
	// once), the second completed with the result; no other runs than
	// those started.
	all, err := listAllRuns(ctx, st)
	if err != nil {
		k.fail("", "list runs: %v", err)
		k.f.Lost = len(k.lost)
		return k.f, k.problems
	}
	for _, r := range runs {
		k.want[r.ID] = true
	}
	// The schedule's ticks, and the jobs they started.
	schedLost := k.checkSchedule(all) // ticks logged started whose run does not exist
	for _, run := range all {
		if run.Workflow != ChaosChildName {
			if !k.want[run.ID] {
				k.fail("", "run %s (%s, %s) was not started by the test", run.ID, run.Workflow, run.BusinessID)
			}
			continue
		}
		k.checkChild(run)
	}
	for id := range k.parents {
		for gen := range 2 {
			if k.children[id][gen] == nil {
				k.fail(id, "workflow run %s has no child run of generation %d", id, gen)
			}
		}
	}
	sort.Strings(k.problems)
	k.f.Lost = len(k.lost) + schedLost
	return k.f, k.problems
}

// chaosChecker is the state of one CheckChaos.
type chaosChecker struct {
	ctx      context.Context
	st       store.Store
	f        ChaosFigures
	problems []string
	lost     map[string]bool
	parents  map[string]ChaosRun           // the workflow runs of the test
	want     map[string]bool               // the runs the test or the schedule started
	children map[string]map[int]*store.Run // by parent, by generation
}

// fail records a problem; lostRun, when set, is the run it loses.
func (k *chaosChecker) fail(lostRun string, format string, args ...any) {
	if lostRun != "" {
		k.lost[lostRun] = true
	}
	k.problems = append(k.problems, fmt.Sprintf(format, args...))
}

// counted adds what a history check found about run id (what names it
// in a problem) to the figures and problems.
func (k *chaosChecker) counted(c historyCheck, h []store.Event, what, id string) {
	k.f.Attempts += c.attempts
	k.f.Reexecutions += c.reexecutions
	k.f.Duplicates += len(c.duplicates)
	for _, d := range c.duplicates {
		k.fail("", "DUPLICATE in %s: %s\n%s", what, d, describeHistory(h))
	}
	for _, m := range c.missing {
		k.fail(id, "%s: %s\n%s", what, m, describeHistory(h))
	}
}

// checkRun checks a run the test started: a job, a flow or a workflow.
func (k *chaosChecker) checkRun(r ChaosRun) {
	run, err := k.st.GetRun(k.ctx, r.ID)
	if err != nil {
		k.fail(r.ID, "run %s: %v", r.ID, err)
		return
	}
	h, err := k.st.History(k.ctx, &store.HistoryParams{RunID: r.ID})
	if err != nil {
		k.fail(r.ID, "run %s: history: %v", r.ID, err)
		return
	}
	k.f.Runs++
	var c historyCheck
	if r.Job {
		k.f.Jobs++
		var n int
		c, n = checkJobHistory(h, run, r.JobIn)
		k.f.Snoozes += n
	} else if r.Flow {
		k.f.Flows++
		c = checkFlowHistory(h)
		if run.Status != hephtype.StatusCompleted {
			k.fail(r.ID, "flow run %s (n=%d) is %s (%s), want completed", r.ID, r.FlowIn.N, run.Status, run.Error)
		} else if got, want := chaosJoin(run.Output), ChaosFlowOutput(r.FlowIn); got != want {
			k.fail(r.ID, "flow run %s (n=%d): output %s, want join = %d", r.ID, r.FlowIn.N, run.Output, want)
		}
	} else {
		k.f.Workflows++
		k.parents[r.ID] = r
		c = checkWorkflowHistory(h, r)
		k.checkWorkflowRun(r, run)
	}
	k.counted(c, h, "run "+r.ID, r.ID)
}

// checkWorkflowRun checks a workflow run's updates and outcome.
func (k *chaosChecker) checkWorkflowRun(r ChaosRun, run *store.Run) {
	// Each update was recorded once, as a request a worker took: never
	// rejected (a retried or duplicated commit, or a lost lease, must not
	// turn into a rejection).
	for _, id := range r.Updates {
		req, err := k.st.GetRequest(k.ctx, r.ID, "update:"+id)
		if err != nil {
			k.fail(r.ID, "run %s: the request of update %q: %v", r.ID, id, err)
		} else if req.Status == store.RequestRejected {
			k.fail(r.ID, "run %s: update %q was rejected (%s: %s) and accepted", r.ID, id, req.Code, req.Error)
		}
	}
	if run.Status != hephtype.StatusCompleted {
		k.fail(r.ID, "workflow run %s (n=%d) is %s (%s), want completed", r.ID, r.WfIn.N, run.Status, run.Error)
		return
	}
	var got ChaosWfOutput
	want := ChaosWorkflowOutput(r.WfIn, r.Signals, r.Updates)
	if err := json.Unmarshal(run.Output, &got); err != nil || !chaosOutputEqual(got, want) {
		k.fail(r.ID, "workflow run %s (n=%d): output %s, want %+v", r.ID, r.WfIn.N, run.Output, want)
	}
}

// checkSchedule checks the schedule's ticks and the jobs they started
// (among all runs), and returns the ticks logged started whose run does
// not exist.
func (k *chaosChecker) checkSchedule(all []*store.Run) int {
	sc, err := checkChaosSchedule(k.ctx, k.st, all)
	if err != nil {
		k.fail("", "check the schedule %s: %v", ChaosScheduleID, err)
	}
	if sc == nil {
		return 0
	}
	k.f.Ticks = sc.ticks
	k.f.Duplicates += sc.dups
	for _, p := range sc.problems {
		k.fail("", "%s", p)
	}
	for _, run := range all {
		if !sc.runs[run.ID] {
			continue
		}
		k.want[run.ID] = true
		in, err := chaosJobRunArgs(run)
		if err != nil || in != ChaosScheduledJob {
			k.fail(run.ID, "scheduled job %s: arguments %s (%v), want %+v", run.ID, run.Input, err, ChaosScheduledJob)
			continue
		}
		h, err := k.st.History(k.ctx, &store.HistoryParams{RunID: run.ID})
		if err != nil {
			k.fail(run.ID, "scheduled job %s: history: %v", run.ID, err)
			continue
		}
		k.f.Runs++
		k.f.ScheduledJobs++
		c, n := checkJobHistory(h, run, in)
		k.f.Snoozes += n
		k.counted(c, h, "scheduled job "+run.ID, run.ID)
	}
	return sc.lost
}

// checkChild checks a run of ChaosChild: of a workflow of the test, the
// only one of its generation, continued (generation 0) or completed with
// the result (generation 1).
func (k *chaosChecker) checkChild(run *store.Run) {
	p, ok := k.parents[run.ParentID]
	if !ok {
		k.fail(run.ID, "child run %s has parent %q, not a workflow of the test", run.ID, run.ParentID)
		return
	}
	var in ChaosChildInput
	_ = json.Unmarshal(run.Input, &in)
	if k.children[run.ParentID] == nil {
		k.children[run.ParentID] = map[int]*store.Run{}
	}
	if other := k.children[run.ParentID][in.Gen]; other != nil {
		k.f.Duplicates++
		k.fail("", "DUPLICATE: workflow %s has two children of generation %d, %s and %s", run.ParentID, in.Gen, other.ID, run.ID)
		return
	}
	k.children[run.ParentID][in.Gen] = run
	k.f.Runs++
	k.f.Children++
	h, err := k.st.History(k.ctx, &store.HistoryParams{RunID: run.ID})
	if err != nil {
		k.fail(run.ID, "child run %s: history: %v", run.ID, err)
		return
	}
	c := checkWorkflowHistory(h, ChaosRun{ID: run.ID})
	k.counted(c, h, "child run "+run.ID+" (of "+run.ParentID+")", run.ID)
	switch in.Gen {
	case 0:
		if run.Status != hephtype.StatusContinued {
			k.fail(run.ID, "child run %s (of %s, generation 0) is %s (%s), want continued", run.ID, run.ParentID, run.Status, run.Error)
		}
	case 1:
		var out string
		if run.Status != hephtype.StatusCompleted {
			k.fail(run.ID, "child run %s (of %s) is %s (%s), want completed", run.ID, run.ParentID, run.Status, run.Error)
		} else if err := json.Unmarshal(run.Output, &out); err != nil || out != chaosChildOutput(p.WfIn.N) {
			k.fail(run.ID, "child run %s (of %s): output %s, want %q", run.ID, run.ParentID, run.Output, chaosChildOutput(p.WfIn.N))
		}
	default:
		k.fail(run.ID, "child run %s (of %s) has generation %d", run.ID, run.ParentID, in.Gen)
	}
}

func chaosJoin(out json.RawMessage) int {
	var o struct {
		Join *int `json:"join"`
	}
	if json.Unmarshal(out, &o) != nil || o.Join == nil {
		return -1
	}
	return *o.Join
}

func chaosOutputEqual(a, b ChaosWfOutput) bool {
	return a.Act == b.Act && a.Child == b.Child && a.Final == b.Final &&
		slices.Equal(a.Signals, b.Signals) && slices.Equal(a.Updates, b.Updates)
}

func listAllRuns(ctx context.Context, st store.Store) ([]*store.Run, error) {
	var all []*store.Run
	cursor := ""
	for {
		page, err := st.ListRuns(ctx, &store.ListRunsParams{Limit: 1000, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Runs...)
		if page.Next == "" {
			return all, nil
		}
		cursor = page.Next
	}
}

// historyCheck is what the checker found in one history.
type historyCheck struct {
	attempts, reexecutions int
	duplicates             []string // state changes found more than once
	missing                []string // state changes that should be there and are not
}

// tally counts history entries by what they record; an entry that
// records a state change already counted is a duplicate.
type tally struct {
	seen map[string]int
	c    *historyCheck
}

func (t *tally) once(what string) {
	if t.seen == nil {
		t.seen = map[string]int{}
	}
	t.seen[what]++
	if t.seen[what] == 2 {
		t.c.duplicates = append(t.c.duplicates, what+" is in the history more than once")
	}
}

func (t *tally) count(what string) int { return t.seen[what] }

func (t *tally) started(ev store.Event, what string) {
	t.c.attempts++
	var d struct {
		Reexecution bool `json:"reexecution"`
	}
	if json.Unmarshal(ev.Data, &d) == nil && d.Reexecution {
		t.c.reexecutions++
	}
	t.once(what)
}

const runEnd = "the end of the run (run_completed/failed/cancelled/continued)"

// run counts the entries that start and end a run.
func (t *tally) run(ev store.Event) bool {
	switch ev.Kind {
	case hephtype.EventRunStarted:
		t.once("run_started")
		return true
	case hephtype.EventRunCompleted, hephtype.EventRunFailed, hephtype.EventRunCancelled, hephtype.EventRunContinued:
		t.once(runEnd)
		return true
	}
	return false
}

// normJSON is a JSON value in one spelling (PostgreSQL's jsonb adds spaces).
func normJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkFlowHistory checks a chaos flow run's history: every step (every
// map element) completed exactly once, every attempt started, failed or
// retried at most once.
func checkFlowHistory(h []store.Event) historyCheck {
	var c historyCheck
	t := tally{c: &c}
	for _, ev := range h {
		if t.run(ev) {
			continue
		}
		switch ev.Kind {
		case hephtype.EventStepStarted:
			t.started(ev, fmt.Sprintf("step_started of step %s[%d] attempt %d", ev.Step, ev.Index, ev.Attempt))
		case hephtype.EventStepScheduled:
			t.once(fmt.Sprintf("step_scheduled of step %s", ev.Step))
		case hephtype.EventStepCompleted:
			t.once(fmt.Sprintf("step_completed of step %s", ev.Step))
		case hephtype.EventItemCompleted:
			t.once(fmt.Sprintf("map_item_completed of %s[%d]", ev.Step, ev.Index))
		case hephtype.EventStepFailed, hephtype.EventItemFailed, hephtype.EventStepRetrying:
			t.once(fmt.Sprintf("%s of step %s[%d] attempt %d", ev.Kind, ev.Step, ev.Index, ev.Attempt))
		case hephtype.EventMapExpanded, hephtype.EventStepSkipped, hephtype.EventStepCancelled:
			t.once(fmt.Sprintf("%s of step %s", ev.Kind, ev.Step))
		case hephtype.EventTimerFired:
			t.once(fmt.Sprintf("timer_fired of step %s[%d]", ev.Step, ev.Index))
		}
	}
	for _, s := range ChaosFlowSteps {
		if t.count("step_completed of step "+s) == 0 {
			c.missing = append(c.missing, "step "+s+" never completed")
		}
	}
	for i := range 3 {
		if t.count(fmt.Sprintf("map_item_completed of square[%d]", i)) == 0 {
			c.missing = append(c.missing, fmt.Sprintf("element square[%d] never completed", i))
		}
	}
	if t.count(runEnd) == 0 {
		c.missing = append(c.missing, "the run never ended")
	}
	return c
}

// checkWorkflowHistory checks a workflow's history: each command (by its
// sequence number) scheduled once and reported at most once, each timer
// fired at most once, each signal payload received once, each update id
// accepted and completed once; and, for a ChaosWorkflow run (r.WfIn),
// that every signal and update sent is there.
func checkWorkflowHistory(h []store.Event, r ChaosRun) historyCheck {
	var c historyCheck
	t := tally{c: &c}
	for _, ev := range h {
		if t.run(ev) {
			continue
		}
		switch ev.Kind {
		case hephtype.EventStepStarted:
			t.started(ev, fmt.Sprintf("step_started of activity #%d attempt %d", ev.Index, ev.Attempt))
		case hephtype.EventStepRetrying:
			t.once(fmt.Sprintf("step_retrying of activity #%d attempt %d", ev.Index, ev.Attempt))
		case hephtype.EventStepScheduled:
			t.once(fmt.Sprintf("step_scheduled of activity #%d", ev.Index))
		case hephtype.EventStepCompleted, hephtype.EventStepFailed:
			t.once(fmt.Sprintf("outcome (step_completed/step_failed) of activity #%d", ev.Index))
		case hephtype.EventTimerStarted, hephtype.EventTimerFired, hephtype.EventTimerCancelled:
			t.once(fmt.Sprintf("%s of timer #%d", ev.Kind, ev.Index))
		case hephtype.EventChildStarted, hephtype.EventChildCancelled:
			t.once(fmt.Sprintf("%s of child #%d", ev.Kind, ev.Index))
		case hephtype.EventChildCompleted, hephtype.EventChildFailed:
			t.once(fmt.Sprintf("outcome (child_completed/child_failed) of child #%d", ev.Index))
		case hephtype.EventSignalReceived:
			t.once(fmt.Sprintf("signal %q with payload %s", ev.Name, normJSON(ev.Data)))
		case hephtype.EventUpdateAccepted, hephtype.EventUpdateDone:
			t.once(fmt.Sprintf("%s of update id %q", ev.Kind, ev.Step))
		case hephtype.EventMarker:
			t.once(fmt.Sprintf("marker #%d", ev.Index))
		}
	}
	if t.count(runEnd) == 0 {
		c.missing = append(c.missing, "the run never ended")
	}
	for _, s := range r.Signals {
		raw, _ := json.Marshal(s)
		if t.count(fmt.Sprintf("signal %q with payload %s", ChaosSignal, raw)) == 0 {
			c.missing = append(c.missing, fmt.Sprintf("signal %q was sent and never received", s))
		}
	}
	for _, id := range r.Updates {
		for _, k := range []hephtype.EventKind{hephtype.EventUpdateAccepted, hephtype.EventUpdateDone} {
			if t.count(fmt.Sprintf("%s of update id %q", k, id)) == 0 {
				c.missing = append(c.missing, fmt.Sprintf("update %q has no %s", id, k))
			}
		}
	}
	return c
}

// describeHistory renders a history for a report, one entry a line.
func describeHistory(h []store.Event) string {
	var b strings.Builder
	for _, ev := range h {
		fmt.Fprintf(&b, "    #%d %s", ev.Seq, ev.Kind)
		if ev.Step != "" {
			fmt.Fprintf(&b, " step=%q", ev.Step)
		}
		fmt.Fprintf(&b, " index=%d attempt=%d", ev.Index, ev.Attempt)
		if ev.Name != "" {
			fmt.Fprintf(&b, " name=%q", ev.Name)
		}
		if len(ev.Data) > 0 && len(ev.Data) < 200 {
			fmt.Fprintf(&b, " data=%s", ev.Data)
		}
		if ev.Error != "" {
			fmt.Fprintf(&b, " error=%q", ev.Error)
		}
		if ev.Key != "" {
			fmt.Fprintf(&b, " key=%q", ev.Key)
		}
		fmt.Fprintf(&b, " at=%s\n", ev.At.Format(time.RFC3339Nano))
	}
	return b.String()
}
