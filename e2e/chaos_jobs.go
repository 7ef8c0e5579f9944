package e2e

// The jobs of the chaos workload (e2e/chaos.go): a job kind whose jobs
// snooze once, cancel themselves, fail once and are retried, fail for
// good, or complete, each with a concurrency key (a few tenants) on a
// queue under flow control, so that every job goes through the controlled
// claim; a schedule that inserts such jobs every second while the faults
// happen; and the checks of both (CheckChaos calls them).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
)

// Names of the chaos workload's jobs and schedule.
const (
	ChaosJobName = "chaos_job"
	// ChaosJobQueue is the queue of the chaos jobs: the tests configure
	// it with ChaosJobQueueOptions (SetQueue), so that every job is
	// claimed by the controlled claim.
	ChaosJobQueue = "chaos_jobs"
	// ChaosScheduleID is the schedule the tests create: every second, a
	// chaos job (ChaosScheduledJob), every tick started (allow_all).
	ChaosScheduleID = "chaos-tick"
)

// How a chaos job ends (ChaosJobArgs.End).
const (
	// ChaosJobComplete completes at its first attempt.
	ChaosJobComplete = "complete"
	// ChaosJobSnooze snoozes once (job.Snooze), then completes: the same
	// attempt runs twice.
	ChaosJobSnooze = "snooze"
	// ChaosJobCancel cancels itself (job.Cancel, ChaosJobCancelReason).
	ChaosJobCancel = "cancel"
	// ChaosJobRetry fails its first attempt and completes its second.
	ChaosJobRetry = "retry"
	// ChaosJobFail fails both of its attempts: the job fails.
	ChaosJobFail = "fail"
)

// ChaosJobCancelReason is the error a cancelled chaos job ends with.
const ChaosJobCancelReason = "chaos: cancelled from inside"

// chaosJobAttempts bounds a chaos job's attempts.
const chaosJobAttempts = 2

// ChaosJobArgs are the arguments of a chaos job.
type ChaosJobArgs struct {
	N int `json:"n"`
	// Tenant is the job's concurrency key.
	Tenant string `json:"tenant"`
	// End says how the job ends: ChaosJobComplete, ChaosJobSnooze,
	// ChaosJobCancel, ChaosJobRetry or ChaosJobFail.
	End string `json:"end"`
}

// ChaosJobQueueOptions are the flow-control limits of ChaosJobQueue: two
// jobs of a tenant at once, and a rate generous enough never to hold the
// workload back; it is there so that the claims keep rate windows too.
var ChaosJobQueueOptions = heph.QueueOptions{
	MaxRunningPerKey: 2,
	KeyRate:          heph.RateLimit{Limit: 1000, Period: time.Second},
}

// ChaosJobInput is the i-th chaos job of a test: its ends cycle through
// every kind, its tenants through four keys.
func ChaosJobInput(i int) ChaosJobArgs {
	ends := []string{ChaosJobComplete, ChaosJobSnooze, ChaosJobCancel, ChaosJobComplete, ChaosJobRetry, ChaosJobSnooze, ChaosJobFail}
	return ChaosJobArgs{N: i, Tenant: fmt.Sprintf("t%d", i%4), End: ends[i%len(ends)]}
}

// ChaosScheduledJob are the arguments of the jobs ChaosScheduleID
// inserts: each snoozes once.
var ChaosScheduledJob = ChaosJobArgs{N: -1, Tenant: "sched", End: ChaosJobSnooze}

// ChaosSchedule is the schedule the tests create while the faults
// happen: a chaos job every second; every tick starts its job, whatever
// runs.
func ChaosSchedule() *heph.Schedule {
	return &heph.Schedule{ID: ChaosScheduleID, Target: heph.TargetJob, TargetName: ChaosJobName,
		Every: time.Second, Overlap: heph.OverlapAllowAll, Input: ChaosScheduledJob}
}

// ChaosJob is the chaos job kind, for inserts (its jobs run in the
// clients RegisterChaos registers a kind of the same name in). Jobs are
// unique by their UniqueKey forever (a period of a century), so that an
// insert whose outcome was lost can be made again.
var ChaosJob = chaosJobKind(nil)

// chaosJobKind is the chaos job kind whose snoozing jobs read their
// history from st, to tell whether they snoozed already.
func chaosJobKind(st store.Store) *job.Kind[ChaosJobArgs] {
	return job.MustNew(ChaosJobName, func(ctx context.Context, j *job.Job[ChaosJobArgs]) error {
		info, _ := flow.CallInfo(ctx)
		if err := chaosWork(ctx, ChaosExec{RunID: info.RunID, Step: info.Step, Index: info.Index, Attempt: info.Attempt}, 0); err != nil {
			return err
		}
		switch j.Args.End {
		case ChaosJobSnooze:
			snoozed, err := chaosSnoozed(ctx, st, j.ID)
			if err != nil {
				return err
			}
			if !snoozed {
				return job.Snooze(20 * time.Millisecond)
			}
		case ChaosJobCancel:
			return job.Cancel(ChaosJobCancelReason)
		case ChaosJobRetry:
			if j.Attempt == 1 {
				return errors.New("chaos: the first attempt of a retry job fails")
			}
		case ChaosJobFail:
			return fmt.Errorf("chaos: attempt %d of a fail job fails", j.Attempt)
		}
		return nil
	}, &job.Options[ChaosJobArgs]{
		Queue: ChaosJobQueue, MaxAttempts: chaosJobAttempts, Retry: chaosRetry,
		Unique:         &job.Unique{Period: 100 * 365 * 24 * time.Hour},
		ConcurrencyKey: func(a ChaosJobArgs) string { return a.Tenant },
	})
}

// chaosSnoozed reads the job's history: has it snoozed already? The
// snooze was committed before the task ran again (its commit deleted the
// task and scheduled it anew), so this execution sees it. A read that
// fails (a killed connection) is tried again until ctx ends.
func chaosSnoozed(ctx context.Context, st store.Store, runID string) (bool, error) {
	if st == nil {
		return false, errors.New("chaos: the chaos job kind runs only as registered by RegisterChaos")
	}
	for {
		h, err := st.History(ctx, &store.HistoryParams{RunID: runID})
		if err == nil {
			for _, ev := range h {
				if ev.Kind == hephtype.EventStepSnoozed {
					return true, nil
				}
			}
			return false, nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// checkJobHistory checks a chaos job's history and its end against its
// arguments: one start and one end of the run; exactly one step_snoozed
// when it snoozes (none otherwise); at most one step_completed; at most
// one failure entry (step_failed, step_retrying) per attempt; at most one
// step_started per attempt and execution (a snooze runs the same attempt
// again); and the status and error its arguments call for.
func checkJobHistory(h []store.Event, run *store.Run, in ChaosJobArgs) (historyCheck, int) {
	var c historyCheck
	t := tally{c: &c}
	snoozes := map[int]int{} // by attempt
	started := map[int]int{}
	for _, ev := range h {
		if t.run(ev) {
			continue
		}
		switch ev.Kind {
		case hephtype.EventStepStarted:
			started[ev.Attempt]++
			t.started(ev, fmt.Sprintf("step_started of attempt %d, execution %d", ev.Attempt, started[ev.Attempt]))
		case hephtype.EventStepSnoozed:
			snoozes[ev.Attempt]++
			t.once("step_snoozed")
		case hephtype.EventStepScheduled:
			t.once("step_scheduled")
		case hephtype.EventStepCompleted:
			t.once("step_completed")
		case hephtype.EventStepFailed, hephtype.EventStepRetrying:
			t.once(fmt.Sprintf("%s of attempt %d", ev.Kind, ev.Attempt))
		case hephtype.EventStepCancelled:
			t.once("step_cancelled")
		}
	}
	for a, n := range started {
		if n > snoozes[a]+1 {
			c.duplicates = append(c.duplicates, fmt.Sprintf("attempt %d started %d times with %d snoozes", a, n, snoozes[a]))
		}
	}
	nSnoozes := t.count("step_snoozed")
	if in.End == ChaosJobSnooze && nSnoozes == 0 {
		c.missing = append(c.missing, "the job never snoozed")
	}
	if in.End != ChaosJobSnooze && nSnoozes > 0 {
		c.duplicates = append(c.duplicates, fmt.Sprintf("a job that does not snooze (%s) snoozed %d times", in.End, nSnoozes))
	}
	if t.count(runEnd) == 0 {
		c.missing = append(c.missing, "the run never ended")
	}
	failed := func(a int) bool {
		return t.count(fmt.Sprintf("step_failed of attempt %d", a))+t.count(fmt.Sprintf("step_retrying of attempt %d", a)) > 0
	}
	want, wantErr := hephtype.StatusCompleted, ""
	switch in.End {
	case ChaosJobCancel:
		want, wantErr = hephtype.StatusCancelled, ChaosJobCancelReason
	case ChaosJobFail:
		want = hephtype.StatusFailed
		for a := 1; a <= chaosJobAttempts; a++ {
			if !failed(a) {
				c.missing = append(c.missing, fmt.Sprintf("attempt %d of a fail job has no failure entry", a))
			}
		}
	case ChaosJobRetry:
		if !failed(1) {
			c.missing = append(c.missing, "the first attempt of a retry job has no failure entry")
		}
	}
	switch {
	case run.Status != want:
		c.missing = append(c.missing, fmt.Sprintf("the job (%s) is %s (%q), want %s", in.End, run.Status, run.Error, want))
	case wantErr != "" && run.Error != wantErr:
		c.missing = append(c.missing, fmt.Sprintf("the job (%s) ended with error %q, want %q", in.End, run.Error, wantErr))
	case want == hephtype.StatusCompleted && t.count("step_completed") == 0:
		c.missing = append(c.missing, "the completed job has no step_completed")
	}
	return c, nSnoozes
}

// chaosScheduleCheck is what checkChaosSchedule found.
type chaosScheduleCheck struct {
	// runs are the runs of the schedule's ticks, by id.
	runs map[string]bool
	// ticks counts the log's started entries.
	ticks    int
	problems []string
	// dups counts ticks with two runs or two log entries; lost the ticks
	// logged started whose run does not exist.
	dups, lost int
}

// checkChaosSchedule checks ChaosScheduleID, when the test created it,
// against all, every run in the store: no tick has more than one run
// (ids are <schedule>@<tick>), no tick is logged twice, every tick
// logged started has its run and every run of a tick was logged started,
// and no tick failed. The test pauses the schedule, and backfills the
// tick it left pending (whose run a process may have created, or be
// about to), before the workload ends.
func checkChaosSchedule(ctx context.Context, st store.Store, all []*store.Run) (*chaosScheduleCheck, error) {
	if _, err := st.GetSchedule(ctx, ChaosScheduleID); err != nil {
		if errors.Is(err, store.ErrScheduleNotFound) {
			return nil, nil
		}
		return nil, err
	}
	log, err := st.ScheduleTicks(ctx, &store.ScheduleTicksParams{ID: ChaosScheduleID, Limit: 1000})
	if err != nil {
		return nil, err
	}
	sc := &chaosScheduleCheck{runs: map[string]bool{}}
	fail := func(format string, args ...any) { sc.problems = append(sc.problems, fmt.Sprintf(format, args...)) }
	if len(log) == 1000 {
		fail("schedule %s: the log holds 1000 entries or more; the check reads 1000", ChaosScheduleID)
	}
	byRun := map[string]*store.Run{}
	byTick := map[time.Time][]string{}
	prefix := ChaosScheduleID + "@"
	for _, r := range all {
		if !strings.HasPrefix(r.ID, prefix) {
			continue
		}
		byRun[r.ID] = r
		sc.runs[r.ID] = true
		tick, err := time.Parse(time.RFC3339, strings.TrimPrefix(r.ID, prefix))
		if err != nil || r.Workflow != ChaosJobName {
			fail("run %s (%s) is not the run of a tick of %s", r.ID, r.Workflow, ChaosScheduleID)
			continue
		}
		byTick[tick.UTC()] = append(byTick[tick.UTC()], r.ID)
	}
	for tick, ids := range byTick {
		if len(ids) > 1 {
			sc.dups++
			fail("DUPLICATE: tick %s of %s has %d runs: %v", tick.Format(time.RFC3339), ChaosScheduleID, len(ids), ids)
		}
	}
	logged := map[time.Time]bool{}
	loggedRuns := map[string]bool{}
	for _, e := range log {
		tick := e.Tick.UTC()
		if logged[tick] {
			sc.dups++
			fail("DUPLICATE: tick %s of %s is in the log twice", tick.Format(time.RFC3339), ChaosScheduleID)
		}
		logged[tick] = true
		if e.Outcome != store.TickStarted {
			fail("tick %s of %s: outcome %s (%s), want started (overlap allow_all)", tick.Format(time.RFC3339), ChaosScheduleID, e.Outcome, e.Error)
			continue
		}
		sc.ticks++
		loggedRuns[e.RunID] = true
		if want := ChaosScheduleID + "@" + tick.Format("2006-01-02T15:04:05Z"); e.RunID != want {
			fail("tick %s of %s started run %q, want %q", tick.Format(time.RFC3339), ChaosScheduleID, e.RunID, want)
		}
		if byRun[e.RunID] == nil {
			sc.lost++
			fail("LOST: tick %s of %s is logged started and its run %s does not exist", tick.Format(time.RFC3339), ChaosScheduleID, e.RunID)
		}
	}
	for id := range byRun {
		if !loggedRuns[id] {
			fail("run %s of %s exists and its tick is not logged started", id, ChaosScheduleID)
		}
	}
	return sc, nil
}

// chaosJobRunArgs reads a job run's arguments.
func chaosJobRunArgs(r *store.Run) (ChaosJobArgs, error) {
	var in ChaosJobArgs
	err := json.Unmarshal(r.Input, &in)
	return in, err
}
