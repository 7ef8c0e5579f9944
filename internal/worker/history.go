package worker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// StartedData is the Data of a step_started history entry: which worker
// ran the attempt, when it started, and how often the task was claimed (a
// claim after the first is a re-execution: an earlier claim's lease was
// lost, or its worker gave the task back at shutdown).
type StartedData struct {
	Worker    string    `json:"worker"`
	StartedAt time.Time `json:"started_at"`
	Claim     int       `json:"claim"`
	// Reexecution: an earlier claim of this attempt ran (or began) and
	// lost its lease or was given back; its result, if any, was dropped.
	Reexecution bool `json:"reexecution,omitempty"`
}

// Started is the step_started entry of a task's attempt, run by worker
// from at, written with the attempt's outcome in the same commit.
func Started(worker string, t *store.Task, at time.Time, step string, index int) store.NewEvent {
	return store.NewEvent{Kind: hephtype.EventStepStarted, Step: step, Index: index, Attempt: t.Attempt,
		Data: MustJSON(StartedData{Worker: worker, StartedAt: at.UTC(), Claim: t.Claims, Reexecution: t.Claims > 1})}
}

// RetryData is the Data of a step_retrying entry: how long the runtime
// waits before the next attempt, and when that attempt is due.
type RetryData struct {
	Backoff time.Duration `json:"backoff"`
	ReadyAt time.Time     `json:"ready_at"`
}

// MustJSON encodes v, which must be JSON-safe.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("hephaestus: encode %T: %v", v, err))
	}
	return b
}
