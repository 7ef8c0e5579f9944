package workflow

import (
	"encoding/json"
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// ChildRun is a child workflow started by a workflow. It is cancelled if
// the parent ends before it.
type ChildRun[Out any] struct {
	workflow string
	c        *replay.Child
	err      error
}

// StartChild starts a run of the workflow d as a child of the running
// workflow and returns at once; Get waits for its result.
func (d *Definition[In, Out]) StartChild(ctx Context, in In) *ChildRun[Out] {
	u := unitOf(ctx)
	raw, err := json.Marshal(in)
	if err != nil {
		return &ChildRun[Out]{workflow: d.name, err: fmt.Errorf("child workflow %q: input does not encode: %w", d.name, err)}
	}
	return &ChildRun[Out]{workflow: d.name, c: u.StartChild(d.name, raw)}
}

// ExecuteChild starts a child run of d and waits for its result.
func (d *Definition[In, Out]) ExecuteChild(ctx Context, in In) (Out, error) {
	return d.StartChild(ctx, in).Get(ctx)
}

// Get waits until the child run ends and returns its output, or a
// *ChildError.
func (c *ChildRun[Out]) Get(ctx Context) (Out, error) {
	var zero Out
	if c.err != nil {
		return zero, c.err
	}
	raw, err := unitOf(ctx).WaitChild(c.c)
	if err != nil {
		return zero, userError(err)
	}
	v, err := decode[Out](raw)
	if err != nil {
		return zero, fmt.Errorf("child workflow %q: output does not decode: %w", c.workflow, err)
	}
	return v, nil
}

// ChildError is the failure (or cancellation) of a child workflow.
type ChildError struct {
	Workflow string
	Message  string
}

func (e *ChildError) Error() string {
	return fmt.Sprintf("child workflow %q failed: %s", e.Workflow, e.Message)
}
