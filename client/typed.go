package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Handle is a definition on the server seen with Go types: In is its
// input, Out its output, both encoded as JSON. It checks nothing on the
// server; a wrong type shows as a decode error of Result or a 400 of
// Start, naming the field.
type Handle[In, Out any] struct {
	c          *Client
	kind, name string
}

// Flow returns a handle on the Go flow name. A flow's output is an
// object of its last steps' outputs by step name, so Out is a struct (or
// map) with a field per such step.
func Flow[In, Out any](c *Client, name string) Handle[In, Out] {
	return Handle[In, Out]{c, "flow", name}
}

// Workflow returns a handle on the code-first workflow name.
func Workflow[In, Out any](c *Client, name string) Handle[In, Out] {
	return Handle[In, Out]{c, "workflow", name}
}

// DocumentFlow returns a handle on the flow document name.
func DocumentFlow[In, Out any](c *Client, name string) Handle[In, Out] {
	return Handle[In, Out]{c, "document", name}
}

// Job returns a handle on the job kind name.
func Job[In, Out any](c *Client, name string) Handle[In, Out] { return Handle[In, Out]{c, "job", name} }

// Name is the definition's name.
func (h Handle[In, Out]) Name() string { return h.name }

// StartOptions are the options of a typed start. Zero fields are the
// server's defaults.
type StartOptions struct {
	// IdempotencyKey makes the start idempotent: a second start with the
	// key returns the first run (RunHandle.Created false).
	IdempotencyKey string
	// BusinessValue is the run's business key value; WorkflowID a
	// workflow run's id.
	BusinessValue    string
	WorkflowID       string
	Version          int
	Tags             []string
	Metadata         map[string]string
	ConcurrencyKey   string
	SearchAttributes map[string]any
	// ExecutionTimeout bounds the run; 0 for the definition's default.
	ExecutionTimeout time.Duration
}

// Start starts a run with in as its input.
func (h Handle[In, Out]) Start(ctx context.Context, in In, opts *StartOptions) (*RunHandle[Out], error) {
	if h.c == nil {
		return nil, errors.New("client: a Handle needs a Client (use Flow, Workflow, DocumentFlow or Job)")
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode the input of %s: %w", h.name, err)
	}
	req := &StartRequest{Kind: h.kind, Name: h.name, Input: raw}
	var key string
	if opts != nil {
		key = opts.IdempotencyKey
		req.BusinessValue, req.WorkflowID, req.Version = opts.BusinessValue, opts.WorkflowID, opts.Version
		req.Tags, req.Metadata, req.ConcurrencyKey = opts.Tags, opts.Metadata, opts.ConcurrencyKey
		req.SearchAttributes = opts.SearchAttributes
		if opts.ExecutionTimeout > 0 {
			req.ExecutionTimeout = opts.ExecutionTimeout.String()
		}
	}
	run, created, _, err := h.c.StartRun(ctx, req, key)
	if err != nil {
		return nil, err
	}
	return &RunHandle[Out]{c: h.c, ID: run.ID, Created: created}, nil
}

// Run starts a run and waits for its output.
func (h Handle[In, Out]) Run(ctx context.Context, in In, opts *StartOptions) (Out, error) {
	r, err := h.Start(ctx, in, opts)
	if err != nil {
		var zero Out
		return zero, err
	}
	return r.Result(ctx)
}

// RunHandle is a run whose output is an Out.
type RunHandle[Out any] struct {
	c *Client
	// ID is the run's id.
	ID string
	// Created is false when an earlier start with the same idempotency
	// key (or business key) made the run.
	Created bool
}

// Attach returns a handle on the run id, whose output is an Out.
func Attach[Out any](c *Client, id string) *RunHandle[Out] { return &RunHandle[Out]{c: c, ID: id} }

// RunError is the error of Result for a run that ended without an
// output: failed, cancelled or timed out.
type RunError struct {
	RunID   string
	Status  string
	Message string
}

func (e *RunError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("run %s %s", e.RunID, e.Status)
	}
	return fmt.Sprintf("run %s %s: %s", e.RunID, e.Status, e.Message)
}

// resultPoll is how long one long poll of Result waits on the server.
const resultPoll = 20 * time.Second

// Result waits for the run to end, long-polling the server until ctx
// ends, and decodes its output. A run that did not complete is a
// *RunError.
func (r *RunHandle[Out]) Result(ctx context.Context) (Out, error) {
	var zero Out
	for {
		run, done, _, err := r.c.Result(ctx, r.ID, resultPoll)
		if err != nil {
			return zero, err
		}
		if !done {
			if err := ctx.Err(); err != nil {
				return zero, err
			}
			continue
		}
		if run.Status != StatusCompleted {
			return zero, &RunError{RunID: run.ID, Status: run.Status, Message: run.Error}
		}
		var out Out
		if len(run.Output) > 0 {
			if err := json.Unmarshal(run.Output, &out); err != nil {
				return zero, fmt.Errorf("decode the output of run %s: %w", run.ID, err)
			}
		}
		return out, nil
	}
}

// Get returns the run as the server has it.
func (r *RunHandle[Out]) Get(ctx context.Context) (*Run, error) {
	run, _, err := r.c.GetRun(ctx, r.ID)
	return run, err
}

// Signal sends the signal name with payload to the run.
func (r *RunHandle[Out]) Signal(ctx context.Context, name string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode signal %s: %w", name, err)
	}
	_, err = r.c.Signal(ctx, r.ID, name, raw)
	return err
}

// Cancel cancels the run, giving reason.
func (r *RunHandle[Out]) Cancel(ctx context.Context, reason string) error {
	_, _, err := r.c.Cancel(ctx, r.ID, reason)
	return err
}
