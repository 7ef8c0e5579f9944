package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/store"
)

// WaitKind says what a run waits for (Wait.Kind).
type WaitKind string

// The kinds of Wait.
const (
	// WaitKindSignal: the workflow is blocked receiving a signal, or a
	// phase of it accepts the signal now (Name).
	WaitKindSignal WaitKind = "signal"
	// WaitKindUpdate: a phase of the workflow accepts the update Name now.
	WaitKindUpdate WaitKind = "update"
	// WaitKindTimer: a durable timer fires at Due (a workflow's Sleep or
	// phase timeout, a flow's timer).
	WaitKindTimer WaitKind = "timer"
	// WaitKindGate: the approval gate Step waits for a decision by Users
	// or Groups, until Due when it has a deadline.
	WaitKindGate WaitKind = "gate"
	// WaitKindStep: the step Step waits to be resumed from outside with
	// one of Events (heph resume); Due is its timeout, if known.
	WaitKindStep WaitKind = "step"
	// WaitKindChild: the workflow waits for its child run RunID, of
	// workflow Name.
	WaitKindChild WaitKind = "child"
	// WaitKindQueuePaused: the queue Queue is paused and holds Step.
	WaitKindQueuePaused WaitKind = "queue_paused"
	// WaitKindQueueLimit: the queue runs Limit work tasks at once and is
	// full.
	WaitKindQueueLimit WaitKind = "queue_limit"
	// WaitKindConcurrencyKey: the queue runs at most Limit tasks of the
	// concurrency key Name at once, and that many run.
	WaitKindConcurrencyKey WaitKind = "concurrency_key"
	// WaitKindRateLimit: the queue started Limit tasks in its rate window;
	// the next window opens at Due.
	WaitKindRateLimit WaitKind = "rate_limit"
	// WaitKindNoWorker: no live worker takes tasks of Queue and has the
	// handler Name (a step's flow, an activity, a remote action, a
	// workflow).
	WaitKindNoWorker WaitKind = "no_worker"
	// WaitKindScheduled: a task of Step is due at Due (a job to run later,
	// a retry after a backoff).
	WaitKindScheduled WaitKind = "scheduled"
)

// Wait is one thing a run waits for (Client.WaitingFor). Fields that do
// not apply to the kind are zero.
type Wait struct {
	Kind WaitKind
	// Name: the signal or update name, the child's workflow, the
	// concurrency key, or the handler a worker must have (no_worker).
	Name string
	// Step is the step (or activity) the wait holds, when one does.
	Step string
	// Queue is the task queue of the queue kinds, no_worker and scheduled.
	Queue string
	// RunID is the child run (kind child).
	RunID string
	// Due: when a timer fires, a gate's deadline, a waiting step's
	// timeout, a scheduled task's ready time, a rate window's end.
	Due time.Time
	// Limit is the queue's limit (queue_limit, concurrency_key,
	// rate_limit).
	Limit int
	// Users, Groups and Prompt: an approval gate's assignees and question.
	Users  []string
	Groups []string
	Prompt string
	// Events are the events a waiting step may be resumed with.
	Events []string
	// Since is when a gate or a waiting step started to wait, if known.
	Since time.Time
}

// WaitingFor returns what a run waits for now, in a stable order: the
// signals, updates, timers and children a code-first workflow is blocked
// on (as recorded at its last decision), the waiting steps and approval
// gates of a flow, and what holds back each task of the run that is due
// but not running: a paused or full queue, a rate limit, a concurrency
// key, no live worker with the handler, or a ready time in the future.
// A finished run waits for nothing. It reads the run, its tasks and the
// live workers: one run, not a list.
func (c *Client) WaitingFor(ctx context.Context, runID string) ([]Wait, error) {
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		if errors.Is(err, ErrRunNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("waiting for %s: %w", runID, err)
	}
	out, err := c.waitingFor(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", runID, err)
	}
	return out, nil
}

func (c *Client) waitingFor(ctx context.Context, r *store.Run) ([]Wait, error) {
	if r.Status.Terminal() {
		return nil, nil
	}
	var out []Wait
	var err error
	switch r.Kind {
	case hephtype.KindWorkflow:
		out, err = workflowWaits(r)
	default:
		out, err = c.flowWaits(ctx, r)
	}
	if err != nil {
		return nil, err
	}
	tasks, err := c.cfg.Store.RunTasks(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	held, err := c.taskWaits(ctx, r, tasks, out)
	if err != nil {
		return nil, err
	}
	return append(out, held...), nil
}

// workflowWaits reads what a workflow's units waited for at its last
// decision; activities are not waits (the tasks tell what holds them).
func workflowWaits(r *store.Run) ([]Wait, error) {
	ws, children, err := wfrt.Waits(r)
	if err != nil {
		return nil, err
	}
	var out []Wait
	for _, w := range ws {
		switch w.Kind {
		case replay.WaitSignal:
			out = append(out, Wait{Kind: WaitKindSignal, Name: w.Name})
		case replay.WaitUpdate:
			out = append(out, Wait{Kind: WaitKindUpdate, Name: w.Name})
		case replay.WaitTimer:
			out = append(out, Wait{Kind: WaitKindTimer, Due: w.Due.UTC()})
		case replay.WaitChild:
			out = append(out, Wait{Kind: WaitKindChild, Name: w.Name, RunID: children[w.Seq]})
		}
	}
	return out, nil
}

// flowWaits lists a flow run's approval gates and other waiting steps.
func (c *Client) flowWaits(ctx context.Context, r *store.Run) ([]Wait, error) {
	run := c.toRun(r)
	var out []Wait
	gates := map[string]bool{}
	if f, err := c.flows.Flow(r.Workflow, r.Version); err == nil && slices.ContainsFunc(run.Steps, func(s StepState) bool { return s.Status == hephtype.StepWaiting }) {
		pending, err := c.PendingApprovals(ctx, &ApprovalFilter{RunID: r.ID})
		if err != nil {
			return nil, err
		}
		for _, p := range pending {
			gates[p.Step] = true
			out = append(out, Wait{Kind: WaitKindGate, Step: p.Step, Users: p.Users, Groups: p.Groups, Prompt: p.Prompt, Due: p.Deadline, Since: p.WaitingSince})
		}
		for _, s := range run.Steps {
			if s.Status != hephtype.StepWaiting || gates[s.Name] {
				continue
			}
			w := Wait{Kind: WaitKindStep, Step: s.Name}
			if spec, ok := f.Step(s.Name); ok {
				w.Events = slices.Clone(spec.Events)
			}
			out = append(out, w)
		}
		return out, nil
	}
	for _, s := range run.Steps {
		if s.Status == hephtype.StepWaiting {
			out = append(out, Wait{Kind: WaitKindStep, Step: s.Name})
		}
	}
	return out, nil
}

// taskWaits tells what holds back each task of the run that is not
// running; known are the waits found so far (a timer already named by
// the workflow's snapshot is not repeated).
func (c *Client) taskWaits(ctx context.Context, r *store.Run, tasks []*store.Task, known []Wait) ([]Wait, error) {
	now := c.cfg.Clock.Now()
	var out []Wait
	var workers []*store.Worker
	workersRead := false
	queues := map[string]*store.QueueStats{}
	for _, t := range tasks {
		if t.Owner != "" && t.LeaseUntil.After(now) {
			continue // running
		}
		switch t.Kind {
		case store.TaskWorkflowTimer:
			if !slices.ContainsFunc(known, func(w Wait) bool { return w.Kind == WaitKindTimer }) {
				out = append(out, Wait{Kind: WaitKindTimer, Due: t.ReadyAt.UTC()})
			}
			continue
		case store.TaskTimer:
			if i := slices.IndexFunc(known, func(w Wait) bool { return w.Step == t.Step && (w.Kind == WaitKindStep || w.Kind == WaitKindGate) }); i >= 0 {
				if known[i].Due.IsZero() {
					known[i].Due = t.ReadyAt.UTC()
				}
				continue
			}
			out = append(out, Wait{Kind: WaitKindTimer, Step: t.Step, Due: t.ReadyAt.UTC()})
			continue
		}
		step := t.Step
		if t.Kind == store.TaskDecision {
			step = ""
		}
		if t.ReadyAt.After(now) {
			out = append(out, Wait{Kind: WaitKindScheduled, Step: step, Queue: t.Queue, Due: t.ReadyAt.UTC()})
			continue
		}
		if t.Kind == store.TaskStep || t.Kind == store.TaskActivity {
			w, err := c.queueHold(ctx, queues, t, now)
			if err != nil {
				return nil, err
			}
			if w != nil {
				out = append(out, *w)
				continue
			}
		}
		if !workersRead {
			ws, err := c.cfg.Store.ListWorkers(ctx, &store.ListWorkersParams{Now: now})
			if err != nil {
				return nil, err
			}
			workers, workersRead = ws, true
		}
		if !served(workers, t) {
			out = append(out, Wait{Kind: WaitKindNoWorker, Name: handlerOf(t), Step: step, Queue: t.Queue})
		}
	}
	return out, nil
}

// queueHold tells whether the flow control of t's queue holds t back.
func (c *Client) queueHold(ctx context.Context, cache map[string]*store.QueueStats, t *store.Task, now time.Time) (*Wait, error) {
	qs, ok := cache[t.Queue]
	if !ok {
		stats, err := c.cfg.Store.QueueStats(ctx, &store.QueueStatsParams{Names: []string{t.Queue}, Now: now, TopKeys: 100})
		if err != nil {
			return nil, err
		}
		if len(stats) > 0 && stats[0].Configured {
			qs = stats[0]
		}
		cache[t.Queue] = qs
	}
	if qs == nil {
		return nil, nil
	}
	q := qs.Queue
	w := &Wait{Step: t.Step, Queue: t.Queue}
	switch {
	case q.Paused:
		w.Kind = WaitKindQueuePaused
	case q.MaxRunning > 0 && qs.Running >= q.MaxRunning:
		w.Kind, w.Limit = WaitKindQueueLimit, q.MaxRunning
	case q.MaxRunningPerKey > 0 && keyRunning(qs, t.ConcurrencyKey) >= q.MaxRunningPerKey:
		w.Kind, w.Limit, w.Name = WaitKindConcurrencyKey, q.MaxRunningPerKey, t.ConcurrencyKey
	case q.Rate.Limit > 0 && !qs.Window.IsZero() && qs.WindowStarts >= q.Rate.Limit:
		w.Kind, w.Limit, w.Due = WaitKindRateLimit, q.Rate.Limit, qs.Window.Add(q.Rate.Period).UTC()
	default:
		return nil, nil
	}
	return w, nil
}

func keyRunning(qs *store.QueueStats, key string) int {
	for _, k := range qs.RunningByKey {
		if k.Key == key {
			return k.Count
		}
	}
	return 0
}

// served reports whether a live worker claims from t's queue and has
// its handler (any handler, for a task that names none).
func served(workers []*store.Worker, t *store.Task) bool {
	for _, w := range workers {
		if !slices.Contains(w.Queues, t.Queue) {
			continue
		}
		if t.Handler == "" || slices.Contains(w.Handlers, t.Handler) {
			return true
		}
	}
	return false
}

// handlerOf says what a worker needs to run t.
func handlerOf(t *store.Task) string {
	if t.Handler == "" {
		return "any handler"
	}
	return strings.TrimSpace(store.DescribeHandler(t.Handler))
}
