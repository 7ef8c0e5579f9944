package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/triggers"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// EventReceived is the event a flow step waiting for an event
// (AwaitEvent) is resumed with, unless AwaitEventOptions.ResumeWith
// names another.
const EventReceived = "received"

// AwaitEventOptions are the optional parameters of AwaitEvent.
type AwaitEventOptions struct {
	// Match, when set, is a CEL expression over event (a map with id,
	// name, data and at) and input (Input) that must be true of the
	// event: `event.data.invoice == input.invoice`. One that does not
	// compile is refused with ErrInvalidInput, naming it.
	Match string
	// Input is what the expression reads as input (encoded as JSON, at
	// most 64 KiB).
	Input any
	// LookBack, when positive, lets an event stored up to LookBack before
	// the call match.
	LookBack time.Duration
	// ResumeWith is the event the step is resumed with; "received" when
	// empty. The step must declare it (flow.Events).
	ResumeWith string
}

// EventWait is a run's wait for an event (Client.EventWaits).
type EventWait struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// Step is the waiting step; empty for a workflow.
	Step string `json:"step,omitempty"`
	// Kind is "workflow" or "step".
	Kind  string `json:"kind"`
	Event string `json:"event"`
	Match string `json:"match,omitempty"`
	// From and Until bound the times of the events that may match
	// (Until zero: none).
	From  time.Time `json:"from"`
	Until time.Time `json:"until,omitzero"`
	// CreatedAt is when the wait was registered.
	CreatedAt time.Time `json:"created_at"`
	// MatchedEventID is the event that matched (empty while none did).
	MatchedEventID string    `json:"matched_event_id,omitempty"`
	MatchedAt      time.Time `json:"matched_at,omitzero"`
	// DeliveredAt is when the wait was done: the event delivered, or the
	// wait closed (its run ended, or its deadline passed) when
	// MatchedEventID is empty.
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
}

// AwaitEvent registers, from the code of a flow step, a wait for the
// first event named event that opts.Match accepts; the step then returns
// flow.Wait (it is declared with flow.Waits, whose timeout still routes
// "timeout"). The matching event resumes the step with "received" (or
// opts.ResumeWith), the event ({"id", "name", "data", "at"}) as its
// output, once. A retried attempt registers the same wait again, which
// is a no-op.
func (c *Client) AwaitEvent(ctx context.Context, event string, opts *AwaitEventOptions) error {
	var o AwaitEventOptions
	if opts != nil {
		o = *opts
	}
	if o.ResumeWith == "" {
		o.ResumeWith = EventReceived
	}
	input, err := marshalEventData(o.Input)
	if err != nil {
		return fmt.Errorf("%w: await event %q: input: %w", ErrInvalidInput, event, err)
	}
	return c.awaitStep(ctx, &triggers.AwaitRequest{Event: event, Match: o.Match, Input: input, LookBack: o.LookBack}, o.ResumeWith)
}

// awaitStep registers the wait of the step ctx belongs to.
func (c *Client) awaitStep(ctx context.Context, r *triggers.AwaitRequest, resumeWith string) error {
	info, ok := flow.CallInfo(ctx)
	if !ok {
		return fmt.Errorf("%w: await event %q: ctx is not a step's", ErrInvalidInput, r.Event)
	}
	now := c.cfg.Clock.Now()
	return c.putEventWait(ctx, &store.EventWait{
		ID: info.RunID + ":" + info.Step + "#" + strconv.Itoa(info.Index), RunID: info.RunID, Step: info.Step,
		Kind: store.EventWaitStep, ResumeWith: resumeWith, Event: r.Event, Match: r.Match, Input: r.Input,
		From: now.Add(-max(r.LookBack, 0)), CreatedAt: now,
	})
}

// awaitDocumentStep is the AwaitFunc of document steps (wait: {event:
// ...}), resumed with "received".
func (c *Client) awaitDocumentStep(ctx context.Context, r *triggers.AwaitRequest) error {
	return c.awaitStep(ctx, r, EventReceived)
}

// putEventWait checks a wait's match, stores the wait and wakes the
// matching loop.
func (c *Client) putEventWait(ctx context.Context, w *store.EventWait) error {
	if _, err := triggers.CompileMatch(w.Match); err != nil {
		return err
	}
	if _, err := c.cfg.Store.PutEventWait(ctx, w); err != nil {
		return fmt.Errorf("await event %q: %w", w.Event, err)
	}
	c.triggers.Wake()
	return nil
}

// eventWaitActivity is the built-in activity heph.events.wait that
// registers a workflow's wait (workflow.WaitForEvent).
type eventWaitActivity struct{ c *Client }

func (eventWaitActivity) Name() string                      { return wfdef.EventWaitActivity }
func (eventWaitActivity) Options() workflow.ActivityOptions { return workflow.ActivityOptions{} }

func (a eventWaitActivity) Invoke(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
	var r wfdef.EventWait
	if err := json.Unmarshal(input, &r); err != nil {
		return nil, flow.NonRetryable(fmt.Errorf("%s: input does not decode: %w", wfdef.EventWaitActivity, err))
	}
	err := a.c.putEventWait(ctx, &store.EventWait{ID: r.ID, RunID: r.RunID, Kind: store.EventWaitWorkflow, Event: r.Event,
		Match: r.Match, Input: r.Input, From: r.From, Until: r.Until, CreatedAt: r.At})
	if errors.Is(err, hephtype.ErrInvalidInput) {
		return nil, flow.NonRetryable(err)
	}
	if err != nil {
		return nil, err
	}
	return json.RawMessage(`{}`), nil
}

// deliverEventWait hands a matched event to its waiting run: a signal
// to a workflow (keyed by the wait, so that the run takes it once), a
// resume of a step. A run that ended, or a step that no longer waits
// (its timeout came first), makes the wait done.
func (c *Client) deliverEventWait(ctx context.Context, w *store.EventWait, e *store.EventRecord) error {
	payload := wfdef.Event{ID: e.ID, Name: e.Name, Data: e.Data, At: e.At}
	var err error
	if w.Kind == store.EventWaitWorkflow {
		err = c.wf.SignalWorkflowKeyed(ctx, w.RunID, wfdef.EventSignalPrefix+w.ID, payload, "event-wait:"+w.ID)
	} else {
		err = c.resume(ctx, w.RunID, w.ResumeWith, &ResumeOptions{Step: w.Step, Payload: payload}, nil)
		if errors.Is(err, ErrNotWaiting) {
			return c.stepNotWaiting(ctx, w)
		}
		if errors.Is(err, ErrUnknownEvent) {
			// No later try can succeed: the wait is done, and the step
			// waits for its own timeout (or a resume by hand).
			c.cfg.Logger.Error("event wait cannot resume its step: the step does not declare the event", "run", w.RunID, "step", w.Step, "event", w.ResumeWith, "wait", w.ID)
			return nil
		}
	}
	if errors.Is(err, ErrRunFinished) || errors.Is(err, ErrRunNotFound) {
		return nil
	}
	return err
}

// stepNotWaiting decides what a resume that found the step not waiting
// means: the step has not committed its Wait yet (it is pending or
// scheduled: try later), it committed it since the resume read the run
// (it waits now: try again, or the event is lost), or it is done waiting
// (timed out, or the run moved on).
func (c *Client) stepNotWaiting(ctx context.Context, w *store.EventWait) error {
	steps, err := c.Steps(ctx, w.RunID)
	if errors.Is(err, ErrRunNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s.Name != w.Step {
			continue
		}
		switch hephtype.StepStatus(s.Status) {
		case hephtype.StepPending, hephtype.StepScheduled, "running", hephtype.StepWaiting:
			return triggers.ErrNotYet
		}
	}
	return nil
}

// EventWaits returns the waits for events of a run, oldest first.
func (c *Client) EventWaits(ctx context.Context, runID string) ([]*EventWait, error) {
	ws, err := c.cfg.Store.EventWaitsOf(ctx, runID)
	if err != nil {
		return nil, err
	}
	return toEventWaits(ws), nil
}

// EventWaitsMatched returns the waits an event matched.
func (c *Client) EventWaitsMatched(ctx context.Context, eventID string) ([]*EventWait, error) {
	ws, err := c.cfg.Store.EventWaitsMatched(ctx, eventID)
	if err != nil {
		return nil, err
	}
	return toEventWaits(ws), nil
}

// DispatchEventWaits matches and delivers, now, the open event waits, as
// the loop that Start runs does, and returns how many it closed. Tests on
// a fake clock call it.
func (c *Client) DispatchEventWaits(ctx context.Context) (int, error) {
	return c.triggers.DispatchWaits(ctx)
}

func toEventWaits(ws []*store.EventWait) []*EventWait {
	out := make([]*EventWait, len(ws))
	for i, w := range ws {
		out[i] = &EventWait{ID: w.ID, RunID: w.RunID, Step: w.Step, Kind: w.Kind, Event: w.Event, Match: w.Match,
			From: w.From, Until: w.Until, CreatedAt: w.CreatedAt, MatchedEventID: w.MatchedEventID,
			MatchedAt: w.MatchedAt, DeliveredAt: w.DeliveredAt}
	}
	return out
}
