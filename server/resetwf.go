package server

import (
	"context"
	"net/http"
	"strconv"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
)

// resetWorkflowRequest is the body of POST /runs/{id}/reset-workflow.
type resetWorkflowRequest struct {
	// Point: "first", "last_good" (the default) or a decision number, as
	// a string or a number.
	Point          any    `json:"point"`
	ReapplySignals bool   `json:"reapply_signals"`
	Reason         string `json:"reason"`
}

// resetWorkflow resets a code-first workflow run to a point of its
// history (POST /runs/{id}/reset-workflow) and answers the new run (201).
// The reset records the authenticated principal; the same reset again
// answers the same new run.
func (s *Server) resetWorkflow(c *call) error {
	var b resetWorkflowRequest
	if err := c.decode(&b, true); err != nil {
		return err
	}
	point, err := resetPoint(b.Point)
	if err != nil {
		return err
	}
	id := c.r.PathValue("id")
	c.target, c.detail = id, point
	r, err := s.cfg.Client.ResetWorkflow(c.ctx(), id, &hephaestus.ResetWorkflowOptions{
		Point: point, ReapplySignals: b.ReapplySignals, By: c.principal(), Reason: b.Reason,
	})
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, runJSON(r, true))
}

// resetPoint reads the body's point: a string, or a decision number.
func resetPoint(v any) (string, error) {
	switch p := v.(type) {
	case nil:
		return "", nil
	case string:
		return p, nil
	case float64:
		if p == float64(int(p)) {
			return strconv.Itoa(int(p)), nil
		}
	}
	return "", badRequest("point: want \"first\", \"last_good\" or a decision number")
}

// retryWorkflow retries a failed workflow run over HTTP: a reset to its
// last good point by the authenticated principal (RetryRun's semantics).
func (s *Server) retryWorkflow(c *call, r *hephaestus.Run) (*hephaestus.Run, error) {
	if r.Status != hephaestus.StatusFailed {
		return s.cfg.Client.RetryRun(c.ctx(), r.ID) // ErrNotRetryable, with its message
	}
	return s.cfg.Client.ResetWorkflow(c.ctx(), r.ID, &hephaestus.ResetWorkflowOptions{
		Point: hephaestus.ResetPointLastGood, ReapplySignals: true, By: c.principal(), Reason: "retry",
	})
}

// retryWorkflowRun is a bulk retry's action on a workflow run: a failed
// one is reset to its last good point, as the operation's creator (a
// reset applied already answers its run); another is skipped, as for
// flows.
func retryWorkflowRun(ctx context.Context, cl *hephaestus.Client, op *store.Operation, r *hephaestus.Run) error {
	if r.Status != hephaestus.StatusFailed {
		return nil
	}
	_, err := cl.ResetWorkflow(ctx, r.ID, &hephaestus.ResetWorkflowOptions{
		Point: hephaestus.ResetPointLastGood, ReapplySignals: true, By: op.CreatedBy, Reason: "retried by operation " + op.ID,
	})
	return err
}
