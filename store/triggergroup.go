package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// FiringGrouped (a firing status): the trigger controls its flow (debounce, throttle or
// batch) and the event joined a group of its key (TriggerGroups); the
// group's run starts when the group is due.
const FiringGrouped = "grouped"

// Group statuses.
const (
	// GroupOpen: the group has not started its run yet (it may still
	// take events until it is due or claimed).
	GroupOpen = "open"
	// GroupStarted: the group started the run named in RunID.
	GroupStarted = "started"
	// GroupFailed: the run could not be started; Error says why.
	GroupFailed = "failed"
	// GroupSkipped: the run was not started, as an answer (a run with
	// its business key is active); Error says why.
	GroupSkipped = "skipped"
)

// Limits of flow control, the same on every backend.
const (
	// MaxBatchSize bounds Trigger.BatchSize.
	MaxBatchSize = 1000
	// MaxThrottleLimit bounds Trigger.ThrottleLimit.
	MaxThrottleLimit = 1_000_000
	// MaxGroupWait bounds Debounce, ThrottlePeriod and BatchWindow.
	MaxGroupWait = 31 * 24 * time.Hour
	// MinGroupWait is the least Debounce, ThrottlePeriod and
	// BatchWindow (the stores keep times to the microsecond; below a
	// millisecond the controls mean nothing).
	MinGroupWait = time.Millisecond
	// MaxGroupKeyBytes bounds the value of a trigger's key expression.
	MaxGroupKeyBytes = 1024
)

// ErrGroupNotFound: no trigger group has the given id.
var ErrGroupNotFound = errors.New("trigger group not found")

// TriggerGroups keeps the groups of events of the triggers that control
// their flow (migrations trigger_groups, trigger_group_events,
// trigger_windows). A firing of such a trigger does not start a run: the
// service evaluates the trigger over the event and JoinGroup ends the
// firing grouped and adds the event to a group of its key, in one
// transaction fenced by the firing's token. A group is due at DueAt;
// ClaimGroups leases due groups (token, run id fixed at first claim) and
// EndGroup ends them fenced by the token, as ClaimFirings and EndFiring
// do for firings, so a group starts at most one run.
type TriggerGroups interface {
	// JoinGroup ends the leased firing (p.EventID, p.Trigger.Name)
	// grouped, fenced by p.Token (ErrLeaseLost, ErrFiringNotFound as
	// EndFiring), and adds the event to a group of (trigger, p.Key):
	//   - debounce: the open group whose DueAt is after p.Now, or a new
	//     one; DueAt becomes p.EventAt + Debounce if that is later;
	//   - batch: the open group with fewer than BatchSize events whose
	//     DueAt is after p.Now, or a new one due at p.EventAt +
	//     BatchWindow;
	//     a group that reaches BatchSize is due at p.Now and takes no
	//     more;
	//   - throttle: a new group of one, due at the start of the first
	//     window (ThrottlePeriod long, aligned to the Unix epoch) from
	//     ThrottleStart's on with fewer than ThrottleLimit groups, which
	//     it counts.
	// An event joins a trigger's groups at most once.
	JoinGroup(ctx context.Context, p *JoinGroupParams) error
	// ClaimGroups leases up to p.Limit open groups of the triggers
	// named in p.Triggers that are due at or before p.Now with no lease
	// or a lease that ended, earliest due first: it closes them (they
	// take no more events), sets Owner, Token (one more), LeaseUntil and,
	// where RunID is empty, RunID to the next unused id of p.RunIDs.
	// Concurrent claims never lease the same group. The groups carry
	// their events in event order.
	ClaimGroups(ctx context.Context, p *ClaimGroupsParams) ([]*TriggerGroup, error)
	// EndGroup records what a leased group came to (p.Status started,
	// failed or skipped) and clears the lease, or returns ErrLeaseLost
	// (token moved on, or ended already) or ErrGroupNotFound.
	EndGroup(ctx context.Context, p *EndGroupParams) error
	// NextGroupDue returns the earliest time an open group of the named
	// triggers may be claimed (its DueAt, or the end of its lease), and
	// false when there is none.
	NextGroupDue(ctx context.Context, triggers []string) (time.Time, bool, error)
	// ListTriggerGroups returns up to p.Limit (DefaultGroupsPage when 0,
	// at most MaxGroupsPage) of a trigger's groups with ids above
	// p.AfterID, oldest (lowest id) first, with their events; with
	// p.Status set, only groups of that status. A bad parameter fails
	// with an error wrapping hephtype.ErrInvalidInput that names it
	// (CheckListTriggerGroups).
	ListTriggerGroups(ctx context.Context, p *ListTriggerGroupsParams) ([]*TriggerGroup, error)
}

// Pages of ListTriggerGroups, the same on every backend.
const (
	DefaultGroupsPage = 100
	MaxGroupsPage     = 1000
)

// ListTriggerGroupsParams are the parameters of ListTriggerGroups.
type ListTriggerGroupsParams struct {
	Trigger string
	// Status, when set, is GroupOpen, GroupStarted, GroupFailed or
	// GroupSkipped.
	Status string
	// AfterID is the cursor: the id of the last group of the page before.
	AfterID int64
	Limit   int
}

// CheckListTriggerGroups reports what is wrong with p, naming the
// field, in an error wrapping hephtype.ErrInvalidInput; it returns the
// page's limit.
func CheckListTriggerGroups(p *ListTriggerGroupsParams) (int, error) {
	bad := func(format string, args ...any) (int, error) {
		return 0, fmt.Errorf("%w: list trigger groups: "+format, append([]any{hephtype.ErrInvalidInput}, args...)...)
	}
	switch {
	case p == nil || p.Trigger == "":
		return bad("trigger is empty")
	case p.Status != "" && p.Status != GroupOpen && p.Status != GroupStarted && p.Status != GroupFailed && p.Status != GroupSkipped:
		return bad("status %q is not open, started, failed or skipped", p.Status)
	case p.AfterID < 0:
		return bad("after %d is negative", p.AfterID)
	case p.Limit < 0 || p.Limit > MaxGroupsPage:
		return bad("limit %d is not between 0 and %d", p.Limit, MaxGroupsPage)
	case p.Limit == 0:
		return DefaultGroupsPage, nil
	}
	return p.Limit, nil
}

// TriggerGroup is a group of events of one key of a trigger that starts
// one run.
type TriggerGroup struct {
	ID      int64
	Trigger string
	Key     string
	Status  string
	// Closed: the group takes no more events.
	Closed bool
	DueAt  time.Time
	// RunID is the run the group starts (set by its first claim).
	RunID      string
	Error      string
	Owner      string
	Token      int64
	LeaseUntil time.Time
	EndedAt    time.Time
	Events     []*GroupEvent
}

// GroupEvent is an event of a group, with what the trigger made of it.
type GroupEvent struct {
	EventID string
	Seq     int64
	// Input is the run input the trigger mapped from the event.
	Input                       json.RawMessage
	BusinessKey, ConcurrencyKey string
}

// JoinGroupParams are the parameters of JoinGroup.
type JoinGroupParams struct {
	// Trigger is the trigger (its flow control decides the group).
	Trigger *Trigger
	// Key is the value of the trigger's key expression ("" without one).
	Key string
	// Token fences the firing's end.
	Token int64
	Event GroupEvent
	// EventAt is when the event was stored: a debounce's quiet and a
	// batch's window count from it (a throttle's windows from Now).
	EventAt time.Time
	Now     time.Time
}

// ClaimGroupsParams are the parameters of ClaimGroups.
type ClaimGroupsParams struct {
	Triggers []string
	Owner    string
	Now      time.Time
	LeaseFor time.Duration
	RunIDs   []string
	Limit    int
}

// EndGroupParams are the parameters of EndGroup.
type EndGroupParams struct {
	ID     int64
	Token  int64
	Status string
	Error  string
	Now    time.Time
}

// Grouped reports whether a trigger controls its flow (its firings join
// groups instead of starting runs).
func (t *Trigger) Grouped() bool {
	return t.Debounce > 0 || t.ThrottleLimit > 0 || t.ThrottlePeriod > 0 || t.BatchSize > 0 || t.BatchWindow > 0
}

// checkFlowControl reports what is wrong with a trigger's flow control.
func checkFlowControl(t *Trigger) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: trigger %q: "+format, append([]any{hephtype.ErrInvalidInput, t.Name}, a...)...)
	}
	n := 0
	for _, on := range []bool{t.Debounce != 0, t.ThrottleLimit != 0 || t.ThrottlePeriod != 0, t.BatchSize != 0 || t.BatchWindow != 0} {
		if on {
			n++
		}
	}
	if n > 1 {
		return bad("debounce, throttle and batch: at most one of them is allowed")
	}
	wait := func(field string, d time.Duration) error {
		if d < MinGroupWait || d > MaxGroupWait {
			return bad("%s %s must be from %s to %s", field, d, MinGroupWait, MaxGroupWait)
		}
		return nil
	}
	switch {
	case t.Debounce != 0:
		return wait("debounce", t.Debounce)
	case t.ThrottleLimit != 0 || t.ThrottlePeriod != 0:
		if t.ThrottleLimit < 1 || t.ThrottleLimit > MaxThrottleLimit {
			return bad("throttle limit %d must be from 1 to %d", t.ThrottleLimit, MaxThrottleLimit)
		}
		return wait("throttle period", t.ThrottlePeriod)
	case t.BatchSize != 0 || t.BatchWindow != 0:
		if t.BatchSize < 1 || t.BatchSize > MaxBatchSize {
			return bad("batch size %d must be from 1 to %d", t.BatchSize, MaxBatchSize)
		}
		return wait("batch window", t.BatchWindow)
	case t.Key != "":
		return bad("key is set without debounce, throttle or batch")
	}
	return nil
}

// ThrottleStart is the window a join at now starts looking for room
// in, given its key's kept windows (counted, earliest first): the window
// of now, or the earliest kept one when that starts later. A join
// deletes its key's windows before its start, so a window before the
// earliest kept one may have been counted full and deleted by a join
// whose clock ran ahead; a join whose clock lags (it waited for the
// key's lock) is counted from the earliest kept window on, never again
// in one it can no longer see.
func ThrottleStart(now time.Time, period time.Duration, counted []ThrottleCount) time.Time {
	start := ThrottleWindow(now, period)
	if len(counted) > 0 && counted[0].Start.After(start) {
		return counted[0].Start
	}
	return start
}

// ThrottleWindow is the start of the throttle window of a period that
// holds now (windows are aligned to the Unix epoch, in microseconds).
func ThrottleWindow(now time.Time, period time.Duration) time.Time {
	us, p := now.UnixMicro(), period.Microseconds()
	start := us - us%p
	if us < 0 && us%p != 0 {
		start -= p
	}
	return time.UnixMicro(start).UTC()
}

// ThrottleCount is the number of groups due in a throttle window.
type ThrottleCount struct {
	Start time.Time
	Runs  int
}

// ThrottleSlot returns the start of the first window from start on with
// fewer than limit runs, given the counted windows from start on in
// order.
func ThrottleSlot(start time.Time, period time.Duration, limit int, counted []ThrottleCount) time.Time {
	at := start
	for _, c := range counted {
		if c.Start.After(at) {
			break
		}
		if c.Start.Equal(at) {
			if c.Runs < limit {
				break
			}
			at = at.Add(period)
		}
	}
	return at
}

// GroupInput is the input of a group's run: the last event's input, or,
// for a batch, the JSON list of the events' inputs in event order (null
// for an event without one).
func GroupInput(t *Trigger, g *TriggerGroup) json.RawMessage {
	if len(g.Events) == 0 {
		return nil
	}
	if t.BatchSize == 0 {
		return g.Events[len(g.Events)-1].Input
	}
	b := []byte{'['}
	for i, e := range g.Events {
		if i > 0 {
			b = append(b, ',')
		}
		if len(e.Input) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, e.Input...)
		}
	}
	return append(b, ']')
}

// GroupDue is the deadline an event gives a debounce or a new batch.
func GroupDue(t *Trigger, p *JoinGroupParams) time.Time {
	at := p.EventAt
	if at.IsZero() {
		at = p.Now
	}
	if t.Debounce > 0 {
		return at.Add(t.Debounce)
	}
	return at.Add(t.BatchWindow)
}
