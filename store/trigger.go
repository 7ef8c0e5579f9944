package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Firing statuses.
const (
	// FiringPending: the trigger has not acted on the event yet (or its
	// claim's lease ended before it did).
	FiringPending = "pending"
	// FiringStarted: the trigger started the run named in RunID.
	FiringStarted = "started"
	// FiringSkipped: the trigger's filter did not match the event.
	FiringSkipped = "skipped"
	// FiringFailed: the run could not be started (the filter or the
	// input mapping failed, the target refused the input); Error says
	// why.
	FiringFailed = "failed"
)

// Limits of triggers, the same on every backend.
const (
	// MaxTriggerNameBytes bounds a trigger's name.
	MaxTriggerNameBytes = 200
	// MaxTriggerExprBytes bounds a trigger's filter and input
	// expressions.
	MaxTriggerExprBytes = 4096
)

// ErrTriggerNotFound: no trigger has the given name.
var ErrTriggerNotFound = errors.New("trigger not found")

// Triggers keeps the triggers that start runs on events (migrations
// triggers, event_firings) and their firings: one firing per (event,
// trigger) whose event name is the trigger's, written by SendEvent in the
// transaction that stores the event (so no event escapes a trigger that
// existed when it was stored). A firing is acted on under a lease: the
// claim gives it a token (fencing its completion) and, the first time, a
// run id that every later claim keeps, so that starting the run is
// idempotent (ErrRunExists) and a firing starts at most one run.
type Triggers interface {
	// PutTriggers creates or replaces triggers by name (CreatedAt is
	// kept on replace; UpdatedAt is p.Now). Invalid triggers
	// (CheckTrigger) fail the call, which writes none.
	PutTriggers(ctx context.Context, p *PutTriggersParams) error
	// ListTriggers returns every trigger by name.
	ListTriggers(ctx context.Context) ([]*Trigger, error)
	// DeleteTrigger deletes a trigger, its pending firings and its open
	// groups (TriggerGroups) with their throttle windows, or returns
	// ErrTriggerNotFound. Firings and groups that ended are kept.
	DeleteTrigger(ctx context.Context, name string) error
	// ClaimFirings leases up to p.Limit firings of the triggers named in
	// p.Triggers that are pending with no lease or a lease that ended at
	// or before p.Now, oldest event (lowest Seq) first: it sets Owner,
	// Token (one more than before), LeaseUntil (p.Now + p.LeaseFor) and,
	// where RunID is empty, RunID to the next unused id of p.RunIDs (it
	// claims no more firings without a run id than p.RunIDs has ids).
	// Concurrent claims never lease the same firing. The firings carry
	// their event (Event, with its data).
	ClaimFirings(ctx context.Context, p *ClaimFiringsParams) ([]*Firing, error)
	// EndFiring records what a leased firing came to: p.Status (started,
	// skipped or failed), p.Error, and clears the lease. It returns
	// ErrLeaseLost when the firing's token is not p.Token or it is no
	// longer pending (another claim ended it), ErrFiringNotFound when it
	// is gone.
	EndFiring(ctx context.Context, p *EndFiringParams) error
	// Firings returns the firings of an event, by trigger name.
	Firings(ctx context.Context, eventID string) ([]*Firing, error)
}

// ErrFiringNotFound: no firing has the given event and trigger.
var ErrFiringNotFound = errors.New("firing not found")

// Trigger starts a run of a target for every event of a name that its
// filter matches. Filter and Input are expressions the runtime
// evaluates; the store keeps their text.
type Trigger struct {
	Name string
	// Event is the name of the events that fire it.
	Event string
	// TargetKind is TargetFlow, TargetWorkflow, TargetDocument or
	// TargetJob; TargetName names the target.
	TargetKind, TargetName string
	// Filter, when set, must be true of the event for a run to start.
	Filter string
	// Input, when set, computes the run's input from the event; empty:
	// the event's data.
	Input string
	// BusinessKey and ConcurrencyKey, when set, compute the run's
	// business key value and concurrency key from the event (CEL, a
	// string).
	BusinessKey    string
	ConcurrencyKey string
	// Key, when set, computes the flow-control key from the event (CEL,
	// a string or a number): debounce, throttle and batch act per key
	// value; empty, one group for the trigger. Set only with one of them.
	Key string
	// Debounce, when set, starts one run after Debounce of quiet for a
	// key, with the last event's input.
	Debounce time.Duration
	// ThrottleLimit and ThrottlePeriod, when set, start at most
	// ThrottleLimit runs per ThrottlePeriod per key; the events over the
	// limit are deferred to the next window with room, not dropped.
	ThrottleLimit  int
	ThrottlePeriod time.Duration
	// BatchSize and BatchWindow, when set, collect up to BatchSize
	// events of a key, or those until BatchWindow after the first, into
	// one run whose input is the JSON list of their inputs, in event
	// order.
	BatchSize   int
	BatchWindow time.Duration
	// Declared marks a trigger declared in code (put at start).
	Declared  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Firing is what one trigger did, or is to do, with one event.
type Firing struct {
	EventID string
	Trigger string
	// Seq is the event's Seq.
	Seq    int64
	Status string
	// RunID is the run the firing starts (set by its first claim).
	RunID string
	Error string
	// The lease of a claim.
	Owner      string
	Token      int64
	LeaseUntil time.Time
	// EndedAt is when it was ended (zero while pending).
	EndedAt time.Time
	// Event is the event, filled by ClaimFirings only.
	Event *EventRecord
}

// PutTriggersParams are the parameters of PutTriggers.
type PutTriggersParams struct {
	Triggers []*Trigger
	Now      time.Time
}

// ClaimFiringsParams are the parameters of ClaimFirings.
type ClaimFiringsParams struct {
	Triggers []string
	Owner    string
	Now      time.Time
	LeaseFor time.Duration
	// RunIDs are fresh run ids for firings claimed the first time.
	RunIDs []string
	Limit  int
}

// EndFiringParams are the parameters of EndFiring.
type EndFiringParams struct {
	EventID, Trigger string
	Token            int64
	Status           string
	Error            string
	Now              time.Time
}

// CheckTrigger reports what is wrong with a trigger to be stored, naming
// the field; the error wraps hephtype.ErrInvalidInput.
func CheckTrigger(t *Trigger) error {
	if t == nil {
		return fmt.Errorf("%w: trigger: missing", hephtype.ErrInvalidInput)
	}
	if err := checkEventText("name", t.Event, MaxEventNameBytes); err != nil {
		return fmt.Errorf("trigger %q: %w", t.Name, err)
	}
	if t.Name == "" || len(t.Name) > MaxTriggerNameBytes {
		return fmt.Errorf("%w: trigger name must be 1 to %d bytes long (it is %d)", hephtype.ErrInvalidInput, MaxTriggerNameBytes, len(t.Name))
	}
	switch t.TargetKind {
	case TargetFlow, TargetWorkflow, TargetDocument, TargetJob:
	default:
		return fmt.Errorf("%w: trigger %q: target kind %q is not flow, workflow, document or job", hephtype.ErrInvalidInput, t.Name, t.TargetKind)
	}
	if t.TargetName == "" {
		return fmt.Errorf("%w: trigger %q: the target name is empty", hephtype.ErrInvalidInput, t.Name)
	}
	for _, e := range []string{t.Filter, t.Input, t.BusinessKey, t.ConcurrencyKey, t.Key} {
		if len(e) > MaxTriggerExprBytes {
			return fmt.Errorf("%w: trigger %q: filter, input, business key, concurrency key and key are at most %d bytes", hephtype.ErrInvalidInput, t.Name, MaxTriggerExprBytes)
		}
	}
	return checkFlowControl(t)
}
