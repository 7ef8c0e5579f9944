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
	"github.com/hephaestus-go/hephaestus/store"
)

// Updates are durable requests (store.Request): the caller records the
// update with a decision task that only a process with the workflow
// claims (requests.go), and needs none of the workflow's code. That
// process offers the update to the workflow in a decision over the run's
// current state: the validator runs there. An accepted update is written
// to the history (update_accepted) by the decision, which the task's
// lease fences; a rejected one is written to the request alone
// (AnswerRequest, fenced by the same lease), never to the history. The
// caller waits for the request's answer, or the update's events in the
// history, from any process: a decision of this process tells it at once,
// one elsewhere is found by polling the store.

// UpdateRejectedError reports an update the workflow rejected; nothing
// was written to the run's history. It is the public error with the
// rejection's code: the root package returns the hephtype one it holds.
type UpdateRejectedError struct {
	hephtype.UpdateRejectedError
	// Code classifies the rejection (the Reject* constants).
	Code string
}

// UpdateFailedError reports an accepted update whose handler failed.
type UpdateFailedError = hephtype.UpdateFailedError

// WaitStage is how far an update caller waits.
type WaitStage int

const (
	// WaitCompleted waits for the handler's result.
	WaitCompleted WaitStage = iota
	// WaitAccepted waits until the workflow accepted (or rejected) the
	// update.
	WaitAccepted
)

// UpdateParams is an update to send.
type UpdateParams struct {
	RunID string
	Name  string
	Args  any
	// ID identifies the update within the run; empty: a new random one.
	ID   string
	Wait WaitStage
}

// UpdateOutcome is what an update caller learns.
type UpdateOutcome struct {
	// RunID is the run that got the update (after continue-as-new).
	RunID string
	ID    string
	// Completed: Result holds the handler's reply; otherwise the update
	// was accepted and its handler has not replied yet.
	Completed bool
	Result    json.RawMessage
}

// UpdateWorkflow sends an update to a workflow run and waits, as p.Wait
// says, for its acceptance or its reply. A rejected update returns an
// *UpdateRejectedError and writes nothing to the history; a failed
// handler returns an *UpdateFailedError. An update to a run that
// continued as new goes to the run that carries it on.
func (c *Runtime) UpdateWorkflow(ctx context.Context, p *UpdateParams) (*UpdateOutcome, error) {
	name := p.Name
	raw, err := limits.JSON(p.Args)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w: arguments %w", name, p.RunID, limits.ErrInvalidInput, err)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the update's arguments"); err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", name, p.RunID, err)
	}
	if name == "" {
		return nil, fmt.Errorf("update of run %s: %w: the update's name is empty", p.RunID, limits.ErrInvalidInput)
	}
	id := p.ID
	if id == "" {
		id = newID()
	}
	if err := store.CheckRequestID(updatePrefix + id); err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w: UpdateOptions.ID: %w", name, p.RunID, limits.ErrInvalidInput, err)
	}
	run, err := c.cfg.Store.GetRun(ctx, p.RunID)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", name, p.RunID, err)
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
	if err := c.reg.checkName(run.Workflow, name, false); err != nil {
		// This process has the workflow: no need to ask a worker.
		return nil, &UpdateRejectedError{UpdateRejectedError: hephtype.UpdateRejectedError{RunID: run.ID, Name: name, ID: id, Err: err}, Code: RejectUnknown}
	}
	for hop := 0; ; hop++ {
		req, err := c.sendRequest(ctx, run, store.RequestUpdate, updatePrefix+id, name, raw)
		if err != nil {
			return nil, fmt.Errorf("update %q of run %s: %w", name, run.ID, err)
		}
		out, err := c.awaitUpdate(ctx, req, id, p.Wait, false)
		var re *UpdateRejectedError
		if errors.As(err, &re) && re.Code == RejectFinished && hop < 8 {
			// The run continued as new before it took the update: the run
			// that carries it on gets it.
			if r, gerr := c.cfg.Store.GetRun(ctx, run.ID); gerr == nil && r.Status == hephtype.StatusContinued {
				if next, cerr := c.CurrentRun(ctx, r); cerr == nil && !next.Status.Terminal() {
					run = next
					continue
				}
			}
		}
		return updateResult(run.ID, req.Name, id, out, err)
	}
}

// updateResult is what an update caller gets from its wait.
func updateResult(runID, name, id string, out updateOutcome, err error) (*UpdateOutcome, error) {
	var re *UpdateRejectedError
	switch {
	case errors.As(err, &re):
		re.RunID, re.Name, re.ID = runID, name, id
		return nil, re
	case err != nil:
		return nil, fmt.Errorf("update %q of run %s: %w", name, runID, err)
	case out.errMsg != "":
		return nil, &UpdateFailedError{RunID: runID, Name: name, ID: id, Message: out.errMsg}
	}
	return &UpdateOutcome{RunID: runID, ID: id, Completed: out.done, Result: out.result}, nil
}

// awaitUpdate waits for the answer of an update's request (waitUpdate),
// woken by this process's decisions.
// unrecorded: the request may have no row yet (it travels in its task).
func (c *Runtime) awaitUpdate(ctx context.Context, req *store.Request, id string, stage WaitStage, unrecorded bool) (updateOutcome, error) {
	w := c.updates.add(req.RunID, id)
	defer c.updates.remove(w)
	return c.waitUpdate(ctx, w, req, stage, unrecorded)
}

// updatePrefix makes an update's id the id of its request.
const updatePrefix = "update:"

// waitUpdate waits for an update's answer: its rejection, recorded with
// the request, or its acceptance and completion, recorded in the history
// after the request. A decision of this process tells w; otherwise it
// polls the store, backing off up to PollInterval.
func (c *Runtime) waitUpdate(ctx context.Context, w *updateWaiter, req *store.Request, stage WaitStage, unrecorded bool) (updateOutcome, error) {
	poll := c.cfg.MinPollInterval / 5
	from := req.Seq
	accepted, rescanned := false, false
	for {
		r, err := c.cfg.Store.GetRequest(ctx, req.RunID, req.ID)
		switch {
		case errors.Is(err, store.ErrRequestNotFound) && unrecorded:
		case err != nil:
			return updateOutcome{}, err
		case r.Status == store.RequestRejected:
			return updateOutcome{}, rejection(r.Code, r.Error)
		case r.Status == store.RequestAccepted && !rescanned:
			// Accepted before this request was recorded: its events may be
			// anywhere in the history.
			from, rescanned = 0, true
		}
		run, err := c.cfg.Store.GetRun(ctx, req.RunID)
		if err != nil {
			return updateOutcome{}, err
		}
		if run.Seq > from {
			h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: req.RunID, AfterSeq: from})
			if err != nil {
				return updateOutcome{}, err
			}
			for _, e := range h {
				if e.Step == w.id {
					switch e.Kind {
					case hephtype.EventUpdateAccepted:
						accepted = true
					case hephtype.EventUpdateDone:
						return updateOutcome{result: e.Data, errMsg: e.Error, done: true}, nil
					}
				}
				from = e.Seq
			}
		}
		if accepted && stage == WaitAccepted {
			return updateOutcome{}, nil
		}
		if run.Status.Terminal() && run.Seq <= from {
			if !accepted {
				// Its task went with the run's end, unanswered.
				return updateOutcome{}, rejection(RejectFinished, fmt.Sprintf("the run ended (status %s) before it accepted the update", run.Status))
			}
			return updateOutcome{}, fmt.Errorf("%w (status %s) before the update completed", engine.ErrRunFinished, run.Status)
		}
		select {
		case <-w.ch:
		case <-ctx.Done():
			return updateOutcome{}, ctx.Err()
		case <-c.cfg.Clock.After(poll):
			poll = min(poll*2, c.cfg.PollInterval)
		}
	}
}

// updateOutcome is what a waiting update caller learns.
type updateOutcome struct {
	done   bool
	result json.RawMessage
	errMsg string
}

// updateWaiter is a caller waiting for update id of a run; ch is a hint
// that something changed (the waiter reads the store again).
type updateWaiter struct {
	runID, id string
	ch        chan struct{}
}

// updateWaiters are the update callers of this process waiting for their
// update's completion.
type updateWaiters struct {
	mu sync.Mutex
	m  map[string]map[*updateWaiter]bool // by run id
}

func (u *updateWaiters) add(runID, id string) *updateWaiter {
	w := &updateWaiter{runID: runID, id: id, ch: make(chan struct{}, 1)}
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

// notify wakes the callers waiting for update id of a run.
func (u *updateWaiters) notify(runID, id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for w := range u.m[runID] {
		if w.id == id {
			poke(w.ch)
		}
	}
}

// notifyRun wakes every caller waiting on a run (that ended).
func (u *updateWaiters) notifyRun(runID string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for w := range u.m[runID] {
		poke(w.ch)
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// CancelUpdate is the update that cancels a workflow run: its queued and
// running tasks go, its open children are cancelled and its parent is
// told.
func CancelUpdate(run *store.Run, reason string) (*store.Update, error) {
	return cancelWorkflowUpdate(run, reason)
}

// TimedOutUpdate is the update that fails a workflow run whose execution
// timeout passed: as CancelUpdate, but the run fails with msg, its
// history ends with run_timed_out and its parent learns of a failure.
func TimedOutUpdate(run *store.Run, msg string) (*store.Update, error) {
	return stopWorkflowUpdate(run, hephtype.StatusFailed, hephtype.EventRunTimedOut, msg)
}

// Cancelled tells the runtime that a commit cancelled a workflow run: its
// cached instance goes and its waiting update callers are told.
func (c *Runtime) Cancelled(run *store.Run) {
	c.sticky.evict(run.ID)
	c.updates.notifyRun(run.ID)
}

// UpdateWithStart sends an update to the active run of a workflow id,
// starting one first (with input) if there is none, and waits as
// p.Wait says (p.RunID is ignored). A run it starts is created with the
// update's request, in one transaction: the update is never lost between
// the two. It returns the run that got the update.
func (c *Runtime) UpdateWithStart(ctx context.Context, name, id string, input any, opts *StartOptions, p *UpdateParams) (*store.Run, *UpdateOutcome, error) {
	o := StartOptions{}
	if opts != nil {
		o = *opts
	}
	o.ID = id
	if id == "" {
		return nil, nil, fmt.Errorf("update-with-start %q: %w: the workflow id is empty", name, limits.ErrInvalidInput)
	}
	if err := c.reg.checkName(name, p.Name, false); err != nil {
		return nil, nil, &UpdateRejectedError{UpdateRejectedError: hephtype.UpdateRejectedError{Name: p.Name, ID: p.ID, Err: err}, Code: RejectUnknown}
	}
	raw, err := limits.JSON(p.Args)
	if err != nil {
		return nil, nil, fmt.Errorf("update-with-start %q: %w: arguments %w", name, limits.ErrInvalidInput, err)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the update's arguments"); err != nil {
		return nil, nil, fmt.Errorf("update-with-start %q: %w", name, err)
	}
	up := *p
	if up.ID == "" {
		up.ID = newID() // the same for every attempt below
	}
	if err := store.CheckRequestID(updatePrefix + up.ID); err != nil {
		return nil, nil, fmt.Errorf("update-with-start %q: %w: UpdateOptions.ID: %w", name, limits.ErrInvalidInput, err)
	}
	for attempt := 0; ; attempt++ {
		r, err := c.FindWorkflow(ctx, name, id)
		switch {
		case err == nil && !r.Status.Terminal():
			up.RunID = r.ID
			out, err := c.UpdateWorkflow(ctx, &up)
			if errors.Is(err, engine.ErrRunFinished) && attempt < 10 {
				continue // the run ended meanwhile: the next one gets it
			}
			if err != nil {
				return r, nil, err
			}
			if out.RunID != r.ID {
				if r, err = c.cfg.Store.GetRun(ctx, out.RunID); err != nil {
					return nil, nil, err
				}
			}
			return r, out, nil
		case err == nil || errors.Is(err, store.ErrRunNotFound):
			req := &store.NewRequest{ID: updatePrefix + up.ID, Kind: store.RequestUpdate, Name: up.Name, Args: raw}
			r, err = c.startWorkflow(ctx, name, input, &o, nil, req)
			if errors.Is(err, store.ErrDuplicateRun) && attempt < 10 {
				continue // started by someone else meanwhile
			}
			if err != nil {
				return nil, nil, err
			}
			// Its request has no row until a worker answers it.
			out, err := c.awaitUpdate(ctx, &store.Request{RunID: r.ID, ID: req.ID, Name: up.Name}, up.ID, up.Wait, true)
			res, err := updateResult(r.ID, up.Name, up.ID, out, err)
			return r, res, err
		default:
			return nil, nil, err
		}
	}
}
