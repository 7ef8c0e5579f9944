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
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
)

// AppTx is a database transaction of the application's own, as a
// backend's test opens it for InsertJobTx.
type AppTx struct {
	// Tx is what InsertJobTx takes (a pgx.Tx, a *sql.Tx).
	Tx any
	// Exec runs a statement of the application's in the transaction.
	Exec             func(sql string) error
	Commit, Rollback func() error
}

// The jobs of the suite: their arguments, and a kind built per test (the
// worker functions record what they see).
type jobArgs struct {
	N    int    `json:"n"`
	Name string `json:"name,omitempty"`
}

func testJobs(t *testing.T, b Backend) {
	runAll(t, b, []subtest{
		{"InsertInTx", testJobInsertInTx},
		{"UniqueByKeyAndArgs", testJobUnique},
		{"UniqueWithinPeriod", testJobUniquePeriod},
		{"Scheduled", testJobScheduled},
		{"Priorities", testJobPriorities},
		{"RetriesAndTimeout", testJobRetriesTimeout},
		{"SnoozeAndCancel", testJobSnoozeCancel},
		{"SnoozeCancelRetriedCommit", testJobRetriedCommit},
	})
}

// jobEnv starts a client with the kinds registered.
func jobEnv(t *testing.T, b Backend, mod func(*heph.Config), kinds ...job.Registrable) *env {
	t.Helper()
	st, reopen := b.New(t)
	return jobClient(t, st, st, reopen, mod, kinds...)
}

// jobClient starts a client on st (the store, or a wrapper of it) with
// the kinds registered. A client on a fake clock (mod sets Config.Clock)
// sees it tick while it stops: a commit retried after a backoff on the
// clock (a lost outcome) must not hold Stop forever.
func jobClient(t *testing.T, st, inner store.Store, reopen func(*testing.T) store.Store, mod func(*heph.Config), kinds ...job.Registrable) *env {
	t.Helper()
	var cfg heph.Config
	if mod != nil {
		mod(&cfg)
	}
	fc, _ := cfg.Clock.(*clock.Fake)
	stopped := make(chan struct{})
	if fc != nil {
		t.Cleanup(func() { close(stopped) }) // after Stop
	}
	e := &env{t: t, st: inner, reopen: reopen}
	e.c = startClient(t, st, mod)
	if fc != nil {
		t.Cleanup(func() { // before Stop
			go func() {
				for {
					select {
					case <-stopped:
						return
					case <-time.After(5 * time.Millisecond):
						fc.Advance(time.Second)
					}
				}
			}()
		})
	}
	if err := e.c.RegisterJobs(kinds...); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) waitJob(id string, s hephtype.RunStatus) *heph.Run {
	e.t.Helper()
	return e.waitStatus(id, s)
}

// waitJobTicking waits for a job's status while a fake clock moves a
// second at a time, at most 30 minutes in all: whatever waits on the
// clock (a worker's poll, a commit's retry backoff) registered after the
// test's last Advance still sees time pass.
func (e *env) waitJobTicking(fc *clock.Fake, id string, s hephtype.RunStatus) *heph.Run {
	e.t.Helper()
	var got *heph.Run
	ticks := 0
	waitFor(e.t, "job "+id+" to be "+string(s), func() bool {
		r, err := e.c.GetRun(ctxT(e.t), id)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.Status == s {
			got = r
			return true
		}
		if r.Status.Terminal() {
			e.t.Fatalf("job %s is %s (%s), want %s", id, r.Status, r.Error, s)
		}
		if ticks < 1800 {
			ticks++
			fc.Advance(time.Second)
		}
		return false
	})
	return got
}

// A job inserted in a transaction that rolls back does not exist, and
// never runs; one inserted in a committed transaction runs, atomically
// with the application's own row.
func testJobInsertInTx(t *testing.T, b Backend) {
	if b.BeginTx == nil {
		t.Skip("the backend opens no transactions of the application's")
	}
	var ran sync.Map
	kind := job.MustNew("tx_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		ran.Store(j.ID, j.Args.N)
		return nil
	}, nil)
	e := jobEnv(t, b, nil, kind)
	ctx := ctxT(t)
	setup := b.BeginTx(t, e.st)
	if err := setup.Exec("CREATE TABLE IF NOT EXISTS app_orders (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := setup.Commit(); err != nil {
		t.Fatal(err)
	}

	tx := b.BeginTx(t, e.st)
	if err := tx.Exec("INSERT INTO app_orders (id) VALUES ('o1')"); err != nil {
		t.Fatal(err)
	}
	gone, err := heph.InsertJobTx(ctx, e.c, tx.Tx, kind, jobArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	tx = b.BeginTx(t, e.st)
	if err := tx.Exec("INSERT INTO app_orders (id) VALUES ('o1')"); err != nil {
		t.Fatalf("the rolled-back row is there: %v", err)
	}
	kept, err := heph.InsertJobTx(ctx, e.c, tx.Tx, kind, jobArgs{N: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.waitJob(kept.ID, heph.StatusCompleted)
	if _, err := e.c.GetJob(ctx, gone.ID); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("the rolled-back job: %v, want ErrRunNotFound", err)
	}
	if _, ok := ran.Load(gone.ID); ok {
		t.Fatal("the rolled-back job ran")
	}
	if n, _ := ran.Load(kept.ID); n != 2 {
		t.Fatalf("the committed job ran with %v", n)
	}
	// The application's row committed with it.
	tx = b.BeginTx(t, e.st)
	defer func() { _ = tx.Rollback() }()
	if err := tx.Exec("INSERT INTO app_orders (id) VALUES ('o1')"); err == nil {
		t.Fatal("the application's row did not commit with the job")
	}
	if _, err := heph.InsertJobTx(ctx, e.c, "not a transaction", kind, jobArgs{}, nil); !errors.Is(err, heph.ErrTxType) {
		t.Fatalf("a string as a transaction: %v, want ErrTxType", err)
	}
}

// Unique jobs: by key and by arguments, while active: a duplicate is the
// existing job, marked, and inserts nothing.
func testJobUnique(t *testing.T, b Backend) {
	release := make(chan struct{})
	var calls atomic.Int32
	kind := job.MustNew("unique_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		calls.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &job.Options[jobArgs]{Unique: &job.Unique{ByArgs: true}})
	e := jobEnv(t, b, nil, kind)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	ctx := ctxT(t)
	first, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1, Name: "a"}, nil)
	if err != nil || first.Duplicate {
		t.Fatalf("first insert: %+v, %v", first, err)
	}
	// Equal arguments (another order of keys is the same canonical JSON).
	dup, err := heph.InsertJob(ctx, e.c, kind, jobArgs{Name: "a", N: 1}, nil)
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Fatalf("duplicate by args: %+v, %v; want the job %s", dup, err, first.ID)
	}
	other, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 2}, nil)
	if err != nil || other.Duplicate || other.ID == first.ID {
		t.Fatalf("other args: %+v, %v", other, err)
	}
	// By key: arguments do not matter.
	k1, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 3}, &heph.JobOptions{UniqueKey: "order-7"})
	if err != nil || k1.Duplicate {
		t.Fatal(k1, err)
	}
	jobs, err := heph.InsertJobs(ctx, e.c, kind, []heph.JobInsert[jobArgs]{
		{Args: jobArgs{N: 4}, Options: &heph.JobOptions{UniqueKey: "order-7"}},
		{Args: jobArgs{N: 5}, Options: &heph.JobOptions{UniqueKey: "order-8"}},
		{Args: jobArgs{N: 5}, Options: &heph.JobOptions{UniqueKey: "order-8"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !jobs[0].Duplicate || jobs[0].ID != k1.ID || jobs[1].Duplicate || !jobs[2].Duplicate || jobs[2].ID != jobs[1].ID {
		t.Fatalf("batch by key: %+v %+v %+v", jobs[0], jobs[1], jobs[2])
	}
	if _, err := heph.InsertJob(ctx, e.c, kind, jobArgs{}, &heph.JobOptions{UniqueKey: "no spaces"}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Fatalf("a bad unique key: %v, want ErrInvalidInput", err)
	}
	// While active only: once finished, the arguments may run again.
	close(release)
	e.waitJob(first.ID, heph.StatusCompleted)
	again, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1, Name: "a"}, nil)
	if err != nil || again.Duplicate || again.ID == first.ID {
		t.Fatalf("after the first finished: %+v, %v", again, err)
	}
	e.waitJob(again.ID, heph.StatusCompleted)
}

// Unique within a period: one job per key and period, finished or not;
// the next period takes a new one (fake clock).
func testJobUniquePeriod(t *testing.T, b Backend) {
	kind := job.MustNew("daily_job", func(ctx context.Context, j *job.Job[jobArgs]) error { return nil },
		&job.Options[jobArgs]{Unique: &job.Unique{ByArgs: true, Period: 24 * time.Hour}})
	fc := clock.NewFake(time.Date(2031, 5, 6, 1, 0, 0, 0, time.UTC))
	e := jobEnv(t, b, func(c *heph.Config) { c.Clock = fc }, kind)
	ctx := ctxT(t)
	first, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitJob(first.ID, heph.StatusCompleted)
	fc.Advance(22 * time.Hour) // 23:00, the same day
	dup, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1}, nil)
	if err != nil || !dup.Duplicate || dup.ID != first.ID || dup.Status != heph.StatusCompleted {
		t.Fatalf("the same period, finished: %+v, %v", dup, err)
	}
	fc.Advance(time.Hour) // the next day
	next, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1}, nil)
	if err != nil || next.Duplicate {
		t.Fatalf("the next period: %+v, %v", next, err)
	}
	e.waitJob(next.ID, heph.StatusCompleted)
}

// Run at and run after, on a fake clock: a job is not claimed before its
// time, and runs once it has come.
func testJobScheduled(t *testing.T, b Backend) {
	kind := job.MustNew("later_job", func(ctx context.Context, j *job.Job[jobArgs]) error { return nil }, nil)
	fc := clock.NewFake(time.Now())
	e := jobEnv(t, b, func(c *heph.Config) { c.Clock = fc }, kind)
	ctx := ctxT(t)
	in1h, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1}, &heph.JobOptions{RunAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	in2h, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 2}, &heph.JobOptions{RunAt: fc.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heph.InsertJob(ctx, e.c, kind, jobArgs{}, &heph.JobOptions{RunAt: fc.Now(), RunAfter: time.Second}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Fatalf("RunAt and RunAfter: %v, want ErrInvalidInput", err)
	}
	fc.Advance(time.Hour + time.Second) // due times are rounded up to the microsecond
	e.waitJobTicking(fc, in1h.ID, heph.StatusCompleted)
	if j, err := e.c.GetJob(ctx, in2h.ID); err != nil || j.Status.Terminal() || j.Attempt != 1 {
		t.Fatalf("the job due in two hours, after one: %+v, %v", j, err)
	}
	fc.Advance(time.Hour)
	e.waitJobTicking(fc, in2h.ID, heph.StatusCompleted)
}

// Priorities: with one worker, ready jobs run highest priority first.
func testJobPriorities(t *testing.T, b Backend) {
	block, started := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var order []int
	kind := job.MustNew("prio_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		if j.Args.N == 0 {
			close(started)
			<-block
		}
		mu.Lock()
		order = append(order, j.Args.N)
		mu.Unlock()
		return nil
	}, &job.Options[jobArgs]{Priority: 1})
	e := jobEnv(t, b, func(c *heph.Config) { c.Queues = map[string]int{"default": 1} }, kind)
	ctx := ctxT(t)
	blocker, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started: // it holds the queue's only worker
	case <-ctx.Done():
		t.Fatalf("the first job %s never started", blocker.ID)
	}
	var ids []string
	for _, p := range []int{-5, 10, 0, 5} { // 0: the kind's priority, 1
		j, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 100 + p}, &heph.JobOptions{Priority: p})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	close(block)
	for _, id := range ids {
		e.waitJob(id, heph.StatusCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []int{0, 110, 105, 100, 95}
	if len(order) != len(want) {
		t.Fatalf("ran %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("ran %v, want %v (highest priority first)", order, want)
		}
	}
}

// Per-kind retries and timeout.
func testJobRetriesTimeout(t *testing.T, b Backend) {
	var flaky, slow atomic.Int32
	retried := job.MustNew("retried_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		if flaky.Add(1) != int32(j.Attempt) {
			return errors.New("attempts out of step")
		}
		return errors.New("always failing")
	}, &job.Options[jobArgs]{MaxAttempts: 4, Retry: flow.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	timed := job.MustNew("timed_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		slow.Add(1)
		<-ctx.Done() // the kind's timeout ends the attempt
		return ctx.Err()
	}, &job.Options[jobArgs]{MaxAttempts: 1, Timeout: 100 * time.Millisecond})
	e := jobEnv(t, b, nil, retried, timed)
	ctx := ctxT(t)
	j1, err := heph.InsertJob(ctx, e.c, retried, jobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j2, err := heph.InsertJob(ctx, e.c, timed, jobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitJob(j1.ID, heph.StatusFailed)
	if got, _ := e.c.GetJob(ctx, j1.ID); flaky.Load() != 4 || got.Attempt != 4 {
		t.Fatalf("%d calls, attempt %d; want 4", flaky.Load(), got.Attempt)
	}
	r := e.waitJob(j2.ID, heph.StatusFailed)
	if slow.Load() != 1 || !strings.Contains(r.Error, "timed out") {
		t.Fatalf("%d calls, error %q; want one attempt that timed out", slow.Load(), r.Error)
	}
}

// Snooze: the job runs again at its time, with the same attempt and the
// same priority; cancel from inside ends it cancelled, without retry.
func testJobSnoozeCancel(t *testing.T, b Backend) {
	var calls atomic.Int32
	attempts := make(chan int, 10)
	snoozy := job.MustNew("snoozy_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		attempts <- j.Attempt
		if calls.Add(1) == 1 {
			return job.Snooze(time.Hour)
		}
		return nil
	}, &job.Options[jobArgs]{MaxAttempts: 1})
	var cancels atomic.Int32
	quitter := job.MustNew("quitter_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		cancels.Add(1)
		return job.Cancel("not needed any more")
	}, nil)
	fc := clock.NewFake(time.Now())
	e := jobEnv(t, b, func(c *heph.Config) { c.Clock = fc }, snoozy, quitter)
	ctx := ctxT(t)
	j, err := heph.InsertJob(ctx, e.c, snoozy, jobArgs{}, &heph.JobOptions{Priority: 7})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the snooze", func() bool { return hasEvent(e.st, j.ID, hephtype.EventStepSnoozed) })
	run, err := e.st.GetRun(ctx, j.ID)
	var state struct {
		Priority *int `json:"priority"`
	}
	if err != nil || run.Status != heph.StatusRunning || json.Unmarshal(run.State, &state) != nil || state.Priority == nil || *state.Priority != 7 {
		t.Fatalf("the snoozed job: %+v, %v; want running, priority 7 kept", run, err)
	}
	// Due times are rounded up to the microsecond: a second more.
	fc.Advance(time.Hour + time.Second)
	e.waitJobTicking(fc, j.ID, heph.StatusCompleted)
	if a1, a2 := <-attempts, <-attempts; a1 != 1 || a2 != 1 {
		t.Fatalf("attempts %d then %d; a snooze takes none", a1, a2)
	}
	h := e.history(j.ID)
	if count(h, hephtype.EventStepSnoozed, job.Step) != 1 || count(h, hephtype.EventStepStarted, job.Step) != 2 {
		t.Fatalf("history %v", kinds(h))
	}

	q, err := heph.InsertJob(ctx, e.c, quitter, jobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := e.waitJob(q.ID, heph.StatusCancelled)
	if r.Error != "not needed any more" || cancels.Load() != 1 {
		t.Fatalf("cancelled job: %q after %d calls", r.Error, cancels.Load())
	}
}

// A snooze and a cancellation from inside whose commits happen but whose
// outcomes are lost are applied once: the retried commit finds its task
// gone (the fence) and writes nothing.
func testJobRetriedCommit(t *testing.T, b Backend) {
	var calls, cancels atomic.Int32
	var id, qid atomic.Value
	id.Store("")
	qid.Store("")
	snoozy := job.MustNew("snoozy_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		id.Store(j.ID)
		if calls.Add(1) == 1 {
			return job.Snooze(time.Hour)
		}
		return nil
	}, nil)
	quitter := job.MustNew("quitter_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		qid.Store(j.ID)
		cancels.Add(1)
		return job.Cancel("stop")
	}, nil)
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	fc := clock.NewFake(time.Now())
	e := jobClient(t, fs, st, reopen, func(c *heph.Config) { c.Clock = fc }, snoozy, quitter)
	ctx := ctxT(t)
	fs.loseOnce(func() bool { return hasEvent(st, id.Load().(string), hephtype.EventStepSnoozed) })
	j, err := heph.InsertJob(ctx, e.c, snoozy, jobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.waitLost(t, 1)
	// The retry of the lost commit (after a backoff on the clock) finds
	// the task gone; the snoozed task is due.
	fc.Advance(time.Hour + time.Second)
	e.waitJobTicking(fc, j.ID, heph.StatusCompleted)
	if h := e.history(j.ID); count(h, hephtype.EventStepSnoozed, "") != 1 || calls.Load() != 2 {
		t.Fatalf("%d calls, history %v; want one snooze, two calls", calls.Load(), kinds(h))
	}

	fs.loseOnce(func() bool { return hasEvent(st, qid.Load().(string), hephtype.EventRunCancelled) })
	q, err := heph.InsertJob(ctx, e.c, quitter, jobArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.waitLost(t, 2)
	r := e.waitJobTicking(fc, q.ID, heph.StatusCancelled)
	if h := e.history(q.ID); count(h, hephtype.EventRunCancelled, "") != 1 || cancels.Load() != 1 || r.Error != "stop" {
		t.Fatalf("%d calls, error %q, history %v", cancels.Load(), r.Error, kinds(h))
	}
}
