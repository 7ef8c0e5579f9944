package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Kinds of event waits.
const (
	// EventWaitWorkflow: a code-first workflow waits (workflow.WaitForEvent);
	// the event is delivered as a signal.
	EventWaitWorkflow = "workflow"
	// EventWaitStep: a flow or document step waits; the event resumes it.
	EventWaitStep = "step"
)

// Limits of event waits, the same on every backend.
const (
	// MaxEventWaitIDBytes bounds a wait's id.
	MaxEventWaitIDBytes = 400
	// MaxEventWaitMatchBytes bounds a wait's match expression.
	MaxEventWaitMatchBytes = 4096
	// MaxEventWaitInputBytes bounds the input a wait's match reads.
	MaxEventWaitInputBytes = 64 << 10
	// MaxWaitCandidates bounds the events WaitCandidates returns.
	MaxWaitCandidates = 1000
)

// ErrEventWaitNotFound: no event wait has the given id.
var ErrEventWaitNotFound = errors.New("event wait not found")

// EventWaits keeps the runs' waits for events (migrations event_waits):
// one row per wait id, put once. A wait is matched once (the first event
// whose MatchEventWait commits wins, a compare-and-set) and then
// delivered to its run; both are recorded so that any process can carry
// them out again after a crash.
type EventWaits interface {
	// PutEventWait stores a wait, once per id: a re-put writes nothing and
	// returns the stored wait. An invalid wait (CheckEventWait) fails with
	// an error wrapping hephtype.ErrInvalidInput.
	PutEventWait(ctx context.Context, w *EventWait) (*EventWait, error)
	// OpenEventWaits returns up to limit waits not delivered yet, oldest
	// first.
	OpenEventWaits(ctx context.Context, limit int) ([]*EventWait, error)
	// WaitCandidates returns the events named w.Event stored at or after
	// w.From and, when w.Until is set, before it: oldest first, at most
	// MaxWaitCandidates.
	WaitCandidates(ctx context.Context, w *EventWait) ([]*EventRecord, error)
	// MatchEventWait records that eventID matched the wait, unless an
	// event matched it already, and returns the wait as stored: the
	// first call wins and every later one returns its event. It returns
	// ErrEventWaitNotFound when there is no such wait.
	MatchEventWait(ctx context.Context, id, eventID string, now time.Time) (*EventWait, error)
	// DeliveredEventWait records that the wait is done (delivered, or its
	// run no longer waits); a second call changes nothing.
	DeliveredEventWait(ctx context.Context, id string, now time.Time) error
	// EventWaitsOf returns the waits of a run, oldest first.
	EventWaitsOf(ctx context.Context, runID string) ([]*EventWait, error)
	// EventWaitsMatched returns the waits an event matched, oldest first.
	EventWaitsMatched(ctx context.Context, eventID string) ([]*EventWait, error)
}

// EventWait is a run's wait for an event.
type EventWait struct {
	ID    string
	RunID string
	// Step is the waiting step (empty for a workflow).
	Step string
	// Kind is EventWaitWorkflow or EventWaitStep.
	Kind string
	// ResumeWith is the event a step is resumed with (kind step).
	ResumeWith string
	// Event is the name of the events that may match.
	Event string
	// Match, when set, is the expression an event must satisfy.
	Match string
	// Input is the JSON the expression reads as input.
	Input json.RawMessage
	// From and Until bound the At of the events that may match (Until
	// zero: no bound).
	From, Until time.Time
	CreatedAt   time.Time
	// MatchedEventID is the event that matched (empty until one did).
	MatchedEventID string
	MatchedAt      time.Time
	// DeliveredAt is when the event was delivered (zero until then).
	DeliveredAt time.Time
}

// CheckEventWait reports what is wrong with a wait to be stored, naming
// the field; the error wraps hephtype.ErrInvalidInput.
func CheckEventWait(w *EventWait) error {
	switch {
	case w == nil:
		return fmt.Errorf("%w: event wait: missing", hephtype.ErrInvalidInput)
	case w.ID == "" || len(w.ID) > MaxEventWaitIDBytes:
		return fmt.Errorf("%w: event wait id must be 1 to %d bytes long (it is %d)", hephtype.ErrInvalidInput, MaxEventWaitIDBytes, len(w.ID))
	case w.RunID == "":
		return fmt.Errorf("%w: event wait %q: run id is empty", hephtype.ErrInvalidInput, w.ID)
	case w.Kind != EventWaitWorkflow && w.Kind != EventWaitStep:
		return fmt.Errorf("%w: event wait %q: kind %q is not workflow or step", hephtype.ErrInvalidInput, w.ID, w.Kind)
	case w.Kind == EventWaitStep && w.Step == "":
		return fmt.Errorf("%w: event wait %q: step is empty", hephtype.ErrInvalidInput, w.ID)
	case len(w.ResumeWith) > MaxEventNameBytes:
		return fmt.Errorf("%w: event wait %q: resume with is %d bytes, over the limit of %d", hephtype.ErrInvalidInput, w.ID, len(w.ResumeWith), MaxEventNameBytes)
	case len(w.Match) > MaxEventWaitMatchBytes:
		return fmt.Errorf("%w: event wait %q: match is %d bytes, over the limit of %d", hephtype.ErrInvalidInput, w.ID, len(w.Match), MaxEventWaitMatchBytes)
	case len(w.Input) > MaxEventWaitInputBytes:
		return fmt.Errorf("%w: event wait %q: input is %d bytes, over the limit of %d", hephtype.ErrInvalidInput, w.ID, len(w.Input), MaxEventWaitInputBytes)
	case len(w.Input) > 0 && !json.Valid(w.Input):
		return fmt.Errorf("%w: event wait %q: input is not valid JSON", hephtype.ErrInvalidInput, w.ID)
	case w.From.IsZero() || w.CreatedAt.IsZero():
		return fmt.Errorf("%w: event wait %q: from and created at must be set", hephtype.ErrInvalidInput, w.ID)
	case !w.Until.IsZero() && w.Until.Before(w.From):
		return fmt.Errorf("%w: event wait %q: until is before from", hephtype.ErrInvalidInput, w.ID)
	}
	if err := checkEventText("name", w.Event, MaxEventNameBytes); err != nil {
		return fmt.Errorf("event wait %q: %w", w.ID, err)
	}
	return nil
}

// EventWaitsLimit is a limit of OpenEventWaits with its bound applied.
func EventWaitsLimit(n int) int {
	if n <= 0 || n > MaxEventsPage {
		return MaxEventsPage
	}
	return n
}
