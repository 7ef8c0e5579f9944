package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/maintenance"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// maxTicks bounds, in steps of the fake clock, how long a test waits for
// a check: the loop checks at least every 1.2 lease, that is every second
// tick, so a handful of ticks is plenty.
const maxTicks = 20

// unservedService starts a service serving queue "q" (and not "idle"),
// with handler flow:x@1, and waits until its registry loop sleeps.
func unservedService(e *env) *maintenance.Service {
	e.t.Helper()
	s := e.service(func(c *maintenance.Config) {
		c.WorkerID = "w-test"
		c.Queues = map[string]int{"q": 2, "idle": 0}
		c.Handlers = func() []string { return []string{"flow:x@1"} }
	})
	s.Start(context.Background())
	e.waitAsleep(1)
	return s
}

// tickUntil advances the clock a tick at a time, each time waiting for the
// registry loop to finish its wake-up, until cond holds; it fails the test
// after maxTicks.
func (e *env) tickUntil(what string, cond func() bool) {
	e.t.Helper()
	for range maxTicks {
		e.step(tick, 1)
		if cond() {
			return
		}
	}
	e.t.Fatalf("after %d ticks (clock at %v): %s did not happen", maxTicks, e.clk.Now(), what)
}

func (e *env) marked(id string) bool {
	e.t.Helper()
	return e.get(id).Condition.Code == hephtype.ConditionUnserved
}

// A run with a task that no live worker of its queue can run is marked
// unserved once the task has waited more than a lease, with a message
// naming the queue, the task and what is missing, and a RunCondition
// event; tasks that some live worker of the queue can run are not.
func TestUnservedMarksRunsNoLiveWorkerCanRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	far := t0.Add(1000 * time.Hour)
	// Other processes: one of queue "q" with flow:y@1; one with flow:z@1
	// but of another queue; one of "q" with flow:e@1 whose record expires
	// before the first check.
	e.register(&store.Worker{ID: "w-helper", Queues: []string{"q"}, Handlers: []string{"flow:y@1"}, StartedAt: t0, SeenAt: t0, ExpiresAt: far})
	e.register(&store.Worker{ID: "w-other", Queues: []string{"other"}, Handlers: []string{"flow:z@1"}, StartedAt: t0, SeenAt: t0, ExpiresAt: far})
	e.register(&store.Worker{ID: "w-expired", Queues: []string{"q"}, Handlers: []string{"flow:e@1"}, StartedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(lease / 2)})

	// A task that becomes ready half a lease after the others.
	young := stepTask("q", "s", "flow:x@2")
	young.ReadyAt = t0.Add(lease / 2)
	activity := store.NewTask{Queue: "q", Kind: store.TaskActivity, Step: "act", Index: 3, Attempt: 1, Handler: store.ActivityHandler("act")}
	tasks := e.create(
		newRun("unserved", hephtype.StatusRunning, stepTask("q", "charge", store.FlowHandler("x", 2))),
		newRun("activity", hephtype.StatusRunning, activity),
		newRun("wrong-queue", hephtype.StatusRunning, stepTask("q", "s", "flow:z@1")),
		newRun("expired", hephtype.StatusRunning, stepTask("q", "s", "flow:e@1")),
		newRun("served", hephtype.StatusRunning, stepTask("q", "s", "flow:x@1")),
		newRun("served-elsewhere", hephtype.StatusRunning, stepTask("q", "s", "flow:y@1")),
		newRun("anyone", hephtype.StatusRunning, stepTask("q", "s", "")),
		newRun("idle-queue", hephtype.StatusRunning, stepTask("idle", "s", "flow:x@2")),
		newRun("foreign-queue", hephtype.StatusRunning, stepTask("nobody", "s", "flow:x@2")),
		newRun("finished", hephtype.StatusCompleted, stepTask("q", "s", "flow:x@2")),
		newRun("young", hephtype.StatusRunning, young),
	)
	taskOf := map[string]*store.Task{"unserved": tasks[0][0], "activity": tasks[1][0], "wrong-queue": tasks[2][0], "expired": tasks[3][0]}
	unservedService(e)

	e.tickUntil(`run "unserved" marked`, func() bool {
		if !e.marked("unserved") && len(e.eventsOf(telemetry.RunCondition, "")) > 0 {
			t.Fatalf("RunCondition events before the run was marked: %+v", e.eventsOf(telemetry.RunCondition, ""))
		}
		return e.marked("unserved")
	})
	markedAt := e.clk.Now()

	// All tasks were ready at t0: one check marks every stranded run.
	for id, tk := range taskOf {
		r := e.get(id)
		c := r.Condition
		if c.Code != hephtype.ConditionUnserved {
			t.Errorf("run %s: condition %+v, want unserved", id, c)
			continue
		}
		if !c.Since.Equal(markedAt) {
			t.Errorf("run %s: condition since %v, want %v (when the check ran)", id, c.Since, markedAt)
		}
		if !c.Since.After(t0.Add(lease)) {
			t.Errorf("run %s marked at %v, when its task (ready at %v) had not waited a lease (%v)", id, c.Since, t0, lease)
		}
		if !strings.Contains(c.Message, `queue "q"`) || !strings.Contains(c.Message, store.DescribeHandler(tk.Handler)) ||
			!strings.Contains(c.Message, store.DescribeTask(tk)) {
			t.Errorf("run %s: condition message %q does not name the queue, the task (%s) and what is missing (%s)",
				id, c.Message, store.DescribeTask(tk), store.DescribeHandler(tk.Handler))
		}
		if r.Status != hephtype.StatusRunning {
			t.Errorf("run %s: status %s after the mark, want it unchanged", id, r.Status)
		}
		evs := e.eventsOf(telemetry.RunCondition, id)
		if len(evs) != 1 {
			t.Errorf("run %s: %d RunCondition events, want 1: %+v", id, len(evs), evs)
			continue
		}
		ev := evs[0]
		if ev.Condition != hephtype.ConditionUnserved || ev.Err == nil || ev.Err.Error() != c.Message ||
			ev.Queue != "q" || ev.TaskID != tk.ID || ev.Step != tk.Step || ev.Index != tk.Index ||
			ev.Workflow != "wf" || ev.Version != 1 || !ev.Time.Equal(markedAt) {
			t.Errorf("run %s: RunCondition event %+v, want unserved of task %d (step %q, index %d, queue q, wf v1) with the message at %v",
				id, ev, tk.ID, tk.Step, tk.Index, markedAt)
		}
	}
	// The young task is marked only once it has waited a lease too.
	if c := e.get("young").Condition; !c.IsZero() && !c.Since.After(young.ReadyAt.Add(lease)) {
		t.Errorf("run young marked at %v, when its task (ready at %v) had not waited a lease", c.Since, young.ReadyAt)
	}
	// The messages spell what is missing the way people read it.
	if msg := e.get("unserved").Condition.Message; !strings.Contains(msg, `flow "x" version 2`) || !strings.Contains(msg, `step "charge"`) {
		t.Errorf("condition message %q, want it to name step \"charge\" and flow \"x\" version 2", msg)
	}
	if msg := e.get("activity").Condition.Message; !strings.Contains(msg, `activity "act"`) {
		t.Errorf("condition message %q, want it to name activity \"act\"", msg)
	}
	for _, id := range []string{"served", "served-elsewhere", "anyone", "idle-queue", "foreign-queue", "finished"} {
		if c := e.get(id).Condition; !c.IsZero() {
			t.Errorf("run %s: condition %+v, want none", id, c)
		}
		if evs := e.eventsOf(telemetry.RunCondition, id); len(evs) != 0 {
			t.Errorf("run %s: RunCondition events %+v, want none", id, evs)
		}
	}
	if n := len(e.eventsOf(telemetry.RunCondition, "")); n != len(taskOf)+len(e.eventsOf(telemetry.RunCondition, "young")) {
		t.Errorf("%d RunCondition events, want %d (and one for young if marked)", n, len(taskOf))
	}
	e.tickUntil(`run "young" marked`, func() bool { return e.marked("young") })
	if c := e.get("young").Condition; !c.Since.After(young.ReadyAt.Add(lease)) {
		t.Errorf("run young marked at %v, when its task (ready at %v) had not waited a lease", c.Since, young.ReadyAt)
	}
	for id := range taskOf {
		if evs := e.eventsOf(telemetry.RunCondition, id); len(evs) != 1 {
			t.Errorf("run %s: %d RunCondition events after later checks, want 1", id, len(evs))
		}
	}
	if msgs := e.log.unexpected("a run waits for a worker that can run it"); len(msgs) > 0 {
		t.Errorf("unexpected warnings or errors logged: %q", msgs)
	}
}

// Marking a run again with the same message writes nothing: the run (its
// condition's Since, its update time) stays as it is and no event is
// emitted, check after check, while later stranded runs are marked.
func TestUnservedMarkIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(newRun("first", hephtype.StatusRunning, stepTask("q", "s", "flow:x@2")))
	unservedService(e)
	e.tickUntil(`run "first" marked`, func() bool { return e.marked("first") })
	before := e.get("first")

	// A run stranded later is marked by later checks, which find "first"
	// stranded too.
	e.create(newRun("second", hephtype.StatusRunning, stepTask("q", "s", "flow:x@3")))
	e.tickUntil(`run "second" marked`, func() bool { return e.marked("second") })
	// And a few checks more (one at least every two ticks).
	for range 6 {
		e.step(tick, 1)
	}
	after := e.get("first")
	if after.Condition != before.Condition {
		t.Errorf("condition of run first changed from %+v to %+v", before.Condition, after.Condition)
	}
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.Seq != before.Seq {
		t.Errorf("run first was written again: updated at %v (was %v), seq %d (was %d)", after.UpdatedAt, before.UpdatedAt, after.Seq, before.Seq)
	}
	if evs := e.eventsOf(telemetry.RunCondition, "first"); len(evs) != 1 {
		t.Errorf("%d RunCondition events for run first, want 1: %+v", len(evs), evs)
	}
	if evs := e.eventsOf(telemetry.RunCondition, "second"); len(evs) != 1 {
		t.Errorf("%d RunCondition events for run second, want 1: %+v", len(evs), evs)
	}
	if c := e.get("second").Condition; !strings.Contains(c.Message, `flow "x" version 3`) {
		t.Errorf("condition of run second: %+v, want it to name flow \"x\" version 3", c)
	}
}

// When what keeps a marked run waiting changes (its stranded task is now
// served, another is not), the message follows and Since stays when the
// run was first marked.
func TestUnservedNewMessageKeepsSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(newRun("m", hephtype.StatusRunning, stepTask("q", "a", "flow:x@3")))
	unservedService(e)
	e.tickUntil(`run "m" marked`, func() bool { return e.marked("m") })
	first := e.get("m").Condition
	if !strings.Contains(first.Message, `flow "x" version 3`) {
		t.Fatalf("first condition %+v, want it to name flow \"x\" version 3", first)
	}

	// A worker with flow:x@3 joins the queue; the run gets an activity
	// task that no worker has.
	e.register(&store.Worker{ID: "w-new", Queues: []string{"q"}, Handlers: []string{"flow:x@3"},
		StartedAt: e.clk.Now(), SeenAt: e.clk.Now(), ExpiresAt: e.clk.Now().Add(1000 * time.Hour)})
	e.update("m", &store.Update{Tasks: []store.NewTask{
		{Queue: "q", Kind: store.TaskActivity, Step: "act", Index: 1, Attempt: 1, Handler: store.ActivityHandler("act")},
	}})
	e.tickUntil("the condition of run m to name the activity", func() bool {
		return strings.Contains(e.get("m").Condition.Message, `activity "act"`)
	})
	c := e.get("m").Condition
	if c.Code != hephtype.ConditionUnserved || !c.Since.Equal(first.Since) {
		t.Fatalf("condition after the change %+v, want unserved since %v", c, first.Since)
	}
	if strings.Contains(c.Message, "flow") {
		t.Errorf("condition message %q still names the flow, which is served now", c.Message)
	}
	evs := e.eventsOf(telemetry.RunCondition, "m")
	if len(evs) != 2 || evs[1].Err == nil || evs[1].Err.Error() != c.Message {
		t.Fatalf("RunCondition events for run m: %+v, want a second one with the new message", evs)
	}
}

// A run that ends after its mark is not marked again, nor reported.
func TestUnservedSkipsRunsThatEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.create(newRun("r", hephtype.StatusRunning, stepTask("q", "a", "flow:x@3")))
	unservedService(e)
	e.tickUntil(`run "r" marked`, func() bool { return e.marked("r") })
	// It is cancelled (its task left behind, so it is still stranded),
	// its condition cleared.
	e.update("r", &store.Update{Status: hephtype.StatusCancelled, Condition: &store.Condition{}})
	for range 6 {
		e.step(tick, 1)
	}
	if c := e.get("r").Condition; !c.IsZero() {
		t.Fatalf("condition of the cancelled run: %+v, want none", c)
	}
	if evs := e.eventsOf(telemetry.RunCondition, "r"); len(evs) != 1 {
		t.Fatalf("%d RunCondition events for run r, want 1 (before it ended)", len(evs))
	}
}

// Each check marks every stranded run of the queue, however many tasks
// one run has stranded: a run with 100 or more (a map step over 100
// elements of a flow version nobody serves) used to fill the page of 100
// tasks and hide every run stranded after it; the check now asks for one
// task per run (StrandedParams.PerRun).
func TestUnservedManyTasksOfOneRunDoNotHideOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var many []store.NewTask
	for i := range 100 {
		tk := stepTask("q", "map", "flow:x@2")
		tk.Index = i
		many = append(many, tk)
	}
	e.create(newRun("big", hephtype.StatusRunning, many...))
	e.clk.Advance(time.Second)
	e.create(newRun("small", hephtype.StatusRunning, stepTask("q", "s", "flow:x@3")))
	unservedService(e)
	e.tickUntil(`run "big" marked`, func() bool { return e.marked("big") })
	e.tickUntil(`run "small" marked`, func() bool { return e.marked("small") })
}
