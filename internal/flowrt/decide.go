package flowrt

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// loadState decodes the engine state kept on a flow run. The run input,
// and a completed run's output, are stored once, in the run's own
// columns, and put back here (encodeState leaves them out; a state
// written before it did keeps its output, which is the same value).
func loadState(run *store.Run) (*engine.State, error) {
	var s engine.State
	if err := json.Unmarshal(run.State, &s); err != nil {
		return nil, fmt.Errorf("run %s: decode state: %w", run.ID, err)
	}
	s.Input = run.Input
	if s.Status == hephtype.StatusCompleted && len(s.Output) == 0 {
		s.Output = run.Output
	}
	return &s, nil
}

// encodeState is the state as the run row keeps it: without the input,
// and without the output once the run has completed, since the
// decision that completes it writes that output to the run's output
// column (translate) and loadState reads it back from there.
func encodeState(s *engine.State) json.RawMessage {
	c := *s
	c.Input = nil
	if c.Status == hephtype.StatusCompleted {
		c.Output = nil
	}
	b, err := json.Marshal(&c)
	if err != nil {
		// engine.State holds only JSON-safe values.
		panic(fmt.Sprintf("hephaestus: encode engine state: %v", err))
	}
	return b
}

// translate turns an engine decision into what the store writes.
func translate(f *flow.Flow, d *engine.Decision, now time.Time) *store.Update {
	u := &store.Update{Status: d.State.Status, State: encodeState(d.State)}
	handler := store.FlowHandler(f.Name(), f.Version())
	for _, h := range d.History {
		u.History = append(u.History, store.NewEvent{
			Kind: h.Kind, Step: h.Step, Index: h.Index, Attempt: h.Attempt, Name: h.Event, Data: h.Data, Error: h.Error,
		})
	}
	for _, c := range d.Commands {
		switch c := c.(type) {
		case engine.ScheduleStep:
			spec, _ := f.Step(c.Step)
			queue, prio := taskPlace(spec, d.State)
			ready := now
			if c.Delay > 0 {
				ready = store.RoundUpMicro(now.Add(c.Delay))
				// The history tells when the snoozed attempt is due.
				for i := range u.History {
					if h := &u.History[i]; h.Kind == hephtype.EventStepSnoozed && h.Step == c.Step && (c.Index < 0 || h.Index == c.Index) && h.Attempt == c.Attempt {
						h.Data = worker.MustJSON(snoozeData{After: c.Delay.String(), ReadyAt: ready.UTC()})
					}
				}
			}
			if c.Retry {
				backoff := spec.Retry.Backoff(c.Attempt, rand.Float64())
				ready = now.Add(backoff)
				// The history tells the backoff chosen.
				for i := range u.History {
					if h := &u.History[i]; h.Kind == hephtype.EventStepRetrying && h.Step == c.Step && (c.Index < 0 || h.Index == c.Index) && h.Attempt == c.Attempt {
						h.Data = worker.MustJSON(worker.RetryData{Backoff: backoff, ReadyAt: ready.UTC()})
					}
				}
			}
			// A remote step's tasks go to the workers outside the process
			// that registered its action; the flow's other tasks need the
			// flow.
			h := handler
			if spec.Remote != "" {
				h = store.ActionHandler(spec.Remote)
			}
			u.Tasks = append(u.Tasks, store.NewTask{
				Queue: queue, Kind: store.TaskStep, Step: c.Step, Index: c.Index, Attempt: c.Attempt,
				Payload: c.Input, Item: c.Item, Priority: prio, ReadyAt: ready, Handler: h,
			})
		case engine.StartTimer:
			spec, _ := f.Step(c.Step)
			queue, prio := taskPlace(spec, d.State)
			fireAt := store.RoundUpMicro(now.Add(c.After))
			// The history tells when the timer is due.
			for i := range u.History {
				if h := &u.History[i]; h.Kind == hephtype.EventTimerStarted && h.Step == c.Step {
					h.Data = worker.MustJSON(timerData{After: c.After.String(), FireAt: fireAt.UTC()})
				}
			}
			u.Tasks = append(u.Tasks, store.NewTask{
				Queue: queue, Kind: store.TaskTimer, Step: c.Step, Index: -1, Priority: prio, ReadyAt: fireAt,
				Handler: handler,
			})
		case engine.CancelTimer:
			u.Cancel = append(u.Cancel, store.TaskMatch{Kind: store.TaskTimer, Step: c.Step, Index: -1})
		case engine.CancelStep:
			u.Cancel = append(u.Cancel, store.TaskMatch{Kind: store.TaskStep, Step: c.Step, Index: c.Index})
		case engine.CompleteRun:
			u.Output = c.Output
			u.Cancel = append(u.Cancel, store.TaskMatch{Index: -1})
		case engine.FailRun:
			u.Error = c.Error
			u.Cancel = append(u.Cancel, store.TaskMatch{Index: -1})
		case engine.CancelRun:
			u.Error = c.Reason
			u.Cancel = append(u.Cancel, store.TaskMatch{Index: -1})
		}
	}
	return u
}

// taskPlace is the queue and priority of a task of a step: the step's,
// unless the run overrides them (a job inserted with its own), so that
// every attempt, retry and snooze keeps what the run was started with.
func taskPlace(spec flow.StepSpec, s *engine.State) (string, int) {
	queue, prio := spec.Queue, spec.Priority
	if s.Queue != "" {
		queue = s.Queue
	}
	if s.Priority != nil {
		prio = *s.Priority
	}
	return queue, prio
}

// snoozeData is the Data of a step_snoozed entry.
type snoozeData struct {
	After   string    `json:"after"`
	ReadyAt time.Time `json:"ready_at"`
}

// timerData is the Data of a flow's timer_started entry.
type timerData struct {
	After  string    `json:"after"`
	FireAt time.Time `json:"fire_at"`
}

// decideWith returns a Decide function that applies ev to a flow run. A
// stale event (a late or duplicate report) writes nothing but lets the
// change commit, so the fenced task is still removed.
func (r *Runtime) decideWith(ev engine.Event, now time.Time, strict bool) func(run *store.Run) (*store.Update, error) {
	return func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindFlow {
			return nil, fmt.Errorf("run %s is a %s, not a flow", run.ID, run.Kind)
		}
		f, err := r.Lookup(run.Workflow, run.Version)
		if err != nil {
			return nil, err
		}
		s, err := loadState(run)
		if err != nil {
			return nil, err
		}
		d, err := engine.Apply(flowgraph.Of(f), s, ev)
		if err != nil {
			if !strict && errors.Is(err, engine.ErrStale) {
				return &store.Update{}, nil
			}
			return nil, err
		}
		u := translate(f, d, now)
		if !run.Condition.IsZero() && len(u.History) > 0 {
			u.Condition = &store.Condition{} // the run moves again
		}
		return u, nil
	}
}
