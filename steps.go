package hephaestus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/runsteps"
	"github.com/hephaestus-go/hephaestus/store"
)

// StepDetail is what one step of a run did: a flow's step, a map step's
// element ("step #i"), or a code-first workflow's activity ("name #seq"),
// timer ("timer #seq") or child workflow ("child name #seq").
type StepDetail struct {
	// Name names the step as the run shows it ("charge", "price #1",
	// "fetch #3"); Kind is step, item, activity, timer or child.
	Name string
	Kind string
	// Status is the flow step's stored status, or for other kinds the
	// one its attempts give: pending, running, waiting, completed,
	// failed or cancelled.
	Status string
	// StartedAt is the first attempt's start; FinishedAt the step's end
	// (zero while it is not done). Duration is between them, or up to now
	// while it runs.
	StartedAt  time.Time
	FinishedAt time.Time
	Duration   time.Duration
	// Error is the last attempt's error on a failed step.
	Error    string
	Attempts []StepAttempt
	// Waits are the stretches the step waited to be resumed from outside
	// (or a timer's time).
	Waits []StepWait
}

// StepAttempt is one attempt of a step.
type StepAttempt struct {
	Number int
	// Worker ran the attempt (or holds its lease now).
	Worker string
	// ReadyAt is when it was queued; StartedAt and FinishedAt when it
	// started and ended (zero when unknown: a running attempt's start is
	// recorded with its outcome).
	ReadyAt    time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Outcome is completed, failed, retrying (failed, another attempt
	// follows), cancelled, snoozed, waiting, running or queued.
	Outcome string
	Error   string
	// Reexecution: an earlier claim of the attempt lost its lease or was
	// given back; Claims counts the claims.
	Reexecution bool
	Claims      int
	// Details are the heartbeat details of a running attempt; LeaseUntil
	// is its lease.
	Details    json.RawMessage
	LeaseUntil time.Time
}

// StepWait is a stretch a step waited.
type StepWait struct {
	From time.Time
	// To is zero while it waits.
	To time.Time
	// Outcome is completed (resumed, or the timer fired), cancelled, or
	// waiting.
	Outcome string
	// Event resumed the step; Actor sent it.
	Event, Actor string
}

// Steps returns what each step of a run did, read from its history, its
// step states and its open tasks, in the order the steps first ran.
func (c *Client) Steps(ctx context.Context, runID string) ([]StepDetail, error) {
	r, err := c.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: r.ID})
	if err != nil {
		return nil, fmt.Errorf("steps of run %s: %w", r.ID, err)
	}
	tasks, err := c.cfg.Store.RunTasks(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("steps of run %s: %w", r.ID, err)
	}
	now := c.cfg.Clock.Now().UTC()
	in := &runsteps.Input{Finished: r.Status.Terminal(), End: now}
	if in.Finished && !r.FinishedAt.IsZero() {
		in.End = r.FinishedAt
	}
	for _, e := range h {
		in.Events = append(in.Events, runsteps.Event{Seq: e.Seq, Kind: e.Kind, Step: e.Step, Index: e.Index, Attempt: e.Attempt,
			Name: e.Name, Data: e.Data, Error: e.Error, At: e.At})
	}
	for _, s := range r.Steps {
		in.States = append(in.States, runsteps.State{Name: s.Name, Status: string(s.Status), Attempts: s.Attempt})
	}
	for _, t := range tasks {
		in.Tasks = append(in.Tasks, runsteps.Task{Kind: string(t.Kind), Step: t.Step, Index: t.Index, Attempt: t.Attempt, ReadyAt: t.ReadyAt,
			Owner: t.Owner, LeaseUntil: t.LeaseUntil, Claims: t.Claims, Details: t.Details})
	}
	steps := runsteps.Derive(in)
	out := make([]StepDetail, 0, len(steps))
	for _, s := range steps {
		d := StepDetail{Name: s.Key, Kind: s.Kind, Status: s.Status, StartedAt: s.Start, FinishedAt: s.End, Duration: s.Duration(in.End), Error: s.Error}
		for _, a := range s.Attempts {
			d.Attempts = append(d.Attempts, StepAttempt{Number: a.N, Worker: a.Worker, ReadyAt: a.Ready, StartedAt: a.Start, FinishedAt: a.End,
				Outcome: a.Outcome, Error: a.Error, Reexecution: a.Reexecution, Claims: a.Claims, Details: a.Details, LeaseUntil: a.LeaseUntil})
		}
		for _, w := range s.Waits {
			d.Waits = append(d.Waits, StepWait{From: w.From, To: w.To, Outcome: w.Outcome, Event: w.Event, Actor: w.Actor})
		}
		out = append(out, d)
	}
	return out, nil
}
