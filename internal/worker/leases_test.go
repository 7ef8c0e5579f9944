package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// Heartbeat details a task records reach the store with the next
// heartbeat, which also extends the lease: the task keeps running past
// the end of the lease it was claimed with. A task given back carries
// them to its next claim.
func TestHeartbeatRecordsDetailsAndExtendsLease(t *testing.T) {
	calls := make(chan *call, 4)
	r := newRig(t, rigOptions{}, blocking(calls))
	nt := stepTask(queue, "a")
	nt.Details = json.RawMessage(`{"seed":1}`)
	tk := r.createRun("r", nt)[0]
	r.start()
	c := recv(t, "the task", calls)
	if got := string(c.h.Details()); got != `{"seed":1}` {
		t.Errorf("Details() at start = %s, want those the task was claimed with", got)
	}
	if !c.h.Task().LeaseUntil.Equal(t0.Add(leaseFor)) || c.h.Task().Owner != owner {
		t.Errorf("held task %+v, want it leased to %s until t0+%v", c.h.Task(), owner, leaseFor)
	}
	progress := json.RawMessage(`{"progress":42}`)
	c.h.RecordDetails(progress)
	if got := string(c.h.Details()); got != string(progress) {
		t.Errorf("Details() after RecordDetails = %s, want %s", got, progress)
	}
	// Nothing is written before the heartbeat.
	if got := r.peek(queue, tk.ID); got == nil || string(got.Details) != `{"seed":1}` {
		t.Fatalf("stored task before the heartbeat: %+v", got)
	}

	// Each heartbeat extends the lease to its time plus the lease
	// duration; the third runs past the lease the task was claimed with.
	r.clk.waitUntil(t, t0.Add(beatEvery))
	for i := 1; i <= 3; i++ {
		r.clk.Advance(beatEvery)
		now := t0.Add(time.Duration(i) * beatEvery)
		eventually(t, fmt.Sprintf("heartbeat %d", i), func() error {
			got := r.peek(queue, tk.ID)
			if got == nil || string(got.Details) != string(progress) || !got.LeaseUntil.Equal(now.Add(leaseFor)) || got.Owner != owner {
				return fmt.Errorf("stored task %+v, want details %s, leased to %s until %v", got, progress, owner, now.Add(leaseFor))
			}
			return nil
		})
		// The heartbeat of the next round is sent only after this one's
		// outcome was applied, and after the watchdog checked the time of
		// this round: the task must still run.
		if err := c.ctx.Err(); err != nil {
			t.Fatalf("task stopped at t0+%v though its lease was extended: %v", now.Sub(t0), context.Cause(c.ctx))
		}
	}
	if got := string(c.h.Details()); got != string(progress) {
		t.Errorf("Details() after the heartbeat = %s, want %s", got, progress)
	}

	// Given back at shutdown, the task keeps its details for its next
	// claim.
	r.pool.Stop(doneContext())
	wantCause(t, c, worker.ErrShutdown)
	stolen := r.steal(queue)
	if len(stolen) != 1 || stolen[0].ID != tk.ID || string(stolen[0].Details) != string(progress) || stolen[0].Claims != 2 {
		t.Fatalf("claimed again: %+v, want task %d with details %s, its second claim", stolen, tk.ID, progress)
	}
}

// When another worker holds the task's lease, the next heartbeat learns it
// and cancels the task with ErrLeaseLost; its late completion is refused,
// and the pool does not give back the lease it no longer has.
func TestLeaseLostCancelsTask(t *testing.T) {
	calls := make(chan *call, 4)
	r := newRig(t, rigOptions{}, blocking(calls))
	tk := r.createRun("r", stepTask(queue, "a"))[0]
	r.start()
	c := recv(t, "the task", calls)
	// The pool may not claim the task again once it is released below:
	// only the other worker does.
	r.setHandlers("none")
	lease := c.h.Task().Lease()
	if err := r.db.ReleaseTasks(context.Background(), []store.Lease{lease}); err != nil {
		t.Fatal(err)
	}
	stolen := r.steal(queue)
	if len(stolen) != 1 || stolen[0].ID != tk.ID || stolen[0].Token == lease.Token {
		t.Fatalf("another worker claimed %+v, want task %d with a new token", stolen, tk.ID)
	}
	if err := c.ctx.Err(); err != nil {
		t.Fatalf("cancelled before any heartbeat: %v", context.Cause(c.ctx))
	}

	r.clk.waitUntil(t, t0.Add(beatEvery))
	r.clk.Advance(beatEvery)
	wantCause(t, c, worker.ErrLeaseLost)
	failed := r.ev.wait(t, "task.failed", ofTask(telemetry.TaskFailed, tk.ID))
	if !errors.Is(failed.Err, worker.ErrLeaseLost) || !worker.Expected(failed.Err) {
		t.Errorf("task failed with %v, want ErrLeaseLost, an expected error", failed.Err)
	}
	if err := r.complete(context.Background(), c.h); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("completion with the lost lease: %v, want store.ErrLeaseLost", err)
	}
	if got := r.peek(queue, tk.ID); got == nil || got.Owner != "thief" || got.Token != stolen[0].Token {
		t.Errorf("task after the loss: %+v, want it still leased to the other worker", got)
	}
}

// hbStore is a store whose heartbeats the test controls.
type hbStore struct {
	store.Store
	calls chan *store.HeartbeatParams
	beat  func(ctx context.Context, p *store.HeartbeatParams) ([]int64, error)
}

func (s *hbStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	select {
	case s.calls <- p:
	default:
	}
	return s.beat(ctx, p)
}

// When the heartbeat cannot confirm a lease (the call hangs, or fails),
// the watchdog stops the task once the lease's end is within
// LeaseDuration/5, with ErrLeaseExpiring, and leaves the lease to run out:
// no other worker claims the task before it does.
func TestWatchdogStopsTaskWhoseLeaseIsNotConfirmed(t *testing.T) {
	deadline := t0.Add(leaseFor - leaseFor/5) // t0+24s
	t.Run("heartbeat hangs", func(t *testing.T) {
		// A heartbeat interval of 20 s puts the first beat before the
		// deadline and the next one after it.
		testWatchdog(t, 20*time.Second, func(ctx context.Context, _ *store.HeartbeatParams) ([]int64, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, deadline)
	})
	t.Run("heartbeat fails", func(t *testing.T) {
		testWatchdog(t, beatEvery, func(context.Context, *store.HeartbeatParams) ([]int64, error) {
			return nil, errors.New("store unreachable")
		}, deadline)
	})
}

func testWatchdog(t *testing.T, interval time.Duration, beat func(context.Context, *store.HeartbeatParams) ([]int64, error), deadline time.Time) {
	calls := make(chan *call, 4)
	hs := &hbStore{calls: make(chan *store.HeartbeatParams, 16), beat: beat}
	r := newRig(t, rigOptions{heartbeat: interval, wrap: func(s store.Store) store.Store { hs.Store = s; return hs }}, blocking(calls))
	tk := r.createRun("r", stepTask(queue, "a"))[0]
	r.start()
	c := recv(t, "the task", calls)
	r.clk.waitUntil(t, t0.Add(interval))
	r.clk.Advance(interval)
	p := recv(t, "a heartbeat", hs.calls)
	if len(p.Leases) != 1 || p.Leases[0] != c.h.Task().Lease() || !p.Until.Equal(t0.Add(interval+leaseFor)) {
		t.Errorf("heartbeat %+v, want the task's lease until t0+%v", p, interval+leaseFor)
	}
	if err := c.ctx.Err(); err != nil {
		t.Fatalf("stopped at t0+%v, before the deadline: %v", interval, context.Cause(c.ctx))
	}
	r.clk.Advance(deadline.Sub(r.clk.Now()))
	wantCause(t, c, worker.ErrLeaseExpiring)
	failed := r.ev.wait(t, "task.failed", ofTask(telemetry.TaskFailed, tk.ID))
	if !errors.Is(failed.Err, worker.ErrLeaseExpiring) || !worker.Expected(failed.Err) {
		t.Errorf("task failed with %v, want ErrLeaseExpiring, an expected error", failed.Err)
	}
	// The lease is left to run out, not given back.
	if got := r.peek(queue, tk.ID); got == nil || got.Owner != owner || !got.LeaseUntil.Equal(t0.Add(leaseFor)) {
		t.Errorf("task after the watchdog: %+v, want it leased to %s until t0+%v", got, owner, leaseFor)
	}
	claim := func(at time.Time) []*store.Task {
		ts, err := r.db.ClaimTasks(context.Background(), &store.ClaimParams{Queues: []string{queue}, Owner: "thief", Limit: 10, LeaseFor: time.Hour, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	if ts := claim(r.clk.Now()); len(ts) != 0 {
		t.Errorf("another worker claimed %v while the stopped task's lease lasted", ids(ts))
	}
	if ts := claim(t0.Add(leaseFor)); len(ts) != 1 || ts[0].ID != tk.ID {
		t.Errorf("another worker claimed %v once the lease ended, want task %d", ids(ts), tk.ID)
	}
}

// A commit of this process that cancels tasks of a run (Update.Cancel)
// cancels the code running them here, with ErrRunCancelled, before the
// commit's caller returns; tasks the match does not select keep running.
func TestAfterCommitCancelsMatchingTasks(t *testing.T) {
	calls := make(chan *call, 8)
	r := newRig(t, rigOptions{}, blocking(calls))
	elem := func(i int) store.NewTask {
		nt := stepTask(queue, "m")
		nt.Index = i
		return nt
	}
	r.createRun("r", stepTask(queue, "a"), elem(2), elem(3))
	r.createRun("r2", stepTask(queue, "a"))
	r.start()
	byKey := map[string]*call{}
	for range 4 {
		c := recv(t, "a task", calls)
		byKey[fmt.Sprintf("%s/%s/%d", c.h.Task().RunID, c.h.Task().Step, c.h.Task().Index)] = c
	}
	cancel := func(run string, m store.TaskMatch) {
		t.Helper()
		_, err := r.commit.Submit(context.Background(), store.Change{RunID: run, Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{Cancel: []store.TaskMatch{m}}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, cancelled ...string) {
		t.Helper()
		want := map[string]bool{}
		for _, k := range cancelled {
			want[k] = true
		}
		for k, c := range byKey {
			switch err := context.Cause(c.ctx); {
			case want[k] && !errors.Is(err, worker.ErrRunCancelled):
				t.Errorf("%s: task %s has cause %v, want ErrRunCancelled", when, k, err)
			case !want[k] && err != nil:
				t.Errorf("%s: task %s was cancelled: %v", when, k, err)
			}
		}
	}
	cancel("r", store.TaskMatch{Step: "m", Index: 3})
	check("after cancelling element 3 of m", "r/m/3")
	cancel("r", store.TaskMatch{Kind: store.TaskStep, Index: -1})
	check("after cancelling the run's steps", "r/m/3", "r/a/-1", "r/m/2")
	for _, k := range []string{"r/m/3", "r/a/-1", "r/m/2"} {
		c := byKey[k]
		if err := recv(t, "the cancelled task to return", c.result); !errors.Is(err, context.Canceled) {
			t.Errorf("task %s returned %v", k, err)
		}
		failed := r.ev.wait(t, "task.failed", ofTask(telemetry.TaskFailed, c.h.Task().ID))
		if !errors.Is(failed.Err, worker.ErrRunCancelled) || !worker.Expected(failed.Err) {
			t.Errorf("task %s failed with %v, want ErrRunCancelled, an expected error", k, failed.Err)
		}
		if got := r.peek(queue, c.h.Task().ID); got != nil {
			t.Errorf("cancelled task %s still stored: %+v", k, got)
		}
	}
	other := byKey["r2/a/-1"]
	other.proceed <- nil
	if err := recv(t, "completion", other.result); err != nil {
		t.Errorf("the task of the other run: %v", err)
	}
}

// notifyStore is a store that notifies (store.Notifier): the test sends
// the notifications.
type notifyStore struct {
	store.Store
	listeners chan func(store.Notification)
}

func (s *notifyStore) Listen(ctx context.Context, fn func(store.Notification)) error {
	s.listeners <- fn
	<-ctx.Done()
	return ctx.Err()
}

// Notifications of other processes' commits wake the claim loop of the
// queue named, and make the lease keeper check at once the leases of the
// run named (its task was cancelled elsewhere: ErrLeaseLost).
func TestNotificationsWakeAndCheckLeases(t *testing.T) {
	calls := make(chan *call, 4)
	ns := &notifyStore{listeners: make(chan func(store.Notification), 1)}
	r := newRig(t, rigOptions{wrap: func(s store.Store) store.Store { ns.Store = s; return ns }}, blocking(calls))
	r.start()
	notify := recv(t, "the pool to listen", ns.listeners)
	r.waitIdle()
	// Another process creates a task (directly in the store: this
	// process's committer does not see it).
	res, err := r.db.Apply(context.Background(), &store.ApplyParams{Now: r.clk.Now(), Changes: []store.Change{{Create: &store.NewRun{
		ID: "r", Workflow: "wf", Version: 1, Kind: hephtype.KindFlow, Status: hephtype.StatusRunning,
		Tasks: []store.NewTask{stepTask(queue, "a")},
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatalf("create elsewhere: %v %v", err, res.Changes[0].Err)
	}
	tk := res.Changes[0].Tasks[0]
	notify(store.Notification{Queue: queue})
	c := recv(t, "the task to run after the notification", calls)
	if c.h.Task().ID != tk.ID {
		t.Fatalf("ran task %d, want %d", c.h.Task().ID, tk.ID)
	}

	// Another process cancels the run's task.
	res, err = r.db.Apply(context.Background(), &store.ApplyParams{Now: r.clk.Now(), Changes: []store.Change{{RunID: "r", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{Cancel: []store.TaskMatch{{Index: -1}}}, nil
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatalf("cancel elsewhere: %v %v", err, res.Changes[0].Err)
	}
	notify(store.Notification{RunID: "unrelated"})
	notify(store.Notification{RunID: "r"})
	wantCause(t, c, worker.ErrLeaseLost)
}

// A listener that (re)starts listening says so (Resync): a cancellation
// notified before, while nobody listened, is lost, so the lease keeper
// checks every lease it holds at once and finds the cancelled one.
func TestResyncChecksEveryLease(t *testing.T) {
	calls := make(chan *call, 4)
	ns := &notifyStore{listeners: make(chan func(store.Notification), 1)}
	r := newRig(t, rigOptions{wrap: func(s store.Store) store.Store { ns.Store = s; return ns }}, blocking(calls))
	r.createRun("r", stepTask(queue, "a"))
	r.start()
	notify := recv(t, "the pool to listen", ns.listeners)
	c := recv(t, "the task", calls)
	// Another process cancels the run's task; its notification is lost.
	res, err := r.db.Apply(context.Background(), &store.ApplyParams{Now: r.clk.Now(), Changes: []store.Change{{RunID: "r", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{Cancel: []store.TaskMatch{{Index: -1}}}, nil
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatalf("cancel elsewhere: %v %v", err, res.Changes[0].Err)
	}
	notify(store.Notification{Resync: true})
	wantCause(t, c, worker.ErrLeaseLost)
}

// While a heartbeat call hangs past the time of the next beat, the lease
// keeper waits for that call or the watchdog's deadline: it used to spin,
// waking at once again and again for the beat that was already due (about
// 900,000 times a second), exactly when the store was in trouble.
func TestStuckHeartbeatDoesNotSpin(t *testing.T) {
	calls := make(chan *call, 4)
	hs := &hbStore{calls: make(chan *store.HeartbeatParams, 16), beat: func(ctx context.Context, _ *store.HeartbeatParams) ([]int64, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	r := newRig(t, rigOptions{wrap: func(s store.Store) store.Store { hs.Store = s; return hs }}, blocking(calls))
	r.createRun("r", stepTask(queue, "a"))
	r.start()
	c := recv(t, "the task", calls)
	r.clk.waitUntil(t, t0.Add(beatEvery))
	r.clk.Advance(beatEvery)
	recv(t, "a heartbeat", hs.calls) // in flight, and hangs
	r.clk.Advance(beatEvery)         // the next beat is due: t0+20s
	deadline := t0.Add(leaseFor - leaseFor/5)
	r.clk.waitUntil(t, deadline) // the keeper now waits for the watchdog's deadline
	waits := func() int {
		r.clk.mu.Lock()
		defer r.clk.mu.Unlock()
		return len(r.clk.untils)
	}
	before := waits()
	time.Sleep(100 * time.Millisecond) // a spinning loop would register thousands of waits meanwhile
	if n := waits() - before; n > 10 {
		t.Fatalf("the lease keeper registered %d waits in 100 ms with a heartbeat in flight: it spins", n)
	}
	if err := c.ctx.Err(); err != nil {
		t.Fatalf("task stopped before its deadline: %v", context.Cause(c.ctx))
	}
	r.clk.Advance(deadline.Sub(r.clk.Now()))
	wantCause(t, c, worker.ErrLeaseExpiring)
}
