package replay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Event kinds particular to code-first workflows, named here for the
// replay core; they are hephtype's. Every other kind is a
// hephtype.EventKind too; activities use the step kinds, since the runtime
// executes them as step tasks.
const (
	// EventDecision opens the output of one activation: the events after
	// it, up to the next event the runtime wrote, are the activation's
	// commands. Its Data carries the activation time.
	EventDecision = hephtype.EventDecision
	// EventChildFailed reports that a child workflow failed or was
	// cancelled.
	EventChildFailed = hephtype.EventChildFailed
	// EventChildCancelled records that the workflow asked the runtime to
	// cancel a child (it does so when it ends with children still open).
	EventChildCancelled = hephtype.EventChildCancelled
)

// Event is one entry of a workflow's history. The runtime stores it as a
// store.Event row, field for field: Kind, ID as Index, Name, Ref as Step,
// Attempt, Data and Error; nothing else is needed to replay it.
//
// Events come from two writers. The runtime writes what happened outside
// the workflow (run started, activity completed or failed, timer fired,
// signal received, child completed or failed) and then asks for a
// decision; the activation writes a decision event followed by one event
// per command it issued. The constructors below build the runtime's
// events; Command.Event builds the others.
type Event struct {
	Kind hephtype.EventKind `json:"kind"`
	// ID is the sequence number of the command the event belongs to:
	// the activity, timer, child, marker or update it schedules, reports
	// or cancels. Zero for events that belong to no command.
	ID int `json:"id,omitempty"`
	// Name is the workflow (run_started, child events), activity, signal,
	// update or patch name.
	Name string `json:"name,omitempty"`
	// Ref is the update id (update events), the marker kind ("patch" or
	// "deprecated") or, on step_scheduled and child_started, the call
	// record: where the code issued it and an activity's input hash and
	// queue (see callRecord).
	Ref string `json:"ref,omitempty"`
	// Attempt is the last attempt of a failed activity.
	Attempt int             `json:"attempt,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// Marker kinds (Event.Ref of a marker).
const (
	markerPatch      = "patch"
	markerDeprecated = "deprecated"
)

func (e Event) String() string {
	s := string(e.Kind)
	if e.ID != 0 {
		s += " #" + strconv.Itoa(e.ID)
	}
	if e.Name != "" {
		s += " " + strconv.Quote(e.Name)
	}
	switch e.Kind {
	case hephtype.EventTimerStarted:
		if t, err := decodeTimer(e.Data); err == nil {
			s += " (" + t.Duration.String() + ")"
		}
	case hephtype.EventMarker:
		if e.Ref == markerDeprecated {
			s += " (deprecated)"
		}
	case hephtype.EventUpdateAccepted, hephtype.EventUpdateDone:
		s += " id " + strconv.Quote(e.Ref)
	case EventDecision:
		if t, err := decisionTime(e); err == nil {
			s += " at " + t.Format(time.RFC3339Nano)
		}
	}
	if e.Error != "" {
		s += ": " + e.Error
	}
	return s
}

// class sorts event kinds by writer.
type class uint8

const (
	classUnknown  class = iota
	classExternal       // written by the runtime, delivered to the next activation
	classDecision       // opens an activation's output
	classCommand        // written by an activation
	classInfo           // written by the runtime for people; replay skips it
)

func classify(k hephtype.EventKind) class {
	switch k {
	case hephtype.EventRunStarted, hephtype.EventStepCompleted, hephtype.EventStepFailed,
		hephtype.EventTimerFired, hephtype.EventSignalReceived, hephtype.EventChildCompleted, EventChildFailed:
		return classExternal
	case EventDecision:
		return classDecision
	case hephtype.EventStepScheduled, hephtype.EventTimerStarted, hephtype.EventTimerCancelled,
		hephtype.EventMarker, hephtype.EventUpdateAccepted, hephtype.EventUpdateDone,
		hephtype.EventChildStarted, EventChildCancelled, hephtype.EventAttributesUpserted,
		hephtype.EventRunCompleted, hephtype.EventRunFailed, hephtype.EventRunContinued:
		return classCommand
	case hephtype.EventStepStarted, hephtype.EventStepRetrying, hephtype.EventUpdateRejected,
		hephtype.EventRunPaused, hephtype.EventRunUnpaused, hephtype.EventWorkflowReset:
		return classInfo
	}
	return classUnknown
}

// startedData is the Data of run_started.
type startedData struct {
	Input json.RawMessage `json:"input,omitempty"`
	Seed  uint64          `json:"seed,string"`
	Time  time.Time       `json:"time"`
}

// Started is the first event of a run: the workflow, its input, the seed
// of its deterministic random source and its start time. The runtime draws
// the seed once, when it creates the run (a continued run gets a new one).
func Started(workflow string, input json.RawMessage, seed uint64, at time.Time) Event {
	return Event{Kind: hephtype.EventRunStarted, Name: workflow, Data: mustJSON(startedData{Input: input, Seed: seed, Time: at})}
}

func decodeStarted(e Event) (startedData, error) {
	var d startedData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return d, fmt.Errorf("run_started: bad data: %w", err)
	}
	return d, nil
}

type decisionData struct {
	Time time.Time `json:"time"`
}

func decisionEvent(at time.Time) Event {
	return Event{Kind: EventDecision, Data: mustJSON(decisionData{Time: at})}
}

func decisionTime(e Event) (time.Time, error) {
	var d decisionData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return time.Time{}, fmt.Errorf("decision: bad data: %w", err)
	}
	return d.Time, nil
}

// DecisionTime returns the activation time a decision event carries.
func DecisionTime(e Event) (time.Time, bool) {
	if e.Kind != EventDecision {
		return time.Time{}, false
	}
	t, err := decisionTime(e)
	return t, err == nil
}

// ActivityCompleted reports that the activity scheduled as command id
// returned output.
func ActivityCompleted(id int, name string, output json.RawMessage) Event {
	return Event{Kind: hephtype.EventStepCompleted, ID: id, Name: name, Data: output}
}

// ActivityFailed reports that the activity scheduled as command id failed
// for good: its last attempt failed and no retry is left (intermediate
// failures are step_retrying events, which replay skips).
func ActivityFailed(id int, name string, attempt int, msg string) Event {
	return Event{Kind: hephtype.EventStepFailed, ID: id, Name: name, Attempt: attempt, Error: msg}
}

// TimerFired reports that the timer started as command id fired.
func TimerFired(id int) Event { return Event{Kind: hephtype.EventTimerFired, ID: id} }

// SignalReceived records a signal. Signals are delivered in history order.
func SignalReceived(name string, payload json.RawMessage) Event {
	return Event{Kind: hephtype.EventSignalReceived, Name: name, Data: payload}
}

// ChildCompleted reports that the child started as command id completed
// with output.
func ChildCompleted(id int, workflow string, output json.RawMessage) Event {
	return Event{Kind: hephtype.EventChildCompleted, ID: id, Name: workflow, Data: output}
}

// ChildFailed reports that the child started as command id failed or was
// cancelled.
func ChildFailed(id int, workflow string, msg string) Event {
	return Event{Kind: EventChildFailed, ID: id, Name: workflow, Error: msg}
}

type timerData struct {
	Duration time.Duration `json:"duration"`
	FireAt   time.Time     `json:"fire_at"`
	// At is where the workflow code started the timer (absent from
	// histories written before it was recorded).
	At string `json:"at,omitempty"`
}

func decodeTimer(raw json.RawMessage) (timerData, error) {
	var t timerData
	err := json.Unmarshal(raw, &t)
	return t, err
}

// mustJSON encodes values built by this package, which always encode.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("replay: encode %T: %v", v, err))
	}
	return b
}

// IsCommandKind reports whether events of kind k record an activation's
// commands (they follow a decision event in the same transaction).
func IsCommandKind(k hephtype.EventKind) bool { return classify(k) == classCommand }
