package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/store"
)

// Updates are synchronous: the caller's process offers the update to the
// workflow in a decision of its own (it must have the workflow
// registered), so a validator's rejection comes back at once and writes
// nothing. An accepted update is recorded (update_accepted) with whatever
// the activation did; the caller then waits for its update_completed,
// which a later decision of any process may write: a decision of this
// process tells the caller directly, one elsewhere is found by reading
// the history.

// UpdateRejectedError reports an update the workflow rejected; nothing
// was written. The root package converts it to its public type.
type UpdateRejectedError struct {
	RunID string
	Name  string
	ID    string
	Err   error
}

func (e *UpdateRejectedError) Error() string {
	return fmt.Sprintf("update %q of run %s rejected: %v", e.Name, e.RunID, e.Err)
}

func (e *UpdateRejectedError) Unwrap() error { return e.Err }

// UpdateFailedError reports an accepted update whose handler failed.
type UpdateFailedError struct {
	RunID   string
	Name    string
	ID      string
	Message string
}

func (e *UpdateFailedError) Error() string {
	return fmt.Sprintf("update %q of run %s failed: %s", e.Name, e.RunID, e.Message)
}

// UpdateWorkflow sends an update to a workflow run and waits for the
// handler's reply. A rejected update returns an *UpdateRejectedError and
// writes nothing; a failed handler returns an *UpdateFailedError. The
// workflow must be registered in this client (its validators run here).
// An update to a run that continued as new goes to the run that carries
// it on.
func (c *Runtime) UpdateWorkflow(ctx context.Context, runID, name string, args any, id string) (json.RawMessage, error) {
	raw, err := limits.JSON(args)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w: arguments %w", name, runID, limits.ErrInvalidInput, err)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the update's arguments"); err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", name, runID, err)
	}
	if id == "" {
		id = newID()
	}
	run, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", name, runID, err)
	}
	if run, err = c.CurrentRun(ctx, run); err != nil {
		return nil, fmt.Errorf("update %q: %w", name, err)
	}
	if run.Kind != hephtype.KindWorkflow {
		return nil, fmt.Errorf("update %q of run %s: %w: it is a %s, not a workflow", name, run.ID, limits.ErrInvalidInput, run.Kind)
	}
	if run.Status.Terminal() {
		return nil, fmt.Errorf("update %q of run %s: %w (status %s)", name, run.ID, engine.ErrRunFinished, run.Status)
	}
	fn, ok := c.reg.workflow(run.Workflow)
	if !ok {
		return nil, fmt.Errorf("update %q of run %s: %w: %q must be registered in the client that sends updates (validators run there)", name, run.ID, ErrWorkflowNotFound, run.Workflow)
	}
	w := c.updates.add(run.ID, id)
	defer c.updates.remove(w)

	in := &decideInput{runID: run.ID, workflow: run.Workflow, read: true,
		updates: []replay.UpdateRequest{{ID: id, Name: name, Args: raw}}}
	e := c.sticky.lock(run.ID)
	var res *decideResult
	for attempt := 0; ; attempt++ {
		res, err = c.decideLocked(ctx, e, fn, in)
		if !errors.Is(err, errConflict) || attempt >= 8 {
			break
		}
	}
	c.sticky.unlock(e)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", name, run.ID, err)
	}
	o := res.dec.Updates[0]
	if !o.Accepted {
		cause := o.Err
		var re *replay.UpdateRejectedError
		if errors.As(cause, &re) {
			cause = re.Err
		}
		return nil, &UpdateRejectedError{RunID: run.ID, Name: name, ID: id, Err: cause}
	}
	from := res.seq
	if o.Duplicate {
		from = 0 // its reply may be anywhere in the history
	}
	out, err := c.waitUpdate(ctx, w, run.ID, id, from)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", name, run.ID, err)
	}
	if out.errMsg != "" {
		return nil, &UpdateFailedError{RunID: run.ID, Name: name, ID: id, Message: out.errMsg}
	}
	return out.result, nil
}

// waitUpdate waits for the completion of an accepted update: told by a
// decision of this process, or found in the history after seq from.
func (c *Runtime) waitUpdate(ctx context.Context, w *updateWaiter, runID, id string, from int64) (updateOutcome, error) {
	poll := c.cfg.MinPollInterval / 5
	// A duplicate's reply may be in the history already.
	look := from == 0
	for {
		if !look {
			select {
			case o := <-w.ch:
				if o.done {
					return o, nil
				}
				return o, fmt.Errorf("%w (status %s) before the update completed", engine.ErrRunFinished, o.ended)
			case <-ctx.Done():
				return updateOutcome{}, ctx.Err()
			case <-c.cfg.Clock.After(poll):
				poll = min(poll*2, c.cfg.PollInterval)
			}
		}
		look = false
		// Another process may have completed it.
		r, err := c.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return updateOutcome{}, err
		}
		if r.Seq > from {
			h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: runID, AfterSeq: from})
			if err != nil {
				return updateOutcome{}, err
			}
			for _, e := range h {
				if e.Kind == hephtype.EventUpdateDone && e.Step == id {
					return updateOutcome{result: e.Data, errMsg: e.Error, done: true}, nil
				}
				from = e.Seq
			}
		}
		if r.Status.Terminal() && r.Seq <= from {
			return updateOutcome{}, fmt.Errorf("%w (status %s) before the update completed", engine.ErrRunFinished, r.Status)
		}
	}
}

// updateOutcome is what a waiting update caller learns.
type updateOutcome struct {
	done   bool
	result json.RawMessage
	errMsg string
	// ended, when not done: the run ended with this status.
	ended hephtype.RunStatus
}

type updateWaiter struct {
	runID, id string
	ch        chan updateOutcome
}

// updateWaiters are the update callers of this process waiting for their
// update's completion.
type updateWaiters struct {
	mu sync.Mutex
	m  map[string]map[*updateWaiter]bool // by run id
}

func (u *updateWaiters) add(runID, id string) *updateWaiter {
	w := &updateWaiter{runID: runID, id: id, ch: make(chan updateOutcome, 1)}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]map[*updateWaiter]bool{}
	}
	if u.m[runID] == nil {
		u.m[runID] = map[*updateWaiter]bool{}
	}
	u.m[runID][w] = true
	return w
}

func (u *updateWaiters) remove(w *updateWaiter) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m[w.runID], w)
	if len(u.m[w.runID]) == 0 {
		delete(u.m, w.runID)
	}
}

// notify tells the callers waiting for update id of a run.
func (u *updateWaiters) notify(runID, id string, o updateOutcome) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for w := range u.m[runID] {
		if w.id == id {
			send(w.ch, o)
		}
	}
}

// notifyRun tells every caller waiting on a run (that ended).
func (u *updateWaiters) notifyRun(runID string, o updateOutcome) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for w := range u.m[runID] {
		send(w.ch, o)
	}
}

// send delivers o unless the waiter was told already: a completion beats
// the run's end.
func send(ch chan updateOutcome, o updateOutcome) {
	select {
	case ch <- o:
	default:
	}
}

// CancelUpdate is the update that cancels a workflow run: its queued and
// running tasks go, its open children are cancelled and its parent is
// told.
func CancelUpdate(run *store.Run, reason string) (*store.Update, error) {
	return cancelWorkflowUpdate(run, reason)
}

// Cancelled tells the runtime that a commit cancelled a workflow run: its
// cached instance goes and its waiting update callers are told.
func (c *Runtime) Cancelled(run *store.Run) {
	c.sticky.evict(run.ID)
	c.updates.notifyRun(run.ID, updateOutcome{ended: run.Status})
}
