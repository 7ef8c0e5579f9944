package commit

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/store"
)

// The committer emits the telemetry events of what it committed: a run
// started (a create), a step or activity attempt's outcome (a step_started
// entry and the outcome after it, written together), a run ended. It sees
// every committed change once, after its transaction committed, and never
// a change the store refused (a lost fence, a stale decision): so each
// event is emitted once per committed change, by the process that
// committed it, whichever worker ran the attempt.

type taskKey struct{}

// ForTask marks ctx as carrying the change of task t's outcome: the
// committer names t's queue and kind on the step events of that change.
func ForTask(ctx context.Context, t *store.Task) context.Context {
	return context.WithValue(ctx, taskKey{}, t)
}

func taskOf(ctx context.Context) *store.Task {
	t, _ := ctx.Value(taskKey{}).(*store.Task)
	return t
}

// emitCommitted emits the events of the committed requests of a batch.
func (m *Committer) emitCommitted(batch []*Request) {
	hub := m.cfg.Telemetry
	for _, r := range batch {
		run := r.Res.Run
		if r.Err != nil || run == nil {
			continue
		}
		if r.Change.Create != nil {
			if r.span != nil {
				r.span.End(trace.WithTimestamp(r.committedAt))
			}
			hub.Emit(telemetry.Event{Kind: telemetry.RunStarted}.WithRun(run))
		}
		if r.Update != nil {
			m.stepEvents(r, run)
		}
		m.runEnded(r, run)
	}
}

// runEnded emits the end of a run that r ended, and tells the callers
// waiting for it.
func (m *Committer) runEnded(r *Request, run *store.Run) {
	if !run.Status.Terminal() {
		return
	}
	if r.Change.Create == nil && (r.Update == nil || !r.Update.Status.Terminal()) {
		return // ended earlier: a stale change
	}
	m.waitMu.Lock()
	for _, ch := range m.waiters[run.ID] {
		select {
		case ch <- run:
		default:
		}
	}
	m.remember(run.ID)
	m.waitMu.Unlock()
	kind := map[hephtype.RunStatus]telemetry.Kind{
		hephtype.StatusCompleted: telemetry.RunCompleted, hephtype.StatusFailed: telemetry.RunFailed,
		hephtype.StatusCancelled: telemetry.RunCancelled, hephtype.StatusContinued: telemetry.RunContinued,
	}[run.Status]
	e := telemetry.Event{Kind: kind, Duration: run.UpdatedAt.Sub(run.CreatedAt)}.WithRun(run)
	if run.Error != "" {
		e.Err = errors.New(run.Error)
	}
	m.cfg.Telemetry.Emit(e)
	m.cfg.Tracer.RunEnded(run, r.committedAt)
}

// stepEvents emits step.completed or step.failed for each attempt whose
// outcome r committed: a step_started entry and, after it, the entry of
// the same step (flows) or activity (workflows) and index that ended the
// attempt.
func (m *Committer) stepEvents(r *Request, run *store.Run) {
	h := r.Update.History
	t := r.task
	for i := range h {
		if h[i].Kind != hephtype.EventStepStarted {
			continue
		}
		s := &h[i]
		var out *store.NewEvent
		retry := false
		for j := i + 1; j < len(h); j++ {
			o := &h[j]
			// A flow's entries name the step in Step (Name is the event
			// a step_completed routes); an activity's in Name.
			if o.Step != s.Step || (s.Step == "" && o.Name != s.Name) || o.Index != s.Index {
				continue
			}
			if out == nil && attemptEnd[o.Kind] != "" {
				out = o
			}
			if o.Kind == hephtype.EventStepRetrying {
				retry = true // the attempt failed and another is scheduled
				break
			}
			if out != nil && o.Kind == hephtype.EventStepStarted {
				break // the next attempt's
			}
		}
		if out == nil {
			continue
		}
		var d struct {
			StartedAt time.Time `json:"started_at"`
		}
		_ = json.Unmarshal(s.Data, &d)
		e := telemetry.Event{Kind: telemetry.StepCompleted, Step: s.Step, Index: s.Index, Attempt: s.Attempt, Retry: retry}.WithRun(run)
		if e.Step == "" {
			e.Step = s.Name // an activity
		}
		if t != nil {
			e.Queue, e.TaskID, e.TaskKind, e.Index = t.Queue, t.ID, string(t.Kind), t.Index
		}
		if !d.StartedAt.IsZero() {
			e.Duration = r.committedAt.Sub(d.StartedAt)
		}
		o := &tracing.Outcome{Step: e.Step, Index: s.Index, Attempt: s.Attempt, Result: outcomes[out.Kind], Start: d.StartedAt, End: r.committedAt}
		if attemptEnd[out.Kind] == "failed" {
			e.Kind = telemetry.StepFailed
			e.Err = errors.New(out.Error)
			o.Err = out.Error
		}
		if retry {
			o.Result = "retried"
		}
		m.cfg.Telemetry.Emit(e)
		m.cfg.Tracer.Attempt(run, t, o)
	}
}

// outcomes names the outcome of an attempt on its span.
var outcomes = map[hephtype.EventKind]string{
	hephtype.EventStepCompleted: "completed", hephtype.EventItemCompleted: "completed",
	hephtype.EventStepWaiting: "waiting", hephtype.EventStepSnoozed: "snoozed",
	hephtype.EventStepFailed: "failed", hephtype.EventItemFailed: "failed", hephtype.EventStepRetrying: "retried",
	hephtype.EventStepCancelled: "cancelled",
}

// attemptEnd classifies the history entries that end an attempt.
var attemptEnd = map[hephtype.EventKind]string{
	hephtype.EventStepCompleted: "completed", hephtype.EventItemCompleted: "completed",
	hephtype.EventStepWaiting: "completed", hephtype.EventStepSnoozed: "completed",
	hephtype.EventStepFailed: "failed", hephtype.EventItemFailed: "failed", hephtype.EventStepRetrying: "failed",
	hephtype.EventStepCancelled: "failed",
}

// remember records that a commit ended a run, for WaitStarted; the
// caller holds waitMu.
func (m *Committer) remember(runID string) {
	if m.ended == nil {
		m.ended = map[string]bool{}
	}
	if m.ended[runID] {
		return
	}
	if len(m.endedOrder) >= endedKept {
		delete(m.ended, m.endedOrder[0])
		m.endedOrder = m.endedOrder[1:]
	}
	m.ended[runID] = true
	m.endedOrder = append(m.endedOrder, runID)
}
