package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// signalStart is the signal member of a POST /runs body: signal-with-start.
type signalStart struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	// ID identifies the signal: a request repeated with it delivers the
	// signal once. Defaults to one derived from the Idempotency-Key.
	ID string `json:"id"`
}

// updateStart is the update member of a POST /runs body: update-with-start.
type updateStart struct {
	Name    string          `json:"name"`
	Args    json.RawMessage `json:"args"`
	ID      string          `json:"id"`
	WaitFor string          `json:"wait_for"`
	Timeout duration        `json:"timeout"`
}

// StartedRun is the answer to a POST /runs with a signal or an update:
// the run that got the message and, for an update, its outcome.
type StartedRun struct {
	*Run
	Update *UpdateResult `json:"update,omitempty"`
}

// checkMessage validates the signal and update members of a start.
func (b *startRequest) checkMessage() error {
	member := ""
	switch {
	case b.Signal != nil && b.Update != nil:
		return fieldProblem("update", "a start takes a signal or an update, not both")
	case b.Signal != nil:
		member = "signal"
	case b.Update != nil:
		member = "update"
	default:
		return nil
	}
	if b.Kind != "workflow" {
		return fieldProblem(member, fmt.Sprintf(`only a code-first workflow (kind "workflow") starts with a %s; %q is a %s`, member, b.Name, b.Kind))
	}
	if b.WorkflowID == "" {
		return fieldProblem("workflow_id", fmt.Sprintf("is required with a %s: the %s goes to the open run of that workflow id, or to the run it starts", member, member))
	}
	if b.Signal != nil && b.Signal.Name == "" {
		return fieldProblem("signal.name", "is required")
	}
	if b.Update != nil {
		if b.Update.Name == "" {
			return fieldProblem("update.name", "is required")
		}
		switch b.Update.WaitFor {
		case "", "completed", "accepted":
		default:
			return fieldProblem("update.wait_for", `must be "accepted" or "completed"`)
		}
		if b.Update.Timeout < 0 {
			return fieldProblem("update.timeout", "must not be negative")
		}
	}
	return nil
}

// messageNamespace is the UUID namespace of the message ids derived from
// Idempotency-Key headers.
var messageNamespace = uuid.MustParse("3d0a9c4e-7f21-5b6e-8c93-1e5a7b2d4f08")

// messageID is the id of a start's signal or update: the body's, else one
// derived from the Idempotency-Key (and the workflow and its id), else ""
// (the library draws one).
func messageID(body, key, kind, name, workflowID string) string {
	if body != "" || key == "" {
		return body
	}
	return "idem-" + uuid.NewSHA1(messageNamespace, []byte(key+"\x00"+kind+"\x00"+name+"\x00"+workflowID)).String()
}

// startWithMessage answers a POST /runs with a signal or an update: the
// message goes to the open run of the workflow id, which is started first
// (in the same transaction as the message) when there is none. md is the
// run's metadata with its creator.
func (s *Server) startWithMessage(c *call, b *startRequest, md map[string]any) error {
	key := c.r.Header.Get("Idempotency-Key")
	opts := &hephaestus.WorkflowOptions{ID: b.WorkflowID, Tags: b.Tags, Metadata: md, ConcurrencyKey: b.ConcurrencyKey,
		SearchAttributes: b.SearchAttributes}
	cl := s.cfg.Client
	out := &StartedRun{}
	var run *hephaestus.Run
	var err error
	if sg := b.Signal; sg != nil {
		opts.SignalID = messageID(sg.ID, key, "signal", b.Name, b.WorkflowID)
		run, err = cl.SignalWithStart(c.ctx(), b.Name, b.WorkflowID, sg.Name, input(sg.Payload), input(b.Input), opts)
	} else {
		u := b.Update
		uo := &hephaestus.UpdateOptions{ID: messageID(u.ID, key, "update", b.Name, b.WorkflowID)}
		if u.WaitFor == "accepted" {
			uo.WaitFor = hephaestus.UpdateAccepted
		}
		wait := s.longPoll(MaxWait)
		if u.Timeout > 0 {
			wait = s.longPoll(time.Duration(u.Timeout))
		}
		ctx, cancel := context.WithTimeout(c.ctx(), wait)
		defer cancel()
		var res json.RawMessage
		run, res, err = cl.UpdateWithStart(ctx, b.Name, b.WorkflowID, input(b.Input), opts, u.Name, input(u.Args), uo)
		if err == nil {
			out.Update = &UpdateResult{Stage: "accepted"}
			if uo.WaitFor != hephaestus.UpdateAccepted {
				if len(res) == 0 {
					res = json.RawMessage("null")
				}
				out.Update = &UpdateResult{Result: res, Stage: "completed"}
			}
		}
	}
	if err != nil {
		return err
	}
	c.target = run.ID
	c.w.Header().Set("Location", "/api/v1/runs/"+url.PathEscape(run.ID))
	out.Run = runJSON(run, true)
	return c.json(http.StatusOK, out)
}
