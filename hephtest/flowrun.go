// Package hephtest helps test code that uses Hephaestus.
//
// RunFlow drives a flow through the engine's pure decision core in memory:
// no store, no workers, no clock. Steps run synchronously in the order the
// core schedules them, retries run at once (backoff is a runtime concern),
// and timers fire only when the test says so. It is the quickest way to
// unit-test a flow's routing and step code.
//
// WorkflowEnv runs code-first workflows (package workflow) in memory, with
// mocked activities and a virtual clock that skips to the next timer;
// ReplayHistory checks that current code still replays the history of a
// run exported with Client.ExportHistory.
package hephtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
)

// FlowRun is a run of a flow held in memory.
type FlowRun struct {
	flow    *flow.Flow
	state   *engine.State
	queue   []engine.ScheduleStep
	timers  map[string]bool
	details map[string]json.RawMessage // last heartbeat details, by step/index
	history []HistoryEntry
	// Calls counts step invocations by step name (elements of map steps
	// included).
	Calls map[string]int
}

// HistoryEntry is one entry of a run's history.
type HistoryEntry struct {
	Kind    hephtype.EventKind
	Step    string
	Index   int
	Attempt int
	Event   string
	Data    json.RawMessage
	Error   string
}

func (h HistoryEntry) String() string {
	s := string(h.Kind)
	if h.Step != "" {
		s += " " + h.Step
	}
	if h.Event != "" {
		s += " -> " + h.Event
	}
	if h.Error != "" {
		s += " (" + h.Error + ")"
	}
	return s
}

// RunFlow starts a run of f with input (marshalled to JSON) and drives it
// until it finishes or waits.
func RunFlow(ctx context.Context, f *flow.Flow, input any) (*FlowRun, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("hephtest: input does not encode as JSON: %w", err)
	}
	r := &FlowRun{flow: f, timers: map[string]bool{}, details: map[string]json.RawMessage{}, Calls: map[string]int{}}
	r.take(engine.Start(flowgraph.Of(f), raw))
	return r, r.drive(ctx)
}

// Status returns the run's status.
func (r *FlowRun) Status() hephtype.RunStatus { return r.state.Status }

// Output returns the run's output: the outputs of the steps that ended
// their paths, by context key.
func (r *FlowRun) Output() json.RawMessage { return r.state.Output }

// Err returns the run's error message, if it failed or was cancelled.
func (r *FlowRun) Err() string { return r.state.Error }

// History returns the run's history.
func (r *FlowRun) History() []HistoryEntry { return append([]HistoryEntry(nil), r.history...) }

// StepResult is a step's state within the run.
type StepResult struct {
	Status  hephtype.StepStatus
	Event   string
	Attempt int
	Output  json.RawMessage
}

// Step returns the named step's state.
func (r *FlowRun) Step(name string) (StepResult, bool) {
	i, ok := flowgraph.Of(r.flow).Lookup(name)
	if !ok {
		return StepResult{}, false
	}
	st := r.state.Steps[i]
	return StepResult{Status: st.Status, Event: st.Event, Attempt: st.Attempt, Output: st.Output}, true
}

// TimerArmed reports whether the named waiting step's timeout is armed.
func (r *FlowRun) TimerArmed(step string) bool { return r.timers[step] }

// Resume completes a waiting step with event and payload and drives the
// run on.
func (r *FlowRun) Resume(ctx context.Context, step, event string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("hephtest: payload does not encode as JSON: %w", err)
	}
	if err := r.apply(engine.Resume{Step: step, Event: event, Payload: raw}); err != nil {
		return err
	}
	return r.drive(ctx)
}

// FireTimer fires a waiting step's timeout and drives the run on.
func (r *FlowRun) FireTimer(ctx context.Context, step string) error {
	if !r.timers[step] {
		return fmt.Errorf("hephtest: step %q has no armed timer", step)
	}
	if err := r.apply(engine.TimerFired{Step: step}); err != nil {
		return err
	}
	return r.drive(ctx)
}

// Cancel cancels the run.
func (r *FlowRun) Cancel(reason string) error { return r.apply(engine.Cancel{Reason: reason}) }

func (r *FlowRun) apply(ev engine.Event) error {
	d, err := engine.Apply(flowgraph.Of(r.flow), r.state, ev)
	if err != nil {
		return err
	}
	r.take(d)
	return nil
}

func (r *FlowRun) take(d *engine.Decision) {
	r.state = d.State
	for _, h := range d.History {
		r.history = append(r.history, HistoryEntry(h))
	}
	for _, c := range d.Commands {
		switch c := c.(type) {
		case engine.ScheduleStep:
			r.queue = append(r.queue, c)
		case engine.StartTimer:
			r.timers[c.Step] = true
		case engine.CancelTimer:
			delete(r.timers, c.Step)
		case engine.CancelStep:
			r.queue = dropStep(r.queue, c)
		case engine.CompleteRun, engine.FailRun, engine.CancelRun:
			r.queue = nil
			clear(r.timers)
		}
	}
}

func dropStep(q []engine.ScheduleStep, c engine.CancelStep) []engine.ScheduleStep {
	out := q[:0]
	for _, s := range q {
		if s.Step != c.Step || (c.Index >= 0 && s.Index != c.Index) {
			out = append(out, s)
		}
	}
	return out
}

// drive runs scheduled steps until none is left.
func (r *FlowRun) drive(ctx context.Context) error {
	for len(r.queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := r.queue[0]
		r.queue = r.queue[1:]
		r.Calls[s.Step]++
		key := fmt.Sprintf("%s/%d", s.Step, s.Index)
		out, err := r.flow.Invoke(ctx, flow.Call{
			RunID: "hephtest", Step: s.Step, Index: s.Index, Attempt: s.Attempt,
			IdempotencyKey: key, Input: s.Input, Item: s.Item,
			// As the durable runtime does, the next attempt reads the
			// details this one recorded last.
			Details: r.details[key],
			Heartbeat: func(details any) error {
				b, err := json.Marshal(details)
				if err != nil {
					return fmt.Errorf("heartbeat details of step %q do not encode as JSON: %w", s.Step, err)
				}
				r.details[key] = b
				return nil
			},
		})
		var ev engine.Event
		switch {
		case err != nil:
			spec, _ := r.flow.Step(s.Step)
			retry := spec.Retry.Retryable(err)
			if s.Index >= 0 {
				ev = engine.ItemFailed{Step: s.Step, Index: s.Index, Attempt: s.Attempt, Error: err.Error(), Retryable: retry}
			} else {
				ev = engine.StepFailed{Step: s.Step, Attempt: s.Attempt, Error: err.Error(), Retryable: retry}
			}
		case s.Index >= 0:
			if out.Wait {
				return errors.New("hephtest: a map element returned Wait")
			}
			ev = engine.ItemCompleted{Step: s.Step, Index: s.Index, Attempt: s.Attempt, Output: out.Output}
		case out.Wait:
			ev = engine.StepWaiting{Step: s.Step, Attempt: s.Attempt}
		default:
			ev = engine.StepCompleted{Step: s.Step, Attempt: s.Attempt, Event: out.Event, Output: out.Output}
		}
		if err := r.apply(ev); err != nil {
			return fmt.Errorf("hephtest: step %q: %w", s.Step, err)
		}
	}
	return nil
}
