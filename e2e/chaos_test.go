package e2e_test

// The chaos suite: the workload of e2e/chaos.go (DAG flows with fan-out,
// fan-in, a map step and a step that fails once; code-first workflows with
// activities, a durable sleep, signals (the first by signal-with-start,
// sent twice), updates and a child workflow) runs
// under faults, and the checker reads every run's history afterwards:
//
//   - TestChaosSigkill: worker processes killed with SIGKILL again and
//     again, and replaced (both backends);
//   - TestChaosSigstop: worker processes frozen with SIGSTOP for longer
//     than their lease, then resumed (PostgreSQL);
//   - TestChaosKilledConnections: the store's database sessions ended by
//     pg_terminate_backend under load (PostgreSQL);
//   - TestChaosSlowActivations: activations and steps that outlive a
//     short lease, with heartbeats that keep it or that fail meanwhile
//     (both backends);
//   - TestChaosRetriedCommits: commits that fail, or that commit and lose
//     their outcome, and are tried again (both backends);
//   - TestChaosRetriedCommitsEncoded (chaos_payloads_test.go): the same
//     with every payload encrypted and offloaded to a blob store (both
//     backends);
//   - TestChaosDeleteKilledConnection (chaos_delete_test.go): a forced
//     delete killed mid-transaction deletes nothing, its retry deletes
//     once, and the worker of the deleted run cannot commit (PostgreSQL);
//   - TestChaosPauseKilledConnection (chaos_pause_test.go): a pause killed
//     while it waits for the run's lock, and retried, pauses the run once
//     (one run_paused); the running step's result is kept and the next
//     step runs once, after unpause (PostgreSQL);
//   - TestChaosResetKilledConnection (chaos_reset_test.go): a reset to
//     a step killed while it waits for the run's lock, and retried with
//     its key, resets the run once (one run_reset); the step's stopped
//     attempt cannot commit, the steps before it run once (PostgreSQL);
//   - TestChaosResetLostCommits (chaos_reset_test.go): a reset whose
//     commit loses its outcome after the COMMIT, then fails before it,
//     retried by the runtime and by its caller with its key, resets once
//     (both backends);
//   - TestChaosTimeoutKilledConnection (chaos_timeout_test.go): two
//     clients' deadline sweeps killed while they wait for the run's lock
//     time the run out once; the step's late success is refused
//     (PostgreSQL);
//   - TestChaosResetWorkflowKilledConnection (chaos_resetwf_test.go): the
//     retry (reset) of a failed workflow run killed while it waits for the
//     old run's lock, tried again and by two callers at once, creates one
//     new run and one workflow_reset entry; the failed activity runs once
//     more (PostgreSQL);
//   - TestChaosCheckerFindsFaults: the checker reports each kind of
//     duplicate and a lost run.
//
// Faults are driven by observed progress, never by a wall-clock sleep;
// no assertion depends on a time margin. Each test logs one line
// "chaos: backend=… fault=… runs=… … duplicates=0" (docs/reliability.md).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// chaosTimeout bounds each chaos test: a generous deadline for events to
// happen, not a margin anything is measured against.
const chaosTimeout = 3 * time.Minute

// --- Databases ------------------------------------------------------------------

// chaosDB is a fresh database of one backend.
type chaosDB struct {
	name string
	// spec says how child processes open it.
	spec chaosSpec
	dsn  string // PostgreSQL
	// open opens a store on it, closed when the test ends.
	open func(t *testing.T, appName string) store.Store
}

func chaosSQLite(t *testing.T) chaosDB {
	path := filepath.Join(t.TempDir(), "chaos.db")
	return chaosDB{name: "sqlite", spec: chaosSpec{Backend: "sqlite", Path: path},
		open: func(t *testing.T, _ string) store.Store {
			st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}}
}

func chaosPostgres(t *testing.T) chaosDB {
	dsn := pgschema.DSN(t)
	return chaosDB{name: "postgres", spec: chaosSpec{Backend: "postgres", DSN: dsn}, dsn: dsn,
		open: func(t *testing.T, appName string) store.Store {
			st, err := openChaosPostgres(context.Background(), withDSNParam(dsn, "application_name", appName), 16)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}}
}

func openChaosPostgres(ctx context.Context, dsn string, conns int) (*postgres.Store, error) {
	return postgres.Open(ctx, &postgres.Config{DSN: dsn, MaxConns: conns, Timeout: 15 * time.Second, ConnectTimeout: 5 * time.Second})
}

// withDSNParam sets a connection parameter in a DSN (a URL or key=value
// pairs); pgx sends parameters it does not know to the server as run-time
// settings.
func withDSNParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// chaosBackend is a backend the chaos cases run on.
type chaosBackend struct {
	name string
	db   func(t *testing.T) chaosDB
}

func chaosBackends() []chaosBackend {
	return []chaosBackend{{"sqlite", chaosSQLite}, {"postgres", chaosPostgres}}
}

// inEachChaosBackend runs run on a fresh database of each backend, in
// parallel with the other tests: its cases (the triggers', the event
// waits') count no executions of this process (ChaosExecutions, which
// the cases under chaosInProcess count), and each kills only its own
// database's sessions of its own application-name prefix.
func inEachChaosBackend(t *testing.T, run func(t *testing.T, db chaosDB)) {
	t.Parallel()
	for _, b := range chaosBackends() {
		t.Run(b.name, func(t *testing.T) { run(t, b.db(t)) })
	}
}

// chaosSeed is the seed of a test's random choices (kill points, injected
// faults): $HEPH_CHAOS_SEED, or a fixed one per test.
func chaosSeed(t *testing.T, def uint64) uint64 {
	if s := os.Getenv("HEPH_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HEPH_CHAOS_SEED=%q: %v", s, err)
		}
		return v
	}
	return def
}

// chaosLogger drops the runtime's logs (lost leases, failed commits are
// what these tests cause), unless $HEPH_CHAOS_LOG is set.
func chaosLogger() *slog.Logger {
	if os.Getenv("HEPH_CHAOS_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// --- The workload driver -----------------------------------------------------------

// chaosLoad starts the workload's runs through a client, sends the
// workflows their signals and updates while they run, waits for every run
// to end, and checks them.
type chaosLoad struct {
	t   *testing.T
	ctx context.Context
	c   *heph.Client // starts runs, sends signals and updates
	st  store.Store  // reads and checks
	tag string
	// flowIn and wfIn make the inputs of the i-th flow and workflow.
	flowIn func(i int) e2e.ChaosFlowInput
	wfIn   func(i int) e2e.ChaosWfInput
	// jobsPerFlow: each wave inserts this many chaos jobs per flow it
	// starts (e2e.ChaosJobInput), in one InsertJobs call.
	jobsPerFlow int

	mu     sync.Mutex
	runs   []e2e.ChaosRun
	flows  int
	wfs    int
	jobs   int
	msgs   sync.WaitGroup
	active atomic.Int64 // messengers still sending
	// Calls that failed and were tried again (their outcome unknown).
	startRetries, signalRetries, updateRetries atomic.Int64
	// pendingBackfilled: stopSchedule found a tick pending at the pause.
	pendingBackfilled atomic.Int64
	// scheduled: the schedule e2e.ChaosScheduleID was created and fires
	// until waitFinished pauses it.
	scheduled bool
}

// newChaosLoad prepares the workload: the flow control of the jobs' queue
// and the schedule that inserts a job every second while the faults
// happen (its ticks come from the processes that run workers).
func newChaosLoad(t *testing.T, ctx context.Context, c *heph.Client, st store.Store, tag string) *chaosLoad {
	l := &chaosLoad{t: t, ctx: ctx, c: c, st: st, tag: tag,
		flowIn: func(i int) e2e.ChaosFlowInput { return e2e.ChaosFlowInput{N: i} },
		wfIn: func(i int) e2e.ChaosWfInput {
			return e2e.ChaosWfInput{N: i, Signals: 3, Updates: 2, SleepMs: 30}
		},
		jobsPerFlow: 1,
	}
	t.Cleanup(l.msgs.Wait) // no messenger outlives the test
	for {
		err := c.SetQueue(ctx, e2e.ChaosJobQueue, e2e.ChaosJobQueueOptions)
		if err == nil {
			break
		}
		if !l.retry() {
			t.Fatalf("set queue %s: %v", e2e.ChaosJobQueue, err)
		}
	}
	for {
		_, err := c.CreateSchedule(ctx, e2e.ChaosSchedule())
		if err == nil || errors.Is(err, heph.ErrScheduleExists) { // an earlier try created it
			break
		}
		if !l.retry() {
			t.Fatalf("create schedule %s: %v", e2e.ChaosScheduleID, err)
		}
	}
	l.scheduled = true
	return l
}

// stopSchedule waits for the schedule's first tick (the event, whatever
// the time it takes), pauses the schedule, and backfills the tick it left
// pending, if any: a process that decided the tick may have created its
// run, or may be about to (the pause stops only the processes that see
// it), and backfilling makes the run exist and the tick logged once,
// whoever creates it. After that no process starts a run of it.
func (l *chaosLoad) stopSchedule() {
	for {
		log, err := l.st.ScheduleTicks(l.ctx, &store.ScheduleTicksParams{ID: e2e.ChaosScheduleID, Limit: 1})
		if err == nil && len(log) > 0 {
			break
		}
		if !l.retry() {
			l.t.Errorf("the schedule %s never fired (%v)", e2e.ChaosScheduleID, err)
			return
		}
	}
	for {
		err := l.c.PauseSchedule(l.ctx, e2e.ChaosScheduleID)
		if err == nil {
			break
		}
		if !l.retry() {
			l.t.Errorf("pause schedule %s: %v", e2e.ChaosScheduleID, err)
			return
		}
	}
	for {
		sc, err := l.st.GetSchedule(l.ctx, e2e.ChaosScheduleID)
		if err == nil && sc.PendingTick.IsZero() {
			return
		}
		if err == nil {
			if _, err = l.c.BackfillSchedule(l.ctx, e2e.ChaosScheduleID, sc.PendingTick, sc.PendingTick); err == nil {
				l.pendingBackfilled.Add(1)
				return
			}
		}
		if !l.retry() {
			l.t.Errorf("backfill the pending tick of %s: %v", e2e.ChaosScheduleID, err)
			return
		}
	}
}

// retry pauses before a call is tried again; false when the test's time
// is up.
func (l *chaosLoad) retry() bool {
	select {
	case <-l.ctx.Done():
		return false
	case <-time.After(time.Duration(20+rand.IntN(40)) * time.Millisecond):
		return true
	}
}

// wave starts nFlows flows and nWfs workflows (and their messengers).
func (l *chaosLoad) wave(nFlows, nWfs int) {
	nJobs := nFlows * l.jobsPerFlow
	l.mu.Lock()
	f0, w0, j0 := l.flows, l.wfs, l.jobs
	l.flows += nFlows
	l.wfs += nWfs
	l.jobs += nJobs
	l.mu.Unlock()
	l.insertJobs(j0, nJobs)
	for k := range max(nFlows, nWfs) {
		if k < nFlows {
			l.startFlow(f0 + k)
		}
		if k < nWfs {
			l.startWorkflow(w0 + k)
		}
	}
}

// insertJobs inserts the chaos jobs j0 to j0+n-1 in one InsertJobs call.
// Each is unique by its key, so a call whose outcome was lost is made
// again: the jobs it inserted come back as duplicates.
func (l *chaosLoad) insertJobs(j0, n int) {
	if n == 0 {
		return
	}
	ins := make([]heph.JobInsert[e2e.ChaosJobArgs], n)
	for k := range ins {
		ins[k] = heph.JobInsert[e2e.ChaosJobArgs]{Args: e2e.ChaosJobInput(j0 + k),
			Options: &heph.JobOptions{UniqueKey: fmt.Sprintf("%s-j%d", l.tag, j0+k)}}
	}
	for {
		jobs, err := heph.InsertJobs(l.ctx, l.c, e2e.ChaosJob, ins)
		if err == nil {
			for k, j := range jobs {
				l.add(e2e.ChaosRun{ID: j.ID, Job: true, JobIn: ins[k].Args})
			}
			return
		}
		l.startRetries.Add(1)
		if !l.retry() {
			l.t.Errorf("insert jobs %d to %d: %v", j0, j0+n-1, err)
			return
		}
	}
}

func (l *chaosLoad) startFlow(i int) {
	in := l.flowIn(i)
	value := fmt.Sprintf("%s-%d", l.tag, i)
	for {
		r, err := l.c.StartRun(l.ctx, e2e.ChaosFlowName, in, &heph.StartOptions{BusinessValue: value})
		if err == nil {
			l.add(e2e.ChaosRun{ID: r.ID, Flow: true, FlowIn: in})
			return
		}
		if errors.Is(err, heph.ErrDuplicateRun) {
			// An earlier try did start it; its outcome was lost.
			if run, ferr := l.st.FindRun(l.ctx, &store.FindRunParams{Workflow: e2e.ChaosFlowName, BusinessID: "n::" + value}); ferr == nil {
				l.add(e2e.ChaosRun{ID: run.ID, Flow: true, FlowIn: in})
				return
			}
		}
		l.startRetries.Add(1)
		if !l.retry() {
			l.t.Errorf("start flow %s: %v", value, err)
			return
		}
	}
}

func (l *chaosLoad) startWorkflow(i int) {
	in := l.wfIn(i)
	id := fmt.Sprintf("%s-w%d", l.tag, i)
	run := e2e.ChaosRun{WfIn: in}
	for k := range in.Signals {
		run.Signals = append(run.Signals, fmt.Sprintf("%s-s%d", id, k))
	}
	for k := range in.Updates {
		run.Updates = append(run.Updates, fmt.Sprintf("%s-u%d", id, k))
	}
	// Every other workflow starts with its first signal (signal-with-start
	// with a signal id; see signalWithStart).
	sent := 0
	if i%2 == 1 && len(run.Signals) > 0 {
		runID, err := l.signalWithStart(id, run.Signals[0], in, "")
		if err != nil {
			l.t.Errorf("signal-with-start workflow %s: %v", id, err)
			return
		}
		run.ID, sent = runID, 1
	} else {
		for {
			r, err := heph.StartWorkflow(l.ctx, l.c, e2e.ChaosWorkflow, in, &heph.WorkflowOptions{ID: id})
			if err == nil {
				run.ID = r.ID
				break
			}
			if errors.Is(err, heph.ErrDuplicateRun) {
				if found, ferr := l.c.FindWorkflow(l.ctx, e2e.ChaosWorkflowName, id); ferr == nil {
					run.ID = found.ID
					break
				}
			}
			l.startRetries.Add(1)
			if !l.retry() {
				l.t.Errorf("start workflow %s: %v", id, err)
				return
			}
		}
	}
	l.add(run)
	l.active.Add(1)
	l.msgs.Go(func() {
		defer l.active.Add(-1)
		l.message(run, id, sent)
	})
}

// signalWithStart sends payload to the open run of workflow id, starting
// it with in if there is none, by signal-with-start with the payload as
// its signal id: tried again blindly after an error (whether or not the
// try was applied), then repeated once, as a request whose answer was
// lost would be. The id must make every try and the repeat deliver the
// signal once (the checker reports a duplicate otherwise), and they must
// name the same run (want, when set: the open run). It returns the run.
func (l *chaosLoad) signalWithStart(id, payload string, in e2e.ChaosWfInput, want string) (string, error) {
	for repeat := range 2 {
		for {
			r, err := l.c.SignalWithStart(l.ctx, e2e.ChaosWorkflowName, id, e2e.ChaosSignal, payload, in, &heph.WorkflowOptions{SignalID: payload})
			if err == nil {
				if want != "" && r.ID != want {
					return "", fmt.Errorf("try %d of signal %s went to run %s, want %s", repeat+1, payload, r.ID, want)
				}
				want = r.ID
				break
			}
			l.signalRetries.Add(1)
			if !l.retry() {
				return "", err
			}
		}
	}
	return want, nil
}

func (l *chaosLoad) add(r e2e.ChaosRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
}

// message sends a workflow its signals, one after the other while it
// runs, then its updates once its phase is open. The first sent signals
// went with the start.
func (l *chaosLoad) message(r e2e.ChaosRun, id string, sent int) {
	if sent == 0 && len(r.Signals) > 0 {
		// The workflows started without a signal get their first by
		// signal-with-start too, to the open run.
		if _, err := l.signalWithStart(id, r.Signals[0], r.WfIn, r.ID); err != nil {
			l.t.Errorf("signal %s to run %s: %v", r.Signals[0], r.ID, err)
			return
		}
		sent = 1
	}
	for _, s := range r.Signals[sent:] {
		// A little apart, so that they arrive in different activations.
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(time.Duration(rand.IntN(30)) * time.Millisecond):
		}
		if err := l.signal(r.ID, s); err != nil {
			l.t.Errorf("signal %s to run %s: %v", s, r.ID, err)
			return
		}
	}
	for {
		state, err := heph.Query[string](l.ctx, l.c, r.ID)
		if err == nil && state == e2e.ChaosUpdatesOpen {
			break
		}
		if !l.retry() {
			l.t.Errorf("run %s never opened its phase for updates (published %q, %v)", r.ID, state, err)
			return
		}
	}
	for k, u := range r.Updates {
		if err := l.update(r.ID, u, k+1); err != nil {
			l.t.Errorf("update %s of run %s: %v", u, r.ID, err)
			return
		}
	}
}

// signal sends a signal. A call that fails may or may not have delivered
// it (its commit's outcome was lost); the history says which, and only an
// undelivered signal is sent again — a duplicate is then the runtime's.
func (l *chaosLoad) signal(runID, payload string) error {
	for {
		err := l.c.SignalWorkflow(l.ctx, runID, e2e.ChaosSignal, payload)
		if err == nil {
			return nil
		}
		if errors.Is(err, heph.ErrRunFinished) || errors.Is(err, heph.ErrRunNotFound) {
			return err
		}
		l.signalRetries.Add(1)
		for {
			if !l.retry() {
				return err
			}
			delivered, herr := l.delivered(runID, payload)
			if herr != nil {
				continue // the store is unreachable now; look again
			}
			if delivered {
				return nil
			}
			break
		}
	}
}

func (l *chaosLoad) delivered(runID, payload string) (bool, error) {
	h, err := l.st.History(l.ctx, &store.HistoryParams{RunID: runID})
	if err != nil {
		return false, err
	}
	for _, ev := range h {
		var p string
		if ev.Kind == hephtype.EventSignalReceived && json.Unmarshal(ev.Data, &p) == nil && p == payload {
			return true, nil
		}
	}
	return false, nil
}

// update sends the update whose id and argument are id, and checks its
// reply: the number of updates the phase has accepted, want. A call that
// fails is sent again with the same id: the runtime must not apply it
// twice.
func (l *chaosLoad) update(runID, id string, want int) error {
	for {
		n, err := heph.Update[int](l.ctx, l.c, runID, e2e.ChaosUpdate, id, &heph.UpdateOptions{ID: id})
		if err == nil {
			if n != want {
				return fmt.Errorf("reply %d, want %d (the phase counted an update twice, or lost one)", n, want)
			}
			return nil
		}
		var rej *heph.UpdateRejectedError
		var failed *heph.UpdateFailedError
		switch {
		case errors.Is(err, heph.ErrUpdateNotAccepted):
			// The phase is not open (yet): nothing was written.
		case errors.As(err, &rej), errors.As(err, &failed), errors.Is(err, heph.ErrRunFinished), errors.Is(err, heph.ErrRunNotFound):
			return err
		default:
			l.updateRetries.Add(1)
		}
		if !l.retry() {
			return err
		}
	}
}

// finished reports whether every run the test started ended and every
// messenger is done. The runs of the schedule's ticks, which start while
// it fires, do not count: waitFinished stops the schedule, then waits for
// them too.
func (l *chaosLoad) finished() bool {
	return l.ended(false)
}

// ended reports whether every messenger is done and no run is active
// (but those of the schedule's ticks, unless all).
func (l *chaosLoad) ended(all bool) bool {
	if l.active.Load() > 0 {
		return false
	}
	const limit = 50
	page, err := l.st.ListRuns(l.ctx, &store.ListRunsParams{
		Statuses: []hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusRunning, hephtype.StatusWaiting}, Limit: limit,
	})
	if err != nil || len(page.Runs) == limit {
		return false
	}
	for _, r := range page.Runs {
		if all || !strings.HasPrefix(r.ID, e2e.ChaosScheduleID+"@") {
			return false
		}
	}
	return true
}

// waitFinished stops the schedule and polls the store until the workload
// (the runs of the schedule's ticks included) has finished; false if time
// ran out.
func (l *chaosLoad) waitFinished() bool {
	if l.scheduled {
		l.scheduled = false
		l.stopSchedule()
	}
	for !l.ended(true) {
		select {
		case <-l.ctx.Done():
			l.t.Errorf("the workload did not finish in %s", chaosTimeout)
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// check runs the checker, logs the figures line and fails the test on any
// problem. extra are the fault's own figures ("kills=5").
func (l *chaosLoad) check(backend, fault string, start time.Time, execs int64, extra ...string) e2e.ChaosFigures {
	l.t.Helper()
	l.msgs.Wait()
	l.mu.Lock()
	runs := append([]e2e.ChaosRun(nil), l.runs...)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, problems := e2e.CheckChaos(ctx, l.st, runs)
	const maxShown = 10
	for i, p := range problems {
		if i == maxShown {
			l.t.Errorf("… and %d more problems", len(problems)-maxShown)
			break
		}
		l.t.Error(p)
	}
	line := fmt.Sprintf("chaos: backend=%s fault=%s runs=%d flows=%d workflows=%d children=%d jobs=%d scheduled_jobs=%d ticks=%d pending_backfilled=%d snoozes=%d %s attempts=%d executions=%d reexecutions=%d retried_calls=%d duplicates=%d lost=%d elapsed=%s",
		backend, fault, f.Runs, f.Flows, f.Workflows, f.Children, f.Jobs, f.ScheduledJobs, f.Ticks, l.pendingBackfilled.Load(), f.Snoozes,
		strings.Join(extra, " "), f.Attempts, execs, f.Reexecutions,
		l.startRetries.Load()+l.signalRetries.Load()+l.updateRetries.Load(), f.Duplicates, f.Lost, time.Since(start).Round(100*time.Millisecond))
	l.t.Log(line)
	return f
}

// --- In-process tests ---------------------------------------------------------------

// chaosInProcess serializes the in-process tests: ChaosExecutions counts
// the executions of this process.
var chaosInProcess sync.Mutex

// startChaosClient starts a client with workers that runs the workload.
func startChaosClient(t *testing.T, st store.Store, mod func(*heph.Config)) *heph.Client {
	t.Helper()
	cfg := &heph.Config{
		Store: st, Queues: map[string]int{"default": 8, e2e.ChaosJobQueue: 4}, WorkerID: "chaos-inproc",
		MinPollInterval: 20 * time.Millisecond, PollInterval: 200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, Logger: chaosLogger(),
	}
	if mod != nil {
		mod(cfg)
	}
	c, err := heph.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e2e.RegisterChaos(c, st); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// TestChaosKilledConnections ends the store's PostgreSQL sessions (its
// pool's and its listener's) with pg_terminate_backend again and again
// while the workload runs in this process: after every 15 tasks
// completed, a round of kills.
func TestChaosKilledConnections(t *testing.T) {
	runKilledConnections(t, killedConnections{fault: "pg_terminate_backend", tag: "kc"})
}

// killedConnections is a killed-connections chaos case: mod configures
// the client, and encoded says whether the load reads runs through the
// client's store (its payloads encoded) rather than the raw one.
type killedConnections struct {
	fault, tag string
	mod        func(*heph.Config)
	encoded    bool
}

func runKilledConnections(t *testing.T, kc killedConnections) {
	chaosInProcess.Lock()
	defer chaosInProcess.Unlock()
	db := chaosPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	admin, err := pgx.Connect(ctx, withDSNParam(db.dsn, "application_name", "chaos-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	st := db.open(t, "hephaestus-chaos")
	c := startChaosClient(t, st, func(c *heph.Config) {
		c.LeaseDuration, c.HeartbeatInterval = 2*time.Second, 500*time.Millisecond
		if kc.mod != nil {
			kc.mod(c)
		}
	})
	tel := watchChaosTelemetry(t, c)
	var tasks atomic.Int64
	defer c.Subscribe(func(ev heph.Event) {
		if ev.Kind == heph.TaskCompleted {
			tasks.Add(1)
		}
	})()

	// The kills run beside the workload, driven by its progress.
	var rounds, sessions, busy atomic.Int64
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		last := int64(0)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if n := tasks.Load(); n-last >= 15 {
				last = n
				// Every session of the store: its pool's and its
				// listener's; busy ones are in a statement or a transaction.
				var k, b int64
				err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)), count(*) FILTER (WHERE state <> 'idle')
					FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name LIKE 'hephaestus-chaos%'`).Scan(&k, &b)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("terminate sessions: %v", err)
					}
					return
				}
				rounds.Add(1)
				sessions.Add(k)
				busy.Add(b)
			}
		}
	})
	stopKiller := sync.OnceFunc(func() { close(stop); killer.Wait() })
	defer stopKiller()

	start, execs0 := time.Now(), e2e.ChaosExecutions()
	read := st
	if kc.encoded {
		read = c.Store()
	}
	l := newChaosLoad(t, ctx, c, read, kc.tag)
	l.wave(40, 16)
	l.waitFinished()
	stopKiller()
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
	l.check(db.name, kc.fault, start, e2e.ChaosExecutions()-execs0,
		fmt.Sprintf("kill_rounds=%d terminated=%d terminated_busy=%d", rounds.Load(), sessions.Load(), busy.Load()), tel.String())
	if rounds.Load() < 5 || sessions.Load() == 0 {
		t.Errorf("only %d rounds of kills (%d sessions) happened while the workload ran", rounds.Load(), sessions.Load())
	}
}

// TestChaosSlowActivations runs the workload with a lease of 500 ms and
// code that outlives it now and then: the first activation of some child
// workflows blocks for 1 s, so does the activation of some parents that
// receives their child's result, and some flows have a step that runs for
// 1 s. In mode "heartbeats" nothing else happens: heartbeats keep the
// leases. In mode "blackout" every heartbeat fails while a slow activation
// blocks (as if the worker could not reach the database): the runtime
// stops the tasks whose lease it cannot extend, other workers take them
// over once the leases expire, and the blocked activation, when it
// returns, must not commit. Either way no change may be applied twice.
func TestChaosSlowActivations(t *testing.T) {
	for _, b := range chaosBackends() {
		for _, mode := range []string{"heartbeats", "blackout"} {
			t.Run(b.name+"/"+mode, func(t *testing.T) {
				chaosInProcess.Lock()
				defer chaosInProcess.Unlock()
				db := b.db(t)
				ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
				defer cancel()
				bs := &chaosBlackoutStore{Store: db.open(t, "hephaestus-chaos")}
				if mode == "blackout" {
					e2e.SetChaosSlowHook(bs.slow)
					defer e2e.SetChaosSlowHook(nil)
				}
				c := startChaosClient(t, bs, func(c *heph.Config) {
					c.LeaseDuration, c.HeartbeatInterval = 500*time.Millisecond, 100*time.Millisecond
				})
				tel := watchChaosTelemetry(t, c)
				start, execs0 := time.Now(), e2e.ChaosExecutions()
				l := newChaosLoad(t, ctx, c, bs, "slow")
				slowFlows, slowChildren, slowParents := 0, 0, 0
				l.flowIn = func(i int) e2e.ChaosFlowInput {
					in := e2e.ChaosFlowInput{N: i}
					if i%4 == 1 {
						in.SlowMs = 1000
						slowFlows++
					}
					return in
				}
				l.wfIn = func(i int) e2e.ChaosWfInput {
					in := e2e.ChaosWfInput{N: i, Signals: 3, Updates: 2, SleepMs: 30, SlowChild: i%3 == 0, SlowParent: i%3 == 1}
					if in.SlowChild {
						slowChildren++
					}
					if in.SlowParent {
						slowParents++
					}
					return in
				}
				l.wave(24, 12)
				l.waitFinished()
				if err := c.Stop(context.Background()); err != nil {
					t.Errorf("stop: %v", err)
				}
				l.check(db.name, "slow_activations_"+mode, start, e2e.ChaosExecutions()-execs0,
					fmt.Sprintf("slow_steps=%d slow_child_activations=%d slow_parent_activations=%d blackouts=%d refused_heartbeats=%d",
						slowFlows, slowChildren, slowParents, bs.blackouts.Load(), bs.refused.Load()), tel.String())
				if mode == "blackout" && (bs.blackouts.Load() == 0 || tel.leaseDrops.Load() == 0) {
					t.Errorf("%d blackouts stopped %d tasks: the blackouts did not bite", bs.blackouts.Load(), tel.leaseDrops.Load())
				}
			})
		}
	}
}

// chaosBlackoutStore refuses every heartbeat while a slow activation
// blocks (see e2e.SetChaosSlowHook).
type chaosBlackoutStore struct {
	store.Store
	blocking           atomic.Int64
	blackouts, refused atomic.Int64
}

var errChaosBlackout = errors.New("chaos: the database cannot be reached (heartbeat blackout)")

func (s *chaosBlackoutStore) slow(begin bool) {
	if !begin {
		s.blocking.Add(-1)
	} else if s.blocking.Add(1) == 1 {
		s.blackouts.Add(1)
	}
}

func (s *chaosBlackoutStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	if s.blocking.Load() > 0 {
		s.refused.Add(1)
		return nil, errChaosBlackout
	}
	return s.Store.Heartbeat(ctx, p)
}

// chaosTelemetry counts what the runtime of an in-process test reports:
// tasks whose result was dropped because their lease was lost or could
// not be extended, and commits that failed and were tried again.
type chaosTelemetry struct {
	leaseDrops, commitFailures atomic.Int64
}

func watchChaosTelemetry(t *testing.T, c *heph.Client) *chaosTelemetry {
	tel := &chaosTelemetry{}
	t.Cleanup(c.Subscribe(func(ev heph.Event) {
		switch {
		case ev.Kind == heph.CommitFailed:
			tel.commitFailures.Add(1)
		case (ev.Kind == heph.TaskFailed || ev.Kind == heph.StepFailed) && ev.Err != nil && strings.Contains(ev.Err.Error(), "lease"):
			tel.leaseDrops.Add(1)
		}
	}))
	return tel
}

func (tel *chaosTelemetry) String() string {
	return fmt.Sprintf("lease_drops=%d failed_commits=%d", tel.leaseDrops.Load(), tel.commitFailures.Load())
}

// chaosFaultyStore fails some of the Apply calls of the store it wraps,
// chosen by a seeded random source: half of them before applying
// anything (a failed commit), half after the commit succeeded (its
// outcome lost, as when the connection dies after COMMIT). The runtime
// tries both again. It hides the optional interfaces of the store it
// wraps (notifications, concurrent commits): the runtime polls.
type chaosFaultyStore struct {
	store.Store
	rate float64
	on   atomic.Bool

	mu  sync.Mutex
	rng *rand.Rand

	calls, before, after atomic.Int64
}

var (
	errChaosBefore = errors.New("chaos: commit failed (injected)")
	errChaosAfter  = errors.New("chaos: connection lost after COMMIT (injected; the changes were applied)")
)

func (s *chaosFaultyStore) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	if !s.on.Load() {
		return s.Store.Apply(ctx, p)
	}
	s.calls.Add(1)
	s.mu.Lock()
	x := s.rng.Float64()
	s.mu.Unlock()
	switch {
	case x < s.rate/2:
		s.before.Add(1)
		return nil, errChaosBefore
	case x < s.rate:
		res, err := s.Store.Apply(ctx, p)
		if err != nil {
			return res, err
		}
		s.after.Add(1)
		return nil, errChaosAfter
	}
	return s.Store.Apply(ctx, p)
}

// TestChaosRetriedCommits makes 10% of the commits of the runtime fail:
// half before anything is applied, half after the commit (the outcome
// lost). Every kind of change — completions, decisions, timers, signals,
// updates, child start and report, run creation — goes through such
// commits, and must be applied exactly once.
func TestChaosRetriedCommits(t *testing.T) {
	for _, b := range chaosBackends() {
		t.Run(b.name, func(t *testing.T) {
			runRetriedCommits(t, b, retriedCommits{seed: 5, fault: "retried_commits", tag: "rc"})
		})
	}
}

// retriedCommits is a retried-commits chaos case: mod configures the
// client, and encoded says whether the load reads runs through the
// client's store (its payloads encoded) rather than the raw one.
type retriedCommits struct {
	seed       uint64
	fault, tag string
	mod        func(*heph.Config)
	encoded    bool
}

func runRetriedCommits(t *testing.T, b chaosBackend, rc retriedCommits) {
	chaosInProcess.Lock()
	defer chaosInProcess.Unlock()
	db := b.db(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	seed := chaosSeed(t, rc.seed)
	fs := &chaosFaultyStore{Store: db.open(t, "hephaestus-chaos"), rate: 0.10, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	c := startChaosClient(t, fs, func(c *heph.Config) {
		c.LeaseDuration, c.HeartbeatInterval = time.Second, 250*time.Millisecond
		c.MaxCommitBatch = 8 // more, smaller commits: more of them fail
		if rc.mod != nil {
			rc.mod(c)
		}
	})
	tel := watchChaosTelemetry(t, c)
	fs.on.Store(true)
	start, execs0 := time.Now(), e2e.ChaosExecutions()
	var st store.Store = fs
	if rc.encoded {
		st = c.Store()
	}
	l := newChaosLoad(t, ctx, c, st, rc.tag)
	l.wave(40, 16)
	l.waitFinished()
	fs.on.Store(false)
	if err := c.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
	l.check(db.name, rc.fault, start, e2e.ChaosExecutions()-execs0,
		fmt.Sprintf("seed=%d applies=%d injected=%d injected_before=%d injected_after=%d",
			seed, fs.calls.Load(), fs.before.Load()+fs.after.Load(), fs.before.Load(), fs.after.Load()), tel.String())
	if fs.after.Load() == 0 || fs.before.Load() == 0 {
		t.Errorf("no fault of one kind was injected: %d before, %d after the commit", fs.before.Load(), fs.after.Load())
	}
}

// TestChaosCheckerFindsFaults feeds the checker histories with state
// changes applied twice, and a run that never ended: it must report each.
func TestChaosCheckerFindsFaults(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "checker.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev := func(kind hephtype.EventKind, step string, index, attempt int, name, data string) store.NewEvent {
		e := store.NewEvent{Kind: kind, Step: step, Index: index, Attempt: attempt, Name: name}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	in := e2e.ChaosWfInput{N: 1, Signals: 1, Updates: 1, SleepMs: 1}
	wfIn, _ := json.Marshal(in)
	out, _ := json.Marshal(e2e.ChaosWorkflowOutput(in, []string{"s"}, []string{"u"}))
	flowIn := e2e.ChaosFlowInput{N: 2}
	flowOut, _ := json.Marshal(map[string]int{"join": e2e.ChaosFlowOutput(flowIn)})
	flowInRaw, _ := json.Marshal(flowIn)
	snoozeIn := e2e.ChaosJobArgs{N: 1, Tenant: "t1", End: e2e.ChaosJobSnooze}
	snoozeRaw, _ := json.Marshal(snoozeIn)
	cancelIn := e2e.ChaosJobArgs{N: 2, Tenant: "t2", End: e2e.ChaosJobCancel}
	cancelRaw, _ := json.Marshal(cancelIn)
	var flowHist []store.NewEvent
	for _, s := range e2e.ChaosFlowSteps {
		if s == "square" {
			for i := range 3 {
				flowHist = append(flowHist, ev(hephtype.EventItemCompleted, s, i, 1, "", "1"))
			}
		}
		flowHist = append(flowHist, ev(hephtype.EventStepCompleted, s, 0, 1, "ok", "1"))
	}
	flowHist = append(flowHist,
		ev(hephtype.EventItemCompleted, "square", 1, 1, "", "1"), // an element completed twice
		ev(hephtype.EventRunCompleted, "", 0, 0, "", string(flowOut)))
	creates := []*store.NewRun{
		{ID: "wf", Workflow: e2e.ChaosWorkflowName, Kind: hephtype.KindWorkflow, Status: hephtype.StatusCompleted, Input: wfIn, Output: out,
			History: []store.NewEvent{
				ev(hephtype.EventRunStarted, "", 0, 0, e2e.ChaosWorkflowName, ""),
				ev(hephtype.EventStepScheduled, "", 1, 0, "chaos.double", "1"),
				ev(hephtype.EventStepCompleted, "", 1, 1, "chaos.double", "2"),
				ev(hephtype.EventStepCompleted, "", 1, 1, "chaos.double", "2"), // an activity completed twice
				ev(hephtype.EventTimerStarted, "", 2, 0, "", ""),
				ev(hephtype.EventTimerFired, "", 2, 0, "", ""),
				ev(hephtype.EventTimerFired, "", 2, 0, "", ""), // a timer fired twice
				ev(hephtype.EventChildStarted, "", 3, 0, e2e.ChaosChildName, ""),
				ev(hephtype.EventSignalReceived, "", 0, 0, e2e.ChaosSignal, `"s"`),
				ev(hephtype.EventSignalReceived, "", 0, 0, e2e.ChaosSignal, `"s"`), // a signal received twice
				ev(hephtype.EventUpdateAccepted, "u", 4, 0, e2e.ChaosUpdate, `"u"`),
				ev(hephtype.EventUpdateAccepted, "u", 5, 0, e2e.ChaosUpdate, `"u"`), // an update accepted twice
				ev(hephtype.EventUpdateDone, "u", 4, 0, e2e.ChaosUpdate, "1"),
				ev(hephtype.EventChildCompleted, "", 3, 0, e2e.ChaosChildName, `"child-1-3"`),
				ev(hephtype.EventChildFailed, "", 3, 0, e2e.ChaosChildName, ""), // a child reported twice
				ev(hephtype.EventRunCompleted, "", 0, 0, "", string(out)),
			}},
		{ID: "child0", Workflow: e2e.ChaosChildName, Kind: hephtype.KindWorkflow, Status: hephtype.StatusContinued, ParentID: "wf",
			Input: json.RawMessage(`{"n":1}`), History: []store.NewEvent{ev(hephtype.EventRunContinued, "", 0, 0, "", `{"n":1,"gen":1,"acc":3}`)}},
		{ID: "child1", Workflow: e2e.ChaosChildName, Kind: hephtype.KindWorkflow, Status: hephtype.StatusCompleted, ParentID: "wf",
			Input: json.RawMessage(`{"n":1,"gen":1,"acc":3}`), Output: json.RawMessage(`"child-1-3"`),
			History: []store.NewEvent{ev(hephtype.EventRunCompleted, "", 0, 0, "", `"child-1-3"`)}},
		{ID: "child1bis", Workflow: e2e.ChaosChildName, Kind: hephtype.KindWorkflow, Status: hephtype.StatusCompleted, ParentID: "wf", // continued twice
			Input: json.RawMessage(`{"n":1,"gen":1,"acc":3}`), Output: json.RawMessage(`"child-1-3"`),
			History: []store.NewEvent{ev(hephtype.EventRunCompleted, "", 0, 0, "", `"child-1-3"`)}},
		{ID: "flow", Workflow: e2e.ChaosFlowName, Kind: hephtype.KindFlow, Status: hephtype.StatusCompleted, Input: flowInRaw, Output: flowOut, History: flowHist},
		{ID: "stuck", Workflow: e2e.ChaosFlowName, Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, Input: flowInRaw,
			History: []store.NewEvent{ev(hephtype.EventRunStarted, "", 0, 0, "", "")}},
		{ID: "snoozy", Workflow: e2e.ChaosJobName, Kind: hephtype.KindFlow, Status: hephtype.StatusCompleted, Input: snoozeRaw,
			History: []store.NewEvent{
				ev(hephtype.EventRunStarted, "", 0, 0, "", ""),
				ev(hephtype.EventStepStarted, "job", 0, 1, "", ""),
				ev(hephtype.EventStepSnoozed, "job", 0, 1, "", ""),
				ev(hephtype.EventStepStarted, "job", 0, 1, "", ""),
				ev(hephtype.EventStepSnoozed, "job", 0, 1, "", ""), // a snooze applied twice
				ev(hephtype.EventStepStarted, "job", 0, 1, "", ""),
				ev(hephtype.EventStepCompleted, "job", 0, 1, "", "null"),
				ev(hephtype.EventRunCompleted, "", 0, 0, "", "null"),
			}},
		{ID: "quitter", Workflow: e2e.ChaosJobName, Kind: hephtype.KindFlow, Status: hephtype.StatusCompleted, Input: cancelRaw, // should have cancelled
			History: []store.NewEvent{
				ev(hephtype.EventRunStarted, "", 0, 0, "", ""),
				ev(hephtype.EventStepStarted, "job", 0, 1, "", ""),
				ev(hephtype.EventStepCompleted, "job", 0, 1, "", "null"),
				ev(hephtype.EventRunCompleted, "", 0, 0, "", "null"),
			}},
	}
	p := &store.ApplyParams{Now: time.Now()}
	for _, c := range creates {
		p.Changes = append(p.Changes, store.Change{Create: c})
	}
	res, err := st.Apply(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Changes {
		if r.Err != nil {
			t.Fatalf("create %s: %v", creates[i].ID, r.Err)
		}
	}
	// The update's request, as a sender records it, answered (not
	// rejected) by a worker.
	if _, err := st.CreateRequest(ctx, &store.CreateRequestParams{
		Request: store.NewRequest{RunID: "wf", ID: "update:u", Kind: store.RequestUpdate, Name: e2e.ChaosUpdate, Args: json.RawMessage(`"u"`)},
		Task:    store.NewTask{Queue: "checker", Kind: store.TaskDecision, Step: "request", Index: -1, Attempt: 1},
		Now:     time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	rt, err := st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"checker"}, Owner: "checker", Limit: 1, LeaseFor: time.Minute, Now: time.Now()})
	if err != nil || len(rt) != 1 {
		t.Fatal(rt, err)
	}
	if err := st.AnswerRequest(ctx, &store.AnswerRequestParams{RunID: "wf", ID: "update:u", Fence: rt[0].Lease(),
		Status: store.RequestAccepted, Code: "duplicate", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	runs := []e2e.ChaosRun{
		{ID: "wf", WfIn: in, Signals: []string{"s"}, Updates: []string{"u"}},
		{ID: "flow", Flow: true, FlowIn: flowIn},
		{ID: "stuck", Flow: true, FlowIn: flowIn},
		{ID: "snoozy", Job: true, JobIn: snoozeIn},
		{ID: "quitter", Job: true, JobIn: cancelIn},
	}
	// The schedule: tick 1 has its run, tick 2's run is missing, and the
	// run of tick 3 was never logged.
	cl, err := heph.New(&heph.Config{Store: st}) // never started: it only writes the schedule
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Stop(context.Background()) }()
	if _, err := cl.CreateSchedule(ctx, e2e.ChaosSchedule()); err != nil {
		t.Fatal(err)
	}
	stored, err := st.GetSchedule(ctx, e2e.ChaosScheduleID)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tickRun := func(k int) string {
		return e2e.ChaosScheduleID + "@" + tick.Add(time.Duration(k)*time.Second).Format("2006-01-02T15:04:05Z")
	}
	if _, err := st.UpdateSchedule(ctx, &store.UpdateScheduleParams{Schedule: stored, Now: time.Now(), Ticks: []store.ScheduleTick{
		{Tick: tick.Add(time.Second), Outcome: store.TickStarted, RunID: tickRun(1)},
		{Tick: tick.Add(2 * time.Second), Outcome: store.TickStarted, RunID: tickRun(2)},
	}}); err != nil {
		t.Fatal(err)
	}
	schedIn, _ := json.Marshal(e2e.ChaosScheduledJob)
	jobHist := []store.NewEvent{
		ev(hephtype.EventRunStarted, "", 0, 0, "", ""),
		ev(hephtype.EventStepStarted, "job", 0, 1, "", ""),
		ev(hephtype.EventStepSnoozed, "job", 0, 1, "", ""),
		ev(hephtype.EventStepStarted, "job", 0, 1, "", ""),
		ev(hephtype.EventStepCompleted, "job", 0, 1, "", "null"),
		ev(hephtype.EventRunCompleted, "", 0, 0, "", "null"),
	}
	p = &store.ApplyParams{Now: time.Now()}
	for _, k := range []int{1, 3} {
		p.Changes = append(p.Changes, store.Change{Create: &store.NewRun{ID: tickRun(k), Workflow: e2e.ChaosJobName, Kind: hephtype.KindFlow,
			Status: hephtype.StatusCompleted, Input: schedIn, History: jobHist}})
	}
	if res, err := st.Apply(ctx, p); err != nil || res.Changes[0].Err != nil || res.Changes[1].Err != nil {
		t.Fatal(res, err)
	}

	f, problems := e2e.CheckChaos(ctx, st, runs)
	if !strings.Contains(strings.Join(problems, "\n"), "LOST: tick 2030-01-02T03:04:07Z") ||
		!strings.Contains(strings.Join(problems, "\n"), tickRun(3)+" of "+e2e.ChaosScheduleID+" exists and its tick is not logged") {
		t.Errorf("the missing run of a tick, or the run of a tick not logged, was not reported:\n%s", strings.Join(problems, "\n"))
	}
	if f.ScheduledJobs != 2 || f.Ticks != 2 {
		t.Errorf("%d scheduled jobs, %d ticks; want 2 and 2", f.ScheduledJobs, f.Ticks)
	}
	if f.Duplicates != 8 {
		t.Errorf("%d duplicates found, want 8 (activity, timer, signal, update, child report, continue-as-new, map element, job snooze):\n%s", f.Duplicates, strings.Join(problems, "\n"))
	}
	if f.Lost != 3 { // the stuck run, the job that did not cancel, the run of tick 2
		t.Errorf("%d lost runs found, want 3:\n%s", f.Lost, strings.Join(problems, "\n"))
	}
}
