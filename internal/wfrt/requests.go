package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// A request (store.Request) travels to a process that has the workflow as
// a decision task whose Step is requestStep and whose Payload names the
// request; the store records the two in one transaction. The task's
// Handler is the workflow's, so that only such a process claims it.
const requestStep = "request"

type requestPayload struct {
	Request string `json:"request"`
	// The request itself, when it travels in its task alone (created with
	// its run, it has no row until a worker answers it).
	Kind store.RequestKind `json:"kind,omitempty"`
	Name string            `json:"name,omitempty"`
	Args json.RawMessage   `json:"args,omitempty"`
}

// requestTask is the decision task that carries request r of a run of
// workflow; whole, it carries the request itself.
func requestTask(st *wfState, workflow string, r *store.NewRequest, whole bool) store.NewTask {
	p := requestPayload{Request: r.ID}
	if whole {
		p.Kind, p.Name, p.Args = r.Kind, r.Name, r.Args
	}
	return store.NewTask{Queue: st.Queue, Kind: store.TaskDecision, Step: requestStep, Index: -1, Attempt: 1,
		Payload: mustJSON(p), Handler: st.handler(workflow)}
}

// The codes of a rejected request (store.Request.Code).
const (
	// RejectNotAccepted: no phase of the workflow accepts the update now.
	RejectNotAccepted = "not_accepted"
	// RejectInvalid: the validator refused the update, or its arguments
	// did not decode.
	RejectInvalid = "invalid"
	// RejectFinished: the run ended before it took the request.
	RejectFinished = "finished"
	// RejectFailed: the decision that was to take the request failed (the
	// workflow's code does not replay its history, say), or a query's
	// handler failed.
	RejectFailed = "failed"
	// RejectUnknown: the workflow declares no update (or query) of that
	// name.
	RejectUnknown = "unknown"
)

// The errors of rejected updates (package workflow's, so that the root
// package re-exports public values).
var (
	ErrUpdateInvalid  = workflow.ErrUpdateInvalid
	ErrDecisionFailed = workflow.ErrDecisionFailed
)

// msgError is an error as a caller in another process gets it: the
// message the worker recorded, which is the sentinel is (errors.Is).
type msgError struct {
	msg string
	is  error
}

func (e *msgError) Error() string        { return e.msg }
func (e *msgError) Is(target error) bool { return target == e.is }

// rejection is the error of a request rejected with code and message.
func rejection(code, msg string) *UpdateRejectedError {
	var err error
	switch code {
	case RejectNotAccepted:
		err = replay.ErrUpdateNotAccepted
	case RejectFinished:
		err = fmt.Errorf("%w: %s", engine.ErrRunFinished, msg)
	case RejectInvalid:
		err = &msgError{msg: msg, is: ErrUpdateInvalid}
	case RejectFailed:
		err = fmt.Errorf("%w: %s", ErrDecisionFailed, msg)
	case RejectUnknown:
		err = &msgError{msg: msg, is: workflow.ErrUnknownUpdate}
	default:
		err = errors.New(msg)
	}
	return &UpdateRejectedError{UpdateRejectedError: hephtype.UpdateRejectedError{Err: err}, Code: code}
}

// sendRequest records a request to a workflow run with its task, or finds
// the one recorded under the same id before.
func (c *Runtime) sendRequest(ctx context.Context, run *store.Run, kind store.RequestKind, id, name string, args json.RawMessage) (*store.Request, error) {
	st, err := loadWfState(run)
	if err != nil {
		return nil, err
	}
	nr := store.NewRequest{RunID: run.ID, ID: id, Kind: kind, Name: name, Args: args}
	p := &store.CreateRequestParams{Request: nr, Task: requestTask(st, run.Workflow, &nr, false), Now: c.cfg.Clock.Now()}
	var req *store.Request
	for attempt := 0; ; attempt++ {
		req, err = c.cfg.Store.CreateRequest(ctx, p)
		// A failure of the store may have recorded it: trying again finds
		// it (ErrDuplicateRequest) rather than recording it twice.
		if err == nil || errors.Is(err, store.ErrDuplicateRequest) || errors.Is(err, store.ErrRunNotFound) ||
			errors.Is(err, store.ErrClosed) || ctx.Err() != nil || attempt >= 2 {
			break
		}
		c.cfg.Logger.Warn("recording a request failed; trying again", slog.String("run", run.ID), slog.String("request", id), slog.Any("err", err))
	}
	switch {
	case errors.Is(err, store.ErrDuplicateRequest) && req != nil:
		return req, nil // sent before: its outcome is this one's
	case err != nil:
		return nil, err
	}
	if c.cfg.Wake != nil {
		c.cfg.Wake(st.Queue)
	}
	return req, nil
}

// runRequest runs a decision task that carries a request.
func (c *Runtime) runRequest(ctx context.Context, t *store.Task, handoff string) ([]*store.Task, error) {
	var p requestPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil || p.Request == "" {
		return nil, c.dropTask(t, fmt.Errorf("request task %d of run %s: payload %s names no request", t.ID, t.RunID, t.Payload))
	}
	req, err := c.cfg.Store.GetRequest(ctx, t.RunID, p.Request)
	switch {
	case errors.Is(err, store.ErrRequestNotFound) && p.Name != "":
		// It travels in its task alone: its answer records it.
		req = &store.Request{RunID: t.RunID, ID: p.Request, Kind: p.Kind, Name: p.Name, Args: p.Args, Status: store.RequestPending}
	case errors.Is(err, store.ErrRequestNotFound):
		return nil, c.dropTask(t, err)
	case err != nil:
		return nil, err
	}
	if req.Status != store.RequestPending {
		return nil, c.dropTask(t, nil) // answered already
	}
	if _, ok := c.reg.workflow(t.Workflow); !ok {
		// Claims ask only for registered workflows: only a task enqueued
		// without a handler gets here. Another process may have it.
		c.cfg.Release([]*store.Task{t})
		return nil, fmt.Errorf("%w: %q is not registered in this process (worker %s)", ErrWorkflowNotFound, t.Workflow, c.cfg.WorkerID)
	}
	switch req.Kind {
	case store.RequestUpdate:
		return c.runUpdateRequest(ctx, t, req, handoff)
	case store.RequestQuery:
		return nil, c.runQueryRequest(ctx, t, req)
	}
	return nil, c.answer(ctx, t, req, &store.AnswerRequestParams{Status: store.RequestRejected, Code: RejectFailed,
		Error: fmt.Sprintf("this process does not answer requests of kind %q", req.Kind)})
}

// runUpdateRequest offers an update to the workflow in a decision over the
// run's current state. An accepted update is committed with the decision,
// fenced by the task's lease; a rejected one is answered on the request.
func (c *Runtime) runUpdateRequest(ctx context.Context, t *store.Task, req *store.Request, handoff string) ([]*store.Task, error) {
	reject := func(code, msg string) error {
		return c.answer(ctx, t, req, &store.AnswerRequestParams{Status: store.RequestRejected, Code: code, Error: msg})
	}
	fn, ok := c.reg.workflow(t.Workflow)
	if !ok {
		c.cfg.Release([]*store.Task{t})
		return nil, fmt.Errorf("%w: %q is not registered in this process (worker %s)", ErrWorkflowNotFound, t.Workflow, c.cfg.WorkerID)
	}
	if err := c.reg.checkName(t.Workflow, req.Name, false); err != nil {
		return nil, reject(RejectUnknown, err.Error())
	}
	run, err := c.cfg.Store.GetRun(ctx, t.RunID)
	if err != nil {
		return nil, err
	}
	if run.Status.Terminal() {
		return nil, reject(RejectFinished, fmt.Sprintf("the run ended (status %s) before it took the update", run.Status))
	}
	lease := t.Lease()
	up := replay.UpdateRequest{ID: strings.TrimPrefix(req.ID, updatePrefix), Name: req.Name, Args: req.Args}
	in := &decideInput{runID: t.RunID, workflow: t.Workflow, fence: &lease, handoff: handoff, read: true,
		updates: []replay.UpdateRequest{up}, request: true}
	res, claimed, err := c.decideRetrying(ctx, fn, in)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrRunNotFound):
		return claimed, err
	case errors.Is(err, errConflict):
		c.cfg.Release([]*store.Task{t})
		return claimed, nil
	case errors.Is(err, engine.ErrRunFinished):
		return claimed, reject(RejectFinished, err.Error())
	case ctx.Err() != nil:
		return claimed, err
	case !errors.As(err, new(*decisionFailure)):
		// The store failed under the decision (a lost connection, a
		// commit whose outcome is unknown), not the workflow: the request
		// stays pending and its task is tried again; if the commit did
		// happen, the next try finds the update accepted.
		return claimed, err
	default:
		c.cfg.Logger.Error("workflow decision for an update failed; the update is rejected", slog.String("run", t.RunID),
			slog.String("update", up.ID), slog.Any("err", err))
		return claimed, reject(RejectFailed, err.Error())
	}
	o := res.dec.Updates[0]
	if o.Duplicate {
		// Accepted before, under another request of the same id (one that
		// travelled in its task): its events are in the history.
		return claimed, c.answer(ctx, t, req, &store.AnswerRequestParams{Status: store.RequestAccepted, Code: "duplicate"})
	}
	if o.Accepted {
		c.updates.notify(t.RunID, up.ID)
		return claimed, nil
	}
	cause := o.Err
	var re *replay.UpdateRejectedError
	if errors.As(cause, &re) {
		cause = re.Err
	}
	code := RejectInvalid
	if errors.Is(cause, replay.ErrUpdateNotAccepted) {
		code = RejectNotAccepted
	}
	return claimed, reject(code, cause.Error())
}

// waiterID is what the callers waiting for req wait on: an update's id,
// or a query's request id.
func waiterID(req *store.Request) string {
	if req.Kind == store.RequestUpdate {
		return strings.TrimPrefix(req.ID, updatePrefix)
	}
	return req.ID
}

// answer answers req under the lease of its task t.
func (c *Runtime) answer(ctx context.Context, t *store.Task, req *store.Request, a *store.AnswerRequestParams) error {
	a.RunID, a.ID, a.Fence, a.Now = req.RunID, req.ID, t.Lease(), c.cfg.Clock.Now()
	// Recorded if it travelled in its task alone; a no-op otherwise.
	a.Request = &store.NewRequest{RunID: req.RunID, ID: req.ID, Kind: req.Kind, Name: req.Name, Args: req.Args}
	err := c.cfg.Store.AnswerRequest(ctx, a)
	if err == nil {
		c.updates.notify(req.RunID, waiterID(req))
	}
	return err
}

// dropTask deletes a request task that has nothing left to do, under its
// lease; cause, when not nil, is logged.
func (c *Runtime) dropTask(t *store.Task, cause error) error {
	if cause != nil {
		c.cfg.Logger.Warn("dropping a request task", slog.String("run", t.RunID), slog.Int64("task", t.ID), slog.Any("err", cause))
	}
	lease := t.Lease()
	_, err := c.cfg.Committer.Submit(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindWorkflow {
			return nil, fmt.Errorf("run %s is a %s, not a workflow", run.ID, run.Kind)
		}
		return &store.Update{}, nil
	}})
	return err
}
