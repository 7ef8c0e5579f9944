package hephaestus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/triggers"
	"github.com/hephaestus-go/hephaestus/store"
)

// Firing statuses (TriggerFiring.Status).
const (
	FiringPending = store.FiringPending
	FiringStarted = store.FiringStarted
	FiringSkipped = store.FiringSkipped
	FiringFailed  = store.FiringFailed
	// FiringGrouped: the trigger debounces, throttles or batches its
	// events, and the event joined a group of its key, whose run starts
	// when the group is due.
	FiringGrouped = store.FiringGrouped
)

// Limits of flow control over events, the same on every backend.
const (
	// MaxBatchSize bounds Batch.Size.
	MaxBatchSize = store.MaxBatchSize
	// MaxThrottleLimit bounds Throttle.Limit.
	MaxThrottleLimit = store.MaxThrottleLimit
	// MinGroupWait and MaxGroupWait bound Debounce, Throttle.Period and
	// Batch.Window.
	MinGroupWait = store.MinGroupWait
	MaxGroupWait = store.MaxGroupWait
	// MaxGroupKeyBytes bounds the value of a trigger's Key.
	MaxGroupKeyBytes = store.MaxGroupKeyBytes
)

// Throttle starts at most Limit runs per Period per key. The events over
// the limit are not dropped: each waits for the first window with room
// (windows are Period long, aligned to the Unix epoch) and starts its run
// with its own input then.
type Throttle struct {
	Limit  int
	Period time.Duration
}

// Batch collects the events of a key into one run: up to Size events, or
// those that come until Window after the first of the batch. The run's
// input is the JSON list of the events' inputs, in the order they were
// stored.
type Batch struct {
	Size   int
	Window time.Duration
}

// Trigger starts a run of a target for every event of a name whose data
// its filter accepts: exactly one run per (event, trigger), however many
// processes see the event and whichever of them is killed mid-way.
type Trigger struct {
	// Name identifies the trigger (1 to 200 bytes).
	Name string
	// Event is the name of the events that fire it.
	Event string
	// Target and TargetName say what to start: a flow, a workflow, a
	// flow document (its latest version) or a job kind.
	Target     TargetKind
	TargetName string
	// Filter, when set, is a CEL expression over event (a map with id,
	// name, data, at and seq) that must be true for a run to start:
	// event.data.amount > 100.
	Filter string
	// Input, when set, is a CEL expression whose value is the run's
	// input: {"order": event.data.order}. When empty, the input is the
	// event's data.
	Input string
	// BusinessKey, when set, is a CEL expression (a string, or an
	// integral number) whose value is the run's business key: the value
	// of the business key a flow or document declares, a workflow's id,
	// or a job's unique key (JobOptions.UniqueKey). While a run holds it,
	// the firing of another event with the same key ends skipped, saying
	// so: one active run per key.
	BusinessKey string
	// ConcurrencyKey, when set, is a CEL expression whose value is the
	// run's concurrency key (the queue's per-key limit applies).
	ConcurrencyKey string
	// Key, when set, is a CEL expression (a string, or an integral
	// number) that groups the events for Debounce, Throttle and Batch:
	// each acts per value of the key. Empty: all the trigger's events
	// are one group.
	Key string
	// At most one of Debounce, Throttle and Batch. Each is enforced by
	// the store across processes, and a trigger with one starts its runs
	// when its groups are due, not when its events come.
	//
	// Debounce, when set, starts one run after Debounce of quiet for a
	// key (no event of the key for Debounce), with the last event's
	// input.
	Debounce time.Duration
	// Throttle, when set, starts at most Throttle.Limit runs per
	// Throttle.Period per key; the excess is deferred, not dropped.
	Throttle *Throttle
	// Batch, when set, collects events into runs whose input is a list.
	Batch *Batch
}

// ErrTriggerNotFound: no trigger has the given name.
var ErrTriggerNotFound = store.ErrTriggerNotFound

// ErrTriggerDeclared: the trigger is declared in code (DeclareTriggers);
// a trigger managed at run time may not replace it, since the program
// declares it again at its next start.
var ErrTriggerDeclared = errors.New("trigger is declared in code")

// StoredTrigger is a trigger as stored: declared in code by a program, or
// managed at run time (PutTrigger, the API, heph triggers put).
type StoredTrigger struct {
	Trigger
	// Declared: by a program's DeclareTriggers (or a document's on:);
	// false: managed at run time.
	Declared  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TriggerFiring is what one trigger did with one event.
type TriggerFiring struct {
	Trigger string `json:"trigger"`
	// Status is FiringPending, FiringStarted, FiringSkipped,
	// FiringFailed or FiringGrouped.
	Status string `json:"status"`
	// RunID is the run the trigger started (or is to start).
	RunID string `json:"run_id,omitempty"`
	Error string `json:"error,omitempty"`
}

// DeclareTriggers stores triggers (replacing those of the same names) and
// makes this client start their runs once started: every event sent from
// now on whose name is a trigger's gets a firing, which any started
// client that declared the trigger carries out. Nothing is stored when a
// trigger is invalid; the error names it and what is wrong (a CEL
// expression that does not compile, an unknown target kind).
func (c *Client) DeclareTriggers(ctx context.Context, ts ...*Trigger) error {
	st := make([]*store.Trigger, len(ts))
	for i, t := range ts {
		if t == nil {
			return fmt.Errorf("%w: trigger %d is nil", ErrInvalidInput, i)
		}
		st[i] = storeTrigger(t)
	}
	return c.triggers.Declare(ctx, st...)
}

// PutTrigger creates or replaces a trigger managed at run time: unlike a
// declared one, it lives in the store only, and every started client
// carries it out (its target started as a schedule's would: a flow or job
// this process lacks starts from its catalog entry). Other processes see
// it within ten poll intervals. The trigger is checked as DeclareTriggers
// checks it; a trigger declared in code of the same name is
// ErrTriggerDeclared. created reports that no trigger had the name.
func (c *Client) PutTrigger(ctx context.Context, t *Trigger) (created bool, err error) {
	if t == nil {
		return false, fmt.Errorf("%w: the trigger is nil", ErrInvalidInput)
	}
	switch old, err := c.GetTrigger(ctx, t.Name); {
	case err == nil && old.Declared:
		return false, fmt.Errorf("%w: %q: change it in the program that declares it, or delete it first", ErrTriggerDeclared, t.Name)
	case errors.Is(err, ErrTriggerNotFound):
		created = true
	case err != nil:
		return false, err
	}
	return created, c.triggers.Put(ctx, storeTrigger(t))
}

func storeTrigger(t *Trigger) *store.Trigger {
	st := &store.Trigger{Name: t.Name, Event: t.Event, TargetKind: string(t.Target), TargetName: t.TargetName, Filter: t.Filter, Input: t.Input,
		BusinessKey: t.BusinessKey, ConcurrencyKey: t.ConcurrencyKey, Key: t.Key, Debounce: t.Debounce}
	if t.Throttle != nil {
		st.ThrottleLimit, st.ThrottlePeriod = t.Throttle.Limit, t.Throttle.Period
		if st.ThrottleLimit == 0 && st.ThrottlePeriod == 0 {
			st.ThrottleLimit = -1 // set but empty: refused, naming the limit
		}
	}
	if t.Batch != nil {
		st.BatchSize, st.BatchWindow = t.Batch.Size, t.Batch.Window
		if st.BatchSize == 0 && st.BatchWindow == 0 {
			st.BatchSize = -1
		}
	}
	return st
}

// ListTriggers returns every stored trigger, declared and managed, by
// name.
func (c *Client) ListTriggers(ctx context.Context) ([]*StoredTrigger, error) {
	ts, err := c.cfg.Store.ListTriggers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*StoredTrigger, len(ts))
	for i, t := range ts {
		out[i] = storedTrigger(t)
	}
	return out, nil
}

// GetTrigger returns a stored trigger, or ErrTriggerNotFound.
func (c *Client) GetTrigger(ctx context.Context, name string) (*StoredTrigger, error) {
	ts, err := c.ListTriggers(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrTriggerNotFound, name)
}

// DeleteTrigger deletes a trigger and its pending firings (those that
// ended are kept with their event), or returns ErrTriggerNotFound. A
// trigger declared in code comes back when its program declares it
// again.
func (c *Client) DeleteTrigger(ctx context.Context, name string) error {
	return c.triggers.Delete(ctx, name)
}

func storedTrigger(t *store.Trigger) *StoredTrigger {
	return &StoredTrigger{
		Trigger: Trigger{Name: t.Name, Event: t.Event, Target: TargetKind(t.TargetKind), TargetName: t.TargetName, Filter: t.Filter, Input: t.Input,
			BusinessKey: t.BusinessKey, ConcurrencyKey: t.ConcurrencyKey, Key: t.Key, Debounce: t.Debounce, Throttle: throttleOf(t), Batch: batchOf(t)},
		Declared: t.Declared, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

func throttleOf(t *store.Trigger) *Throttle {
	if t.ThrottleLimit == 0 && t.ThrottlePeriod == 0 {
		return nil
	}
	return &Throttle{Limit: t.ThrottleLimit, Period: t.ThrottlePeriod}
}

func batchOf(t *store.Trigger) *Batch {
	if t.BatchSize == 0 && t.BatchWindow == 0 {
		return nil
	}
	return &Batch{Size: t.BatchSize, Window: t.BatchWindow}
}

// EventFirings returns what the triggers did with an event, by trigger
// name.
func (c *Client) EventFirings(ctx context.Context, eventID string) ([]*TriggerFiring, error) {
	fs, err := c.cfg.Store.Firings(ctx, eventID)
	if err != nil {
		return nil, err
	}
	out := make([]*TriggerFiring, len(fs))
	for i, f := range fs {
		out[i] = &TriggerFiring{Trigger: f.Trigger, Status: f.Status, RunID: f.RunID, Error: f.Error}
	}
	return out, nil
}

// DispatchTriggers carries out, now, one batch of the pending firings of
// the triggers this client declared, as the loop that Start runs does,
// and returns how many it handled. Tests on a fake clock call it.
func (c *Client) DispatchTriggers(ctx context.Context) (int, error) {
	return c.triggers.Dispatch(ctx)
}

// newTriggers builds the trigger service of a client.
func (c *Client) newTriggers() *triggers.Service {
	return triggers.New(&triggers.Config{
		Store: c.cfg.Store, Triggers: c.cfg.Store, Clock: c.cfg.Clock, Logger: c.cfg.Logger,
		Owner: c.cfg.WorkerID, LeaseFor: c.cfg.LeaseDuration, Interval: 10 * c.cfg.PollInterval, NewID: newID,
		Deliver: c.deliverEventWait,
		Start: func(ctx context.Context, t *store.Trigger, p *triggers.StartParams) error {
			var in any
			if len(p.Input) > 0 {
				in = p.Input
			}
			_, err := c.startKind(ctx, t.TargetKind, t.TargetName, in, &kindStart{RunID: p.RunID, Meta: map[string]any{"event": p.EventID, "trigger": t.Name},
				BusinessKey: p.BusinessKey, ConcurrencyKey: p.ConcurrencyKey})
			switch {
			case errors.Is(err, ErrRunExists):
				return nil // claimed again after a start whose end was not recorded
			case errors.Is(err, ErrDuplicateRun):
				return fmt.Errorf("%w: business key %q: %w", triggers.ErrSkip, p.BusinessKey, err)
			}
			return err
		},
	})
}

// Statuses of a TriggerGroup.
const (
	// GroupOpen: the group has not started its run yet; it may still take
	// events until it is due or claimed.
	GroupOpen = store.GroupOpen
	// GroupStarted: the group started the run named in RunID.
	GroupStarted = store.GroupStarted
	// GroupFailed: the run could not be started; Error says why.
	GroupFailed = store.GroupFailed
	// GroupSkipped: the run was not started, as an answer (a run with its
	// business key is active); Error says why.
	GroupSkipped = store.GroupSkipped
)

// TriggerGroup is a group of events of one key of a trigger that
// debounces, throttles or batches them: the group starts one run when it
// is due.
type TriggerGroup struct {
	ID      int64  `json:"id"`
	Trigger string `json:"trigger"`
	Key     string `json:"key"`
	// Status is GroupOpen, GroupStarted, GroupFailed or GroupSkipped.
	Status string `json:"status"`
	// Closed: the group takes no more events.
	Closed bool      `json:"closed"`
	DueAt  time.Time `json:"due_at"`
	// RunID is the run the group starts (set when it is first claimed).
	RunID   string     `json:"run_id,omitempty"`
	Error   string     `json:"error,omitempty"`
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// Events are the ids of the group's events, in the order they were
	// stored.
	Events []string `json:"events"`
}

// ListTriggerGroupsOptions page and filter ListTriggerGroups.
type ListTriggerGroupsOptions struct {
	// Status, when set, is GroupOpen, GroupStarted, GroupFailed or
	// GroupSkipped.
	Status string
	// After is the cursor: TriggerGroupPage.Next of the page before.
	After int64
	// Limit is the page's size: 100 when 0, at most MaxTriggerGroupsPage.
	Limit int
}

// MaxTriggerGroupsPage bounds ListTriggerGroupsOptions.Limit.
const MaxTriggerGroupsPage = store.MaxGroupsPage

// TriggerGroupPage is a page of a trigger's groups, oldest first.
type TriggerGroupPage struct {
	Groups []*TriggerGroup `json:"groups"`
	// Next is the cursor of the next page (ListTriggerGroupsOptions.After),
	// or 0 on the last.
	Next int64 `json:"next"`
}

// ListTriggerGroups returns a page of the groups of a trigger that
// debounces, throttles or batches its events, oldest first: what is
// waiting (GroupOpen) and what each group came to. Groups are kept until
// the events retention sweep takes them (Config.EventRetention). An
// unknown trigger is ErrTriggerNotFound; a bad option an error wrapping
// ErrInvalidInput that names it.
func (c *Client) ListTriggerGroups(ctx context.Context, trigger string, opts *ListTriggerGroupsOptions) (*TriggerGroupPage, error) {
	if opts == nil {
		opts = &ListTriggerGroupsOptions{}
	}
	p := &store.ListTriggerGroupsParams{Trigger: trigger, Status: opts.Status, AfterID: opts.After, Limit: opts.Limit}
	limit, err := store.CheckListTriggerGroups(p)
	if err != nil {
		return nil, err
	}
	if _, err := c.GetTrigger(ctx, trigger); err != nil {
		return nil, err
	}
	gs, err := c.cfg.Store.ListTriggerGroups(ctx, p)
	if err != nil {
		return nil, err
	}
	page := &TriggerGroupPage{Groups: make([]*TriggerGroup, len(gs))}
	for i, g := range gs {
		out := &TriggerGroup{ID: g.ID, Trigger: g.Trigger, Key: g.Key, Status: g.Status, Closed: g.Closed, DueAt: g.DueAt, RunID: g.RunID, Error: g.Error,
			Events: make([]string, len(g.Events))}
		if !g.EndedAt.IsZero() {
			out.EndedAt = &g.EndedAt
		}
		for j, e := range g.Events {
			out.Events[j] = e.EventID
		}
		page.Groups[i] = out
	}
	if len(gs) == limit {
		page.Next = gs[len(gs)-1].ID
	}
	return page, nil
}
