package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
)

// Check reports what makes an Update unfit to write: an unknown status, or
// a task without a queue or kind. Backends refuse such a change.
func (u *Update) Check() error {
	if u.Status != "" && !u.Status.Valid() {
		return fmt.Errorf("unknown status %q", u.Status)
	}
	return CheckTasks(u.Tasks)
}

// CheckTasks reports a task without a queue or kind.
func CheckTasks(ts []NewTask) error {
	for i, t := range ts {
		if t.Queue == "" {
			return fmt.Errorf("task %d: queue is empty", i)
		}
		if t.Kind == "" {
			return fmt.Errorf("task %d: kind is empty", i)
		}
	}
	return nil
}

// Next returns run as u leaves it at time now: the fields u sets, the
// sequence number after its history, the update time, and the finish time
// once the status is terminal. Empty JSON values are stored as absent.
func (u *Update) Next(run *Run, now time.Time) Run {
	next := *run
	if u.Status != "" {
		next.Status = u.Status
	}
	if u.State != nil {
		next.State = orNil(u.State)
	}
	if u.Output != nil {
		next.Output = orNil(u.Output)
	}
	if u.Error != "" {
		next.Error = u.Error
	}
	if u.Published != nil {
		next.Published = orNil(u.Published)
	}
	next.Seq = run.Seq + int64(len(u.History))
	next.UpdatedAt = now
	if next.Status.Terminal() && next.FinishedAt.IsZero() {
		next.FinishedAt = now
	}
	return next
}

// FreesKey reports whether a run whose business id is held under its scope
// releases it in status next: a ScopeActive run does once it is finished.
func FreesKey(scope businesskey.Scope, next Run) bool {
	return scope == businesskey.ScopeActive && next.Status.Terminal()
}

func orNil(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}
