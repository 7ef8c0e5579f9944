package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// The pool claims the tasks of its queues — those that exist when it
// starts, and those that commits create while it runs — and runs each
// exactly once, up to the queue's concurrency at a time; it leaves tasks
// of other queues and of handlers it does not serve alone; Stop ends the
// claim loops, with their telemetry.
func TestPoolRunsEachTaskOnce(t *testing.T) {
	const concurrency, perRun = 4, 25
	var (
		mu         sync.Mutex
		runs       = map[int64]int{}
		handoffs   = map[string]int{}
		running    int
		maxRunning int
		failures   []error
	)
	full := make(chan struct{}) // closed once concurrency tasks run at once
	done := make(chan int64, 2*perRun)
	r := newRig(t, rigOptions{queues: map[string]int{queue: concurrency, "idle": 0}, batch: 3}, func(r *rig) worker.Executor {
		return execFunc(func(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
			mu.Lock()
			runs[h.Task().ID]++
			handoffs[handoff]++
			running++
			if running > maxRunning {
				maxRunning = running
				if maxRunning == concurrency {
					close(full)
				}
			}
			mu.Unlock()
			// The first tasks wait until the pool runs as many at once as
			// it may: a pool that ran fewer would never get there.
			select {
			case <-full:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			err := r.complete(ctx, h)
			mu.Lock()
			running--
			if err != nil {
				failures = append(failures, fmt.Errorf("complete task %d: %w", h.Task().ID, err))
			}
			mu.Unlock()
			done <- h.Task().ID
			return nil, err
		})
	})
	var want []*store.Task
	want = append(want, r.createRun("before", stepTasks(queue, perRun)...)...)
	// Never claimed: a queue without a loop here, one not configured, and
	// a handler this process does not have.
	idle := r.createRun("idle", stepTask("idle", "x"))[0]
	other := r.createRun("other", stepTask("elsewhere", "x"))[0]
	foreign := stepTask(queue, "x")
	foreign.Handler = "not-here"
	unserved := r.createRun("unserved", foreign)[0]

	r.start()
	r.ev.wait(t, "worker.started", ofKind(telemetry.WorkerStarted))
	// Created while the pool runs: the commit wakes the loop (or serves its
	// standing claim).
	want = append(want, r.createRun("after", stepTasks(queue, perRun)...)...)

	for range want {
		recv(t, "a task to complete", done)
	}
	r.pool.Stop(context.Background())

	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("completions failed: %v", errors.Join(failures...))
	}
	if len(runs) != len(want) {
		t.Errorf("%d distinct tasks ran, want %d", len(runs), len(want))
	}
	for _, tk := range want {
		if n := runs[tk.ID]; n != 1 {
			t.Errorf("task %d ran %d times, want once", tk.ID, n)
		}
	}
	if maxRunning != concurrency {
		t.Errorf("at most %d tasks ran at once, want %d", maxRunning, concurrency)
	}
	if handoffs[queue] != len(want) {
		t.Errorf("Execute got hand-off queues %v, want %q for every task", handoffs, queue)
	}
	for _, tk := range []*store.Task{idle, other, unserved} {
		got := r.peek(tk.Queue, tk.ID)
		if got == nil || got.Owner != "" || got.Claims != 0 {
			t.Errorf("task %d of queue %q handler %q: %+v, want it untouched", tk.ID, tk.Queue, tk.Handler, got)
		}
	}
	for _, tk := range want {
		if got := r.peek(tk.Queue, tk.ID); got != nil {
			t.Errorf("task %d is still stored after its completion: %+v", tk.ID, got)
		}
	}

	started := r.ev.matching(ofKind(telemetry.WorkerStarted))
	stopped := r.ev.matching(ofKind(telemetry.WorkerStopped))
	if len(started) != 1 || started[0].Queue != queue || len(stopped) != 1 || stopped[0].Queue != queue {
		t.Errorf("worker events: started %+v, stopped %+v; want one of each for queue %q (none for a queue of concurrency 0)", started, stopped, queue)
	}
	if n := len(r.ev.matching(ofKind(telemetry.TaskStarted))); n != len(want) {
		t.Errorf("%d task.started events, want %d", n, len(want))
	}
	if n := len(r.ev.matching(ofKind(telemetry.TaskCompleted))); n != len(want) {
		t.Errorf("%d task.completed events, want %d", n, len(want))
	}
	if f := r.ev.matching(ofKind(telemetry.TaskFailed)); len(f) > 0 {
		t.Errorf("task.failed events: %+v", f)
	}
	ev := r.ev.matching(ofTask(telemetry.TaskCompleted, want[0].ID))[0]
	if ev.RunID != "before" || ev.Queue != queue || ev.Step != want[0].Step || ev.Workflow != "wf" || ev.Version != 1 || ev.Attempt != 1 {
		t.Errorf("task.completed event %+v does not describe task %+v", ev, want[0])
	}
}

func stepTasks(q string, n int) []store.NewTask {
	out := make([]store.NewTask, n)
	for i := range out {
		out[i] = stepTask(q, fmt.Sprintf("s%d", i))
	}
	return out
}

// A task that becomes ready later (a timer, a retry) is claimed once the
// clock reaches its ready time: the commit that created it told the pool,
// which wakes then rather than at its next poll (MinPollInterval, 100 ms
// jittered by ±20%, is later than the task's 50 ms).
func TestPoolClaimsTaskWhenItBecomesReady(t *testing.T) {
	const due = 50 * time.Millisecond
	calls := make(chan *call, 4)
	r := newRig(t, rigOptions{}, blocking(calls))
	r.start()
	r.waitIdle()
	later := stepTask(queue, "later")
	later.ReadyAt = t0.Add(due)
	tk := r.createRun("r", later)[0]
	if c := len(calls); c != 0 {
		t.Fatalf("%d tasks ran before the clock moved", c)
	}
	r.clk.Advance(due)
	c := recv(t, "the task due in 50 ms to run", calls)
	if c.h.Task().ID != tk.ID {
		t.Fatalf("ran task %d, want %d", c.h.Task().ID, tk.ID)
	}
	c.proceed <- nil
	if err := recv(t, "completion", c.result); err != nil {
		t.Fatal(err)
	}
}

// Kinds routes a task to the executor of its kind, passing the hand-off
// queue through; a kind it has no executor for is an error, which the
// pool reports as the task's failure.
func TestKindsRoutesByKind(t *testing.T) {
	var mu sync.Mutex
	got := map[store.TaskKind][]int64{}
	var direct []error
	record := func(r *rig) worker.Executor {
		return execFunc(func(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
			mu.Lock()
			got[h.Task().Kind] = append(got[h.Task().Kind], h.Task().ID)
			mu.Unlock()
			if handoff != queue {
				return nil, fmt.Errorf("hand-off queue %q, want %q", handoff, queue)
			}
			if h.Task().Kind == store.TaskStep {
				// Called directly: an empty table knows no kind.
				_, err := worker.Kinds{}.Execute(ctx, h, handoff)
				mu.Lock()
				direct = append(direct, err)
				mu.Unlock()
			}
			return nil, r.complete(ctx, h)
		})
	}
	r := newRig(t, rigOptions{}, func(r *rig) worker.Executor {
		e := record(r)
		return worker.Kinds{store.TaskStep: e, store.TaskActivity: e}
	})
	timer := store.NewTask{Queue: queue, Kind: store.TaskTimer, Step: "t", Index: -1, Handler: handler}
	activity := store.NewTask{Queue: queue, Kind: store.TaskActivity, Step: "act", Index: 3, Attempt: 1, Handler: handler}
	ts := r.createRun("r", stepTask(queue, "a"), activity, timer)
	r.start()
	for _, tk := range ts[:2] {
		r.ev.wait(t, "task.completed", ofTask(telemetry.TaskCompleted, tk.ID))
	}
	failed := r.ev.wait(t, "task.failed of the timer", ofTask(telemetry.TaskFailed, ts[2].ID))
	if failed.Err == nil || !strings.Contains(failed.Err.Error(), `"timer"`) {
		t.Errorf("timer task failed with %v, want an error naming its kind", failed.Err)
	}
	if worker.Expected(failed.Err) {
		t.Errorf("Expected(%v) = true: an unknown kind is a real error", failed.Err)
	}
	r.pool.Stop(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if len(got[store.TaskStep]) != 1 || got[store.TaskStep][0] != ts[0].ID ||
		len(got[store.TaskActivity]) != 1 || got[store.TaskActivity][0] != ts[1].ID || len(got[store.TaskTimer]) != 0 {
		t.Errorf("executed by kind: %v; want step %d, activity %d, no timer", got, ts[0].ID, ts[1].ID)
	}
	if len(direct) != 1 || direct[0] == nil || !strings.Contains(direct[0].Error(), `"step"`) {
		t.Errorf("Kinds{}.Execute returned %v, want an error naming the kind", direct)
	}
	// The failed timer task is not given back: its lease runs out.
	if tk := r.peek(queue, ts[2].ID); tk == nil || tk.Owner != owner {
		t.Errorf("timer task after its failure: %+v, want it still leased to %s", tk, owner)
	}
}

// Stop lets running tasks finish: it stops claiming at once, and waits
// (the shutdown timeout has not passed on the fake clock) until they
// completed, with their contexts intact.
func TestStopDrainsRunningTasks(t *testing.T) {
	calls := make(chan *call, 4)
	r := newRig(t, rigOptions{queues: map[string]int{queue: 2}}, blocking(calls))
	ts := r.createRun("r", stepTask(queue, "a"), stepTask(queue, "b"))
	r.start()
	c1, c2 := recv(t, "a task", calls), recv(t, "another task", calls)
	for _, c := range []*call{c1, c2} {
		if c.handoff != queue {
			t.Errorf("task %d got hand-off queue %q, want %q", c.h.Task().ID, c.handoff, queue)
		}
	}
	stopped := r.stopAsync(context.Background())
	r.ev.wait(t, "worker.stopped", ofKind(telemetry.WorkerStopped))
	// No longer claiming: a task created now stays in the store.
	late := r.createRun("late", stepTask(queue, "c"))[0]
	select {
	case <-stopped:
		t.Fatal("Stop returned while tasks were running and the shutdown timeout had not passed")
	default:
	}
	for _, c := range []*call{c1, c2} {
		if err := c.ctx.Err(); err != nil {
			t.Fatalf("task %d was cancelled during the drain: %v", c.h.Task().ID, context.Cause(c.ctx))
		}
		c.proceed <- nil
		if err := recv(t, "completion", c.result); err != nil {
			t.Fatalf("complete task %d during the drain: %v", c.h.Task().ID, err)
		}
	}
	closed(t, "Stop to return", stopped)
	for _, tk := range ts {
		r.ev.wait(t, "task.completed", ofTask(telemetry.TaskCompleted, tk.ID))
		if got := r.peek(queue, tk.ID); got != nil {
			t.Errorf("task %d still stored after its completion: %+v", tk.ID, got)
		}
	}
	if got := r.peek(queue, late.ID); got == nil || got.Owner != "" {
		t.Errorf("task created during the drain: %+v, want it stored and unclaimed", got)
	}
	if len(calls) != 0 {
		t.Errorf("%d more tasks ran after Stop", len(calls))
	}
}

// Stop with a context that is done cancels running tasks at once with
// ErrShutdown, and gives them back: another worker can claim them at
// once, though their lease had not run out.
func TestStopCancelsAndGivesBack(t *testing.T) {
	t.Run("ctx done", func(t *testing.T) {
		testStopCancels(t, rigOptions{}, func(r *rig) chan struct{} { return r.stopAsync(doneContext()) })
	})
	t.Run("shutdown timeout", func(t *testing.T) {
		// Shorter than the heartbeat interval and the watchdog's deadline,
		// so that the Advance below concerns Stop only.
		const timeout = 5 * time.Second
		testStopCancels(t, rigOptions{shutdown: timeout}, func(r *rig) chan struct{} {
			stopped := r.stopAsync(context.Background())
			r.clk.waitAfter(t, timeout)
			select {
			case <-stopped:
				t.Fatal("Stop returned before the shutdown timeout while a task was running")
			default:
			}
			r.clk.Advance(timeout)
			return stopped
		})
	})
}

func testStopCancels(t *testing.T, o rigOptions, stop func(r *rig) chan struct{}) {
	calls := make(chan *call, 4)
	r := newRig(t, o, blocking(calls))
	tk := r.createRun("r", stepTask(queue, "a"))[0]
	r.start()
	c := recv(t, "the task", calls)
	stopped := stop(r)
	wantCause(t, c, worker.ErrShutdown)
	closed(t, "Stop to return", stopped)
	failed := r.ev.wait(t, "task.failed", ofTask(telemetry.TaskFailed, tk.ID))
	if !errors.Is(failed.Err, worker.ErrShutdown) || !errors.Is(failed.Err, context.Canceled) || !worker.Expected(failed.Err) {
		t.Errorf("task failed with %v, want the executor's error joined with ErrShutdown, an expected error", failed.Err)
	}
	if got := r.peek(queue, tk.ID); got == nil || got.Owner != "" || got.Claims != 1 {
		t.Fatalf("task after shutdown: %+v, want it stored, unleased, claimed once", got)
	}
	stolen := r.steal(queue)
	if len(stolen) != 1 || stolen[0].ID != tk.ID {
		t.Fatalf("another worker claimed %v, want task %d", ids(stolen), tk.ID)
	}
}

// An executor may return tasks that its completing commit claimed: the
// first of the task's queue runs next in the same slot, the rest are given
// back.
func TestHandoffRunsFirstAndReleasesRest(t *testing.T) {
	var mu sync.Mutex
	var order []int64
	var claimErr error
	// The pool serves only handler h; the tasks handed off have another
	// handler, so only a hand-off can run them here, and nothing but the
	// test claims what is given back.
	r := newRig(t, rigOptions{queues: map[string]int{queue: 1}}, func(r *rig) worker.Executor {
		return execFunc(func(ctx context.Context, h *worker.Held, handoff string) ([]*store.Task, error) {
			mu.Lock()
			order = append(order, h.Task().ID)
			first := len(order) == 1
			mu.Unlock()
			var claimed []*store.Task
			if first {
				// Claim as the hand-off of a completion would (priority
				// order: y, x1, x2).
				var err error
				claimed, err = r.db.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{queue, "other"}, Owner: owner, Limit: 10, LeaseFor: leaseFor, Now: r.clk.Now()})
				if err != nil {
					mu.Lock()
					claimErr = err
					mu.Unlock()
				}
			}
			return claimed, r.complete(ctx, h)
		})
	})
	foreign := func(q, step string, prio int) store.NewTask {
		nt := stepTask(q, step)
		nt.Handler, nt.Priority = "x", prio
		return nt
	}
	ts := r.createRun("r", stepTask(queue, "a"), foreign(queue, "x1", 2), foreign(queue, "x2", 1), foreign("other", "y", 3))
	a, x1, x2, y := ts[0], ts[1], ts[2], ts[3]
	r.start()
	r.ev.wait(t, "task.completed of the hand-off", ofTask(telemetry.TaskCompleted, x1.ID))
	r.ev.wait(t, "task.completed of the first task", ofTask(telemetry.TaskCompleted, a.ID))
	mu.Lock()
	if claimErr != nil {
		t.Fatal(claimErr)
	}
	if len(order) != 2 || order[0] != a.ID || order[1] != x1.ID {
		t.Errorf("ran tasks %v, want %d then the hand-off %d", order, a.ID, x1.ID)
	}
	mu.Unlock()
	// Given back before the hand-off ran: claimable at once.
	if got, want := ids(r.steal(queue, "other")), ids([]*store.Task{x2, y}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("another worker claimed %v, want the tasks given back %v", got, want)
	}
}

// A hand-off returned while the pool stops is not run: every claimed task
// is given back.
func TestHandoffDuringStopIsGivenBack(t *testing.T) {
	calls := make(chan *call, 4)
	r := newRig(t, rigOptions{queues: map[string]int{queue: 1}}, blocking(calls))
	nt := stepTask(queue, "x")
	nt.Handler = "x" // claimed only by the test
	ts := r.createRun("r", stepTask(queue, "a"), nt)
	r.start()
	c := recv(t, "the first task", calls)
	stopped := r.stopAsync(context.Background())
	r.ev.wait(t, "worker.stopped", ofKind(telemetry.WorkerStopped))
	claimed, err := r.db.ClaimTasks(context.Background(), &store.ClaimParams{Queues: []string{queue}, Owner: owner, Limit: 10, LeaseFor: leaseFor, Now: r.clk.Now()})
	if err != nil || len(claimed) != 1 || claimed[0].ID != ts[1].ID {
		t.Fatalf("claim the hand-off: %v, %v", ids(claimed), err)
	}
	c.proceed <- claimed
	if err := recv(t, "completion", c.result); err != nil {
		t.Fatal(err)
	}
	closed(t, "Stop to return", stopped)
	if len(calls) != 0 {
		t.Fatalf("the hand-off ran during the drain")
	}
	if got := ids(r.steal(queue)); len(got) != 1 || got[0] != ts[1].ID {
		t.Errorf("another worker claimed %v, want the hand-off given back, %d", got, ts[1].ID)
	}
}

// Start is idempotent; Stop is safe before Start and twice; Start after
// Stop fails.
func TestStartStopLifecycle(t *testing.T) {
	r := newRig(t, rigOptions{}, func(r *rig) worker.Executor {
		return execFunc(func(ctx context.Context, h *worker.Held, _ string) ([]*store.Task, error) {
			return nil, r.complete(ctx, h)
		})
	})
	r.start()
	r.start()
	tk := r.createRun("r", stepTask(queue, "a"))[0]
	r.ev.wait(t, "task.completed", ofTask(telemetry.TaskCompleted, tk.ID))
	r.pool.Stop(context.Background())
	r.pool.Stop(context.Background())
	if n := len(r.ev.matching(ofKind(telemetry.WorkerStarted))); n != 1 {
		t.Errorf("%d worker.started events after two Starts, want 1", n)
	}
	if n := len(r.ev.matching(ofKind(telemetry.WorkerStopped))); n != 1 {
		t.Errorf("%d worker.stopped events after two Stops, want 1", n)
	}
	if err := r.pool.Start(context.Background()); !errors.Is(err, commit.ErrClosed) {
		t.Errorf("Start after Stop: %v, want ErrClosed", err)
	}

	never := newRig(t, rigOptions{}, func(*rig) worker.Executor { return worker.Kinds{} })
	never.pool.Stop(context.Background())
	if err := never.pool.Start(context.Background()); !errors.Is(err, commit.ErrClosed) {
		t.Errorf("Start after a Stop before Start: %v, want ErrClosed", err)
	}
	if n := len(never.ev.matching(ofKind(telemetry.WorkerStarted))); n != 0 {
		t.Errorf("a pool stopped before Start emitted %d worker.started events", n)
	}
}
