package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// empty is the body of answers that carry nothing.
type empty struct{}

func (s *Server) signal(c *call) error {
	var b struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := c.decode(&b, true); err != nil {
		return err
	}
	id, name := c.r.PathValue("id"), c.r.PathValue("name")
	c.target = id
	if err := s.cfg.Client.SignalWorkflow(c.ctx(), id, name, input(b.Payload)); err != nil {
		return err
	}
	return c.json(http.StatusAccepted, empty{})
}

// UpdateResult is the answer to an update: its result once completed, or
// its stage when the caller waited only for its acceptance.
type UpdateResult struct {
	Result json.RawMessage `json:"result,omitempty" payload:""`
	Stage  string          `json:"stage"`
}

func (s *Server) update(c *call) error {
	var b struct {
		ID      string          `json:"id"`
		Args    json.RawMessage `json:"args"`
		WaitFor string          `json:"wait_for"`
		Timeout duration        `json:"timeout"`
	}
	if err := c.decode(&b, true); err != nil {
		return err
	}
	opts := &hephaestus.UpdateOptions{ID: b.ID}
	switch b.WaitFor {
	case "", "completed":
	case "accepted":
		opts.WaitFor = hephaestus.UpdateAccepted
	default:
		return fieldProblem("wait_for", `must be "accepted" or "completed"`)
	}
	id, name := c.r.PathValue("id"), c.r.PathValue("name")
	c.target = id
	wait := s.longPoll(MaxWait)
	if b.Timeout > 0 {
		wait = s.longPoll(time.Duration(b.Timeout))
	}
	ctx, cancel := context.WithTimeout(c.ctx(), wait)
	defer cancel()
	out, err := s.cfg.Client.UpdateWorkflow(ctx, id, name, input(b.Args), opts)
	if err != nil {
		return err
	}
	if opts.WaitFor == hephaestus.UpdateAccepted {
		return c.json(http.StatusAccepted, UpdateResult{Stage: "accepted"})
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return c.json(http.StatusOK, UpdateResult{Result: out, Stage: "completed"})
}

// QueryResult is a query's answer.
type QueryResult struct {
	Result json.RawMessage `json:"result" payload:""`
}

func (s *Server) query(c *call) error {
	var b struct {
		Args json.RawMessage `json:"args"`
	}
	if err := c.decode(&b, true); err != nil {
		return err
	}
	id, name := c.r.PathValue("id"), c.r.PathValue("name")
	c.target = id
	if name == "" {
		return badRequest("a query needs a name; GET /runs/{id}/state returns the published state")
	}
	ctx, cancel := context.WithTimeout(c.ctx(), s.longPoll(MaxWait))
	defer cancel()
	out, err := s.cfg.Client.QueryNamed(ctx, id, name, input(b.Args))
	if err != nil {
		return err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return c.json(http.StatusOK, QueryResult{Result: out})
}

// State is the state a workflow run published last.
type State struct {
	State json.RawMessage `json:"state" payload:""`
}

func (s *Server) state(c *call) error {
	out, err := s.cfg.Client.QueryWorkflow(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return c.json(http.StatusOK, State{State: out})
}

func (s *Server) resume(c *call) error {
	var b struct {
		Step    string          `json:"step"`
		Event   string          `json:"event"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Event == "" {
		return fieldProblem("event", "is required")
	}
	id := c.r.PathValue("id")
	c.target = id
	opts := &hephaestus.ResumeOptions{Step: b.Step}
	if len(b.Payload) > 0 {
		opts.Payload = b.Payload
	}
	if err := s.cfg.Client.ResumeRun(c.ctx(), id, b.Event, opts); err != nil {
		if errors.Is(err, hephaestus.ErrUnknownStep) {
			return withFix(err, fmt.Sprintf(fixSteps, id, id))
		}
		return err
	}
	return c.json(http.StatusAccepted, empty{})
}

// Decision is a decision recorded on an approval gate.
type Decision struct {
	RunID     string    `json:"run_id"`
	Step      string    `json:"step"`
	Event     string    `json:"event"`
	Actor     string    `json:"actor"`
	Groups    []string  `json:"groups,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	DecidedAt time.Time `json:"decided_at"`
	// Repeated: the gate had been decided so by this actor already.
	Repeated bool `json:"repeated"`
}

// decide approves (or rejects) a gate as the caller: its principal's name
// and groups, from its credential only. The body carries no groups (an
// unknown field), and no role bypasses the gate's assignees, admin
// included: a body can never widen who the caller is.
func (s *Server) decide(approve bool) func(c *call) error {
	return func(c *call) error {
		var b struct {
			Comment string          `json:"comment"`
			Groups  json.RawMessage `json:"groups"`
		}
		if err := c.decode(&b, true); err != nil {
			return err
		}
		if b.Groups != nil {
			return fieldProblem("groups", "is not accepted: the decider's groups come from its credentials (the token's principal); an admin sets them with heph principals set-groups")
		}
		id, step := c.r.PathValue("id"), c.r.PathValue("step")
		c.target = id
		actor := hephaestus.Actor{ID: c.principal(), Groups: c.groups}
		fn := s.cfg.Client.Reject
		if approve {
			fn = s.cfg.Client.Approve
		}
		d, err := fn(c.ctx(), id, step, actor, b.Comment)
		if errors.Is(err, hephaestus.ErrNotAGate) {
			return withFix(err, fmt.Sprintf(fixGates, id))
		}
		if err != nil {
			return err
		}
		return c.json(http.StatusOK, Decision{RunID: d.RunID, Step: d.Step, Event: d.Event, Actor: d.Actor, Groups: d.Groups,
			Comment: d.Comment, DecidedAt: d.DecidedAt.UTC(), Repeated: d.Repeated})
	}
}

func (s *Server) cancel(c *call) error {
	var b struct {
		Reason string `json:"reason"`
	}
	if err := c.decode(&b, true); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	c.target = id
	if err := s.cfg.Client.CancelRun(c.ctx(), id, b.Reason); err != nil {
		return err
	}
	r, err := s.cfg.Client.GetRun(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusAccepted, runJSON(r, true))
}

// PendingApproval is an approval gate waiting for a decision.
type PendingApproval struct {
	RunID        string     `json:"run_id"`
	Workflow     string     `json:"workflow"`
	Version      int        `json:"version"`
	Step         string     `json:"step"`
	Prompt       string     `json:"prompt,omitempty"`
	Users        []string   `json:"users"`
	Groups       []string   `json:"groups"`
	WaitingSince time.Time  `json:"waiting_since"`
	Deadline     *time.Time `json:"deadline,omitempty"`
}

// approvals lists the pending approvals; an approver sees only those it
// may decide.
func (s *Server) approvals(c *call) error {
	q := c.query()
	f := &hephaestus.ApprovalFilter{Assignee: q.str("assignee"), Group: q.str("group"), RunID: q.str("run_id"), Workflow: q.str("workflow")}
	ps, err := s.cfg.Client.PendingApprovals(c.ctx(), f)
	if err != nil {
		return err
	}
	out := make([]PendingApproval, 0, len(ps))
	for _, p := range ps {
		if c.role == roleApprover && !mayDecide(c, p) {
			continue
		}
		a := PendingApproval{RunID: p.RunID, Workflow: p.Workflow, Version: p.Version, Step: p.Step, Prompt: p.Prompt,
			Users: nonNil(p.Users), Groups: nonNil(p.Groups), WaitingSince: p.WaitingSince.UTC()}
		if !p.Deadline.IsZero() {
			t := p.Deadline.UTC()
			a.Deadline = &t
		}
		out = append(out, a)
	}
	return c.json(http.StatusOK, out)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// mayDecide reports whether the caller is an assignee of a pending gate
// (by name or group; a gate without assignees takes anyone).
func mayDecide(c *call, p *hephaestus.PendingApproval) bool {
	if len(p.Users) == 0 && len(p.Groups) == 0 {
		return true
	}
	return slices.Contains(p.Users, c.principal()) || slices.ContainsFunc(p.Groups, func(g string) bool { return slices.Contains(c.groups, g) })
}

// approverMaySee refuses an approver a run that has no pending gate it
// may decide (403); other roles may read every run.
func (s *Server) approverMaySee(c *call, runID string) error {
	if c.role != roleApprover {
		return nil
	}
	ps, err := s.cfg.Client.PendingApprovals(c.ctx(), &hephaestus.ApprovalFilter{RunID: runID})
	if err != nil {
		return err
	}
	if slices.ContainsFunc(ps, func(p *hephaestus.PendingApproval) bool { return mayDecide(c, p) }) {
		return nil
	}
	return &Problem{Status: http.StatusForbidden, Kind: kindForbidden,
		Detail: fmt.Sprintf("the role approver reads only the runs with a pending gate it may decide; run %s has none for %q", runID, c.principal())}
}
