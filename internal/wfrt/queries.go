package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Named queries are answered over the state a run published last, never
// by replaying it: in the caller's process when it has the workflow
// registered, otherwise by a worker that has, through a request
// (store.Request of kind query) whose answer the caller waits for. The
// answer is written to the request alone, under the lease of the task
// that carried it; nothing goes to the run's history.

// QueryFailedError reports a query whose handler returned an error.
type QueryFailedError = hephtype.QueryFailedError

// queryPrefix starts the ids of query requests.
const queryPrefix = "query:"

// QueryNamed answers query name of a run with args: locally when this
// process has the workflow registered, else through a worker that has
// (bound the wait with ctx). An empty name returns the published state
// (QueryWorkflow). Unknown names fail with workflow.ErrUnknownQuery; a
// failed handler with a *QueryFailedError.
func (c *Runtime) QueryNamed(ctx context.Context, runID, name string, args any) (json.RawMessage, error) {
	if name == "" {
		return c.QueryWorkflow(ctx, runID)
	}
	raw, err := limits.JSON(args)
	if err != nil {
		return nil, fmt.Errorf("query %q of run %s: %w: arguments %w", name, runID, limits.ErrInvalidInput, err)
	}
	if err := limits.Input(raw, c.cfg.MaxPayloadSize, "the query's arguments"); err != nil {
		return nil, fmt.Errorf("query %q of run %s: %w", name, runID, err)
	}
	for sent := 0; ; sent++ {
		r, err := c.queryRun(ctx, runID)
		if err != nil {
			return nil, fmt.Errorf("query %q of run %s: %w", name, runID, err)
		}
		if r.Kind != hephtype.KindWorkflow {
			return nil, fmt.Errorf("query %q of run %s: %w: it is a %s, not a workflow", name, r.ID, limits.ErrInvalidInput, r.Kind)
		}
		if _, ok := c.reg.workflow(r.Workflow); ok && c.mayDecideRun(r) {
			qs, _ := c.reg.queriesOf(r.Workflow)
			return c.answerQuery(qs, r, name, raw)
		}
		req, err := c.sendRequest(ctx, r, store.RequestQuery, queryPrefix+newID(), name, raw)
		if err != nil {
			return nil, fmt.Errorf("query %q of run %s: %w", name, r.ID, err)
		}
		out, err := c.waitQuery(ctx, req)
		if errors.Is(err, errResend) && sent == 0 {
			continue
		}
		return out, err
	}
}

// errResend: the run ended, and its query's task with it, before a worker
// answered; the query is sent again to the finished run.
var errResend = errors.New("the run ended before the query was answered")

// queryRun reads a run, following continue-as-new as QueryWorkflow does.
func (c *Runtime) queryRun(ctx context.Context, runID string) (*store.Run, error) {
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.Status == hephtype.StatusContinued {
		if next, err := c.cfg.Store.GetRun(ctx, continuedID(r.ID)); err == nil {
			if next, err = c.CurrentRun(ctx, next); err == nil {
				r = next
			}
		}
	}
	return r, nil
}

// answerQuery answers a query with the handlers of the workflow.
func (c *Runtime) answerQuery(qs Queries, r *store.Run, name string, args json.RawMessage) (json.RawMessage, error) {
	if qs == nil {
		return nil, fmt.Errorf("workflow %q, query %q of run %s: %w (it declares none)", r.Workflow, name, r.ID, workflow.ErrUnknownQuery)
	}
	out, err := qs.AnswerQuery(name, r.Published, args)
	switch {
	case errors.Is(err, workflow.ErrUnknownQuery):
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	case err != nil:
		return nil, &QueryFailedError{RunID: r.ID, Name: name, Message: err.Error()}
	}
	return out, nil
}

// waitQuery waits for the answer of a query request.
func (c *Runtime) waitQuery(ctx context.Context, req *store.Request) (json.RawMessage, error) {
	w := c.updates.add(req.RunID, req.ID)
	defer c.updates.remove(w)
	// Its answer is read once: the request goes, answered or not (a task
	// that still carries it finds it gone). A failure leaves it to go
	// with its run.
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.cfg.Store.DeleteRequest(dctx, req.RunID, req.ID); err != nil {
			c.cfg.Logger.Warn("delete an answered query's request", slog.String("run", req.RunID), slog.String("request", req.ID), slog.Any("err", err))
		}
	}()
	poll := c.cfg.MinPollInterval / 5
	for {
		r, err := c.cfg.Store.GetRequest(ctx, req.RunID, req.ID)
		if err != nil {
			return nil, fmt.Errorf("query %q of run %s: %w", req.Name, req.RunID, err)
		}
		switch {
		case r.Status == store.RequestCompleted && r.Error == "":
			return r.Result, nil
		case r.Status == store.RequestCompleted, r.Code == RejectFailed:
			return nil, &QueryFailedError{RunID: r.RunID, Name: r.Name, Message: r.Error}
		case r.Status == store.RequestRejected && r.Code == RejectUnknown:
			return nil, &msgError{msg: r.Error, is: workflow.ErrUnknownQuery}
		case r.Status == store.RequestRejected:
			return nil, fmt.Errorf("query %q of run %s: %w", r.Name, r.RunID, rejection(r.Code, r.Error).Err)
		}
		run, err := c.cfg.Store.GetRun(ctx, req.RunID)
		if err != nil {
			return nil, fmt.Errorf("query %q of run %s: %w", req.Name, req.RunID, err)
		}
		if run.Status.Terminal() && !run.FinishedAt.Before(r.CreatedAt) {
			// The run ended after the request: its end may have
			// cancelled the request's task.
			return nil, errResend
		}
		select {
		case <-w.ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("query %q of run %s: waiting for a worker that has workflow %q: %w", req.Name, req.RunID, run.Workflow, ctx.Err())
		case <-c.cfg.Clock.After(poll):
			poll = min(poll*2, c.cfg.PollInterval)
		}
	}
}

// runQueryRequest answers a query request over the run's published state,
// under the lease of its task t.
func (c *Runtime) runQueryRequest(ctx context.Context, t *store.Task, req *store.Request) error {
	run, err := c.cfg.Store.GetRun(ctx, t.RunID)
	if err != nil {
		return err
	}
	a := &store.AnswerRequestParams{Status: store.RequestCompleted}
	qs, _ := c.reg.queriesOf(t.Workflow)
	out, err := c.answerQuery(qs, run, req.Name, req.Args)
	var qf *QueryFailedError
	switch {
	case errors.Is(err, workflow.ErrUnknownQuery):
		a.Status, a.Code, a.Error = store.RequestRejected, RejectUnknown, err.Error()
	case errors.As(err, &qf):
		a.Code, a.Error = RejectFailed, qf.Message
	case err != nil:
		a.Code, a.Error = RejectFailed, err.Error()
	default:
		a.Result = out
	}
	return c.answer(ctx, t, req, a)
}
