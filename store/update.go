package store

import (
	"encoding/json"
	"errors"
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
	if u.Pause != nil && u.Unpause {
		return errors.New("pause and unpause at once")
	}
	if u.Pause != nil && u.Pause.At.IsZero() {
		return errors.New("pause: the time is zero")
	}
	if u.Reopen && u.Status == "" {
		return errors.New("reopen: the status is empty")
	}
	if err := CheckBuildID(u.BuildID); err != nil {
		return err
	}
	if err := CheckAttrs(u.SearchAttributes); err != nil {
		return err
	}
	return CheckTasks(u.Tasks)
}

// MaxKeyLen bounds Change.Key, on every backend.
const MaxKeyLen = 200

// CheckKey reports a Change.Key that is too long.
func CheckKey(key string) error {
	if len(key) > MaxKeyLen {
		return fmt.Errorf("key is %d bytes long; the limit is %d", len(key), MaxKeyLen)
	}
	return nil
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
	if u.Reopen {
		next.Error, next.Output, next.FinishedAt = "", nil, time.Time{}
	}
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
	if u.BuildID != "" {
		next.BuildID = u.BuildID
	}
	next.SearchAttributes = MergeAttrs(run.SearchAttributes, u.SearchAttributes)
	if u.Condition != nil {
		next.Condition = *u.Condition
		if next.Condition.IsZero() {
			next.Condition = Condition{}
		} else if next.Condition.Since.IsZero() {
			next.Condition.Since = now
		}
	}
	if u.Pause != nil {
		p := *u.Pause
		p.At = p.At.Truncate(time.Microsecond).UTC()
		next.Paused = &p
	} else if u.Unpause {
		next.Paused = nil
	}
	if next.Status.Terminal() {
		// The tasks a finished run leaves (reporting to its parent …) run.
		next.Paused = nil
	}
	next.Seq = run.Seq + int64(len(u.History))
	next.UpdatedAt = now
	if next.Status.Terminal() && next.FinishedAt.IsZero() {
		next.FinishedAt = now
	}
	return next
}

// TakesKey reports whether an update takes again the business id of a run
// that released it: a reopened ScopeActive run.
func (u *Update) TakesKey(run *Run) bool {
	return u.Reopen && u.Status.Active() && run.BusinessID != "" && run.KeyScope == businesskey.ScopeActive && run.Status.Terminal()
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

// Check reports a Worker that cannot be recorded: it needs an ID and an
// expiry.
func (w *Worker) Check() error {
	switch {
	case w.ID == "":
		return errors.New("ID is empty")
	case w.ExpiresAt.IsZero():
		return fmt.Errorf("worker %s: ExpiresAt is zero", w.ID)
	}
	return nil
}

// Check reports StrandedParams that cannot be served, and returns the
// limit to use (100 when Limit is 0).
func (p *StrandedParams) Check() (limit int, err error) {
	switch {
	case p.Limit < 0:
		return 0, fmt.Errorf("Limit must not be negative, got %d", p.Limit)
	case p.Now.IsZero():
		return 0, errors.New("Now is zero")
	case p.ReadyBefore.IsZero():
		return 0, errors.New("ReadyBefore is zero")
	case p.Limit == 0:
		return 100, nil
	}
	return p.Limit, nil
}

// RoundUpMicro rounds t up to the microsecond, the precision of the
// stores: a task made ready at the result is never claimed before t (a
// timer never fires early).
func RoundUpMicro(t time.Time) time.Time {
	r := t.Truncate(time.Microsecond)
	if r.Before(t) {
		r = r.Add(time.Microsecond)
	}
	return r
}
