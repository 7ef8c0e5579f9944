package engine

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// State is a run's position in its flow. It is plain data and
// JSON-serialisable: the runtime keeps it on the run row as a cache that can
// be rebuilt from the history.
type State struct {
	Status hephtype.RunStatus `json:"status"`
	Input  json.RawMessage    `json:"input,omitempty"`
	Steps  []StepState        `json:"steps"`
	Output json.RawMessage    `json:"output,omitempty"`
	Error  string             `json:"error,omitempty"`
	// Queue and Priority, when set, replace every step's queue and
	// priority for the tasks of this run (a job inserted with its own).
	// The engine only carries them, so that retries and snoozes keep
	// them.
	Queue    string `json:"queue,omitempty"`
	Priority *int   `json:"priority,omitempty"`
}

// StepState is one step's position within a run.
type StepState struct {
	Status  hephtype.StepStatus `json:"status"`
	Attempt int                 `json:"attempt,omitempty"`
	// Base is the attempts made before the run was last retried
	// (RunRetried): the step's retry policy counts Attempt-Base.
	Base   int             `json:"base,omitempty"`
	Event  string          `json:"event,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	// In holds the resolution of each incoming edge, aligned with Step.In.
	In []EdgeState `json:"in,omitempty"`
	// Items holds a map step's elements once it has expanded.
	Items []ItemState `json:"items,omitempty"`
	// Timer is set while a waiting step's timeout timer is armed.
	Timer bool `json:"timer,omitempty"`
}

// EdgeState is the resolution of one incoming edge.
type EdgeState uint8

// The edge states.
const (
	EdgeOpen  EdgeState = iota // its source has not finished
	EdgeFired                  // its source emitted its event
	EdgeDead                   // its source emitted another event or was skipped
)

// ItemState is one element of a map step.
type ItemState struct {
	Status  hephtype.StepStatus `json:"status"`
	Attempt int                 `json:"attempt"`
	// Base: see StepState.Base.
	Base   int             `json:"base,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
}

// Clone returns a deep copy of s; Apply never modifies its argument.
func (s *State) Clone() *State {
	c := *s
	c.Steps = make([]StepState, len(s.Steps))
	for i, st := range s.Steps {
		st.In = append([]EdgeState(nil), st.In...)
		st.Items = append([]ItemState(nil), st.Items...)
		c.Steps[i] = st
	}
	return &c
}

// Event is something that happened to a run: the input of Apply.
type Event interface{ isEvent() }

// StepCompleted reports that an attempt of a step returned an event and an
// output. An empty Event means "ok".
type StepCompleted struct {
	Step    string
	Attempt int
	Event   string
	Output  json.RawMessage
}

// StepWaiting reports that an attempt of a step returned "wait".
type StepWaiting struct {
	Step    string
	Attempt int
}

// StepFailed reports that an attempt of a step returned an error (or timed
// out). Retryable is false for errors the step marked as permanent.
type StepFailed struct {
	Step      string
	Attempt   int
	Error     string
	Retryable bool
}

// ItemCompleted reports that one element of a map step finished.
type ItemCompleted struct {
	Step    string
	Index   int
	Attempt int
	Output  json.RawMessage
}

// ItemFailed reports that an attempt of one element of a map step failed.
type ItemFailed struct {
	Step      string
	Index     int
	Attempt   int
	Error     string
	Retryable bool
}

// Resume completes a waiting step from outside with an event and a payload,
// which becomes the step's output.
type Resume struct {
	Step    string
	Event   string
	Payload json.RawMessage
}

// TimerFired reports that a waiting step's timer expired.
type TimerFired struct {
	Step string
}

// Cancel cancels the run.
type Cancel struct {
	Reason string
}

// TimedOut fails the run because its execution timeout passed: its steps
// are cancelled as by Cancel, and the run fails with Error.
type TimedOut struct {
	Error string
}

// StepSnoozed reports that an attempt of a step (Index -1) or of a map
// element (Index >= 0) asked to run again after a delay: the same attempt
// is scheduled again, so a snooze consumes no attempt.
type StepSnoozed struct {
	Step    string
	Index   int
	Attempt int
	After   time.Duration
}

// StepCancelled reports that an attempt of a step (Index -1) or of a map
// element (Index >= 0) cancelled the run from inside: the run ends
// cancelled with Reason, with no retry.
type StepCancelled struct {
	Step    string
	Index   int
	Attempt int
	Reason  string
}

func (StepCompleted) isEvent() {}
func (StepWaiting) isEvent()   {}
func (StepFailed) isEvent()    {}

// RunRetried retries a failed run from where it failed: every failed step
// and map element, and every step the failure cancelled, runs again with a
// fresh attempt budget; completed steps and elements keep their outputs
// and never run again; steps left pending become ready when their
// dependencies allow. The run is running again. Applied to a run that is
// not failed it is refused with ErrNotRetryable.
type RunRetried struct{}

// RunReset runs a run again from step Step: Step and every step after it
// (every step a path of edges leads to from Step) go back to pending,
// their outputs, events and map elements cleared, and run again as their
// incoming edges resolve, with a fresh attempt budget (attempt numbers go
// on counting, so a report of an attempt from before the reset is stale;
// those that run or wait are cancelled). The other steps keep their
// outcome, except that those that failed or were cancelled run again as
// by RunRetried. A running, waiting, completed or failed run runs again;
// a cancelled run, or a step that has not run yet, is refused with
// ErrNotResettable. An empty Step names the only step of a run of one
// step (a job). By names who reset the run, for the history.
type RunReset struct {
	Step string
	By   string
}

func (ItemCompleted) isEvent() {}
func (ItemFailed) isEvent()    {}
func (Resume) isEvent()        {}
func (TimerFired) isEvent()    {}
func (Cancel) isEvent()        {}
func (TimedOut) isEvent()      {}
func (StepSnoozed) isEvent()   {}
func (StepCancelled) isEvent() {}
func (RunRetried) isEvent()    {}
func (RunReset) isEvent()      {}

// Command is something the runtime must do: the output of Apply.
type Command interface{ isCommand() }

// ScheduleStep asks the runtime to run one attempt of a step, or of one
// element of a map step (Index >= 0, with the element in Item). Retry is set
// for attempts after the first: the runtime delays them by the step's
// backoff.
type ScheduleStep struct {
	Step    string
	Index   int
	Attempt int
	Retry   bool
	// Delay, when positive, is a snooze: the runtime makes the task ready
	// that long after now (Retry is then false).
	Delay time.Duration
	// Input is the step's input document: {"input": <run input>,
	// "<key>": <output>, …} with one entry per completed step of the
	// step's context (its ancestors, or the steps it declares it reads).
	Input json.RawMessage
	// Item is the element of a map step.
	Item json.RawMessage
}

// StartTimer arms a waiting step's timeout.
type StartTimer struct {
	Step  string
	After time.Duration
}

// CancelTimer disarms a waiting step's timeout.
type CancelTimer struct {
	Step string
}

// CancelStep stops a scheduled or running step (Index >= 0: one element of a
// map step): its task is dropped and running code sees its context cancelled.
type CancelStep struct {
	Step  string
	Index int
}

// CompleteRun ends the run successfully with an output: a JSON object of the
// outputs of the steps that ended their paths, by key.
type CompleteRun struct {
	Output json.RawMessage
}

// FailRun ends the run in failure.
type FailRun struct {
	Error string
}

// CancelRun ends the run as cancelled.
type CancelRun struct {
	Reason string
}

func (ScheduleStep) isCommand() {}
func (StartTimer) isCommand()   {}
func (CancelTimer) isCommand()  {}
func (CancelStep) isCommand()   {}
func (CompleteRun) isCommand()  {}
func (FailRun) isCommand()      {}
func (CancelRun) isCommand()    {}

// History is one entry of a run's history, as decided by the core. The
// runtime stamps it with a sequence number and a time.
type History struct {
	Kind    hephtype.EventKind `json:"kind"`
	Step    string             `json:"step,omitempty"`
	Index   int                `json:"index,omitempty"` // map element, or element count for map_expanded
	Attempt int                `json:"attempt,omitempty"`
	Event   string             `json:"event,omitempty"`
	Data    json.RawMessage    `json:"data,omitempty"`
	Error   string             `json:"error,omitempty"`
}

// Decision is the result of Start or Apply.
type Decision struct {
	State    *State
	Commands []Command
	History  []History
}

// Errors returned by Apply. The runtime treats ErrStale as "nothing to do":
// a late or duplicate report changes nothing.
var (
	ErrUnknownStep   = hephtype.ErrUnknownStep
	ErrUnknownEvent  = hephtype.ErrUnknownEvent
	ErrNotWaiting    = hephtype.ErrNotWaiting
	ErrRunFinished   = hephtype.ErrRunFinished
	ErrNotRetryable  = hephtype.ErrNotRetryable
	ErrNotResettable = hephtype.ErrNotResettable
	ErrStale         = errors.New("stale report")
	ErrNotMap        = errors.New("step is not a map step")
)
