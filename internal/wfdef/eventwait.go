package wfdef

import (
	"encoding/json"
	"time"
)

// EventWaitActivity is the built-in activity that registers a
// workflow's wait for an event (workflow.WaitForEvent): every client
// registers it, so the registration is recorded in the run's history and
// replays without running again.
const EventWaitActivity = "heph.events.wait"

// EventSignalPrefix prefixes the name of the signal that delivers a
// matched event to a waiting workflow: heph.event:<wait id>.
const EventSignalPrefix = "heph.event:"

// EventWait is the input of EventWaitActivity.
type EventWait struct {
	ID    string          `json:"id"`
	RunID string          `json:"run_id"`
	Event string          `json:"event"`
	Match string          `json:"match,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	From  time.Time       `json:"from"`
	Until time.Time       `json:"until,omitzero"`
	// At is the workflow's time when it began to wait.
	At time.Time `json:"at"`
}

// Event is the payload of an event signal.
type Event struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
	At   time.Time       `json:"at"`
}
