package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
)

// ErrEventTimeout: WaitForEvent's timeout passed before a matching event
// came.
var ErrEventTimeout = errors.New("no matching event came before the timeout")

// EventWaitOptions are the optional parameters of WaitForEvent.
type EventWaitOptions struct {
	// Match, when set, is a CEL expression over event (a map with id,
	// name, data and at) and input (Input) that must be true of the
	// event: `event.data.invoice == input.invoice`. An expression that
	// does not compile fails the run, naming it; one that fails on an
	// event (a missing field) does not match that event.
	Match string
	// Input is what the expression reads as input (encoded as JSON; at
	// most 64 KiB).
	Input any
	// LookBack, when positive, lets an event stored up to LookBack before
	// the wait began match.
	LookBack time.Duration
	// Timeout, when positive, ends the wait with ErrEventTimeout after
	// that long (a durable timer). Zero waits without end.
	Timeout time.Duration
}

// Event is an event a workflow received (WaitForEvent).
type Event struct {
	ID   string
	Name string
	Data json.RawMessage
	At   time.Time
}

// WaitForEvent waits for the first event named name that opts.Match
// accepts, and returns it; each wait gets one event, once. The wait is
// registered through the built-in activity heph.events.wait (recorded in
// the history, so a replay registers nothing again), and the event
// arrives as the signal heph.event:<wait id>. With opts.Timeout, it
// returns ErrEventTimeout when no event matched in time.
func WaitForEvent(ctx Context, name string, opts *EventWaitOptions) (Event, error) {
	var o EventWaitOptions
	if opts != nil {
		o = *opts
	}
	u := unitOf(ctx)
	var input json.RawMessage
	if o.Input != nil {
		raw, err := json.Marshal(o.Input)
		if err != nil {
			return Event{}, fmt.Errorf("wait for event %q: input does not encode: %w", name, err)
		}
		input = raw
	}
	now := u.Now()
	req := wfdef.EventWait{ID: u.Info().RunID + ":" + UUID(ctx).String(), RunID: u.Info().RunID, Event: name,
		Match: o.Match, Input: input, From: now.Add(-max(o.LookBack, 0)), At: now}
	if o.Timeout > 0 {
		req.Until = now.Add(o.Timeout)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return Event{}, fmt.Errorf("wait for event %q: %w", name, err)
	}
	if _, err := u.ExecuteActivity(wfdef.EventWaitActivity, raw, replay.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: flow.RetryPolicy{MaxAttempts: 10},
	}); err != nil {
		return Event{}, fmt.Errorf("wait for event %q: %w", name, userError(err))
	}
	payload, ok, err := u.WaitSignalFor(wfdef.EventSignalPrefix+req.ID, o.Timeout)
	if err != nil {
		return Event{}, err
	}
	if !ok {
		return Event{}, fmt.Errorf("wait for event %q: %w", name, ErrEventTimeout)
	}
	var e wfdef.Event
	if err := json.Unmarshal(payload, &e); err != nil {
		return Event{}, fmt.Errorf("wait for event %q: the event does not decode: %w", name, err)
	}
	return Event(e), nil
}
