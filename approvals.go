package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
	"github.com/hephaestus-go/hephaestus/store"
)

// Approval gates are steps of flow documents that wait for a person's
// decision (docs/documents.md). A decision resumes the waiting step with
// the event approved or rejected and the payload
// {"actor", "groups", "comment", "decided_at"}: that payload is the
// step's output and the data of its step_resumed history entry, the audit
// trail of the gate.
//
// A decision is one resume, so it is exactly once like every resume (the
// change is keyed resume:<id>): deciding a gate that was already decided
// fails with ErrNotWaiting, except that a call that repeats the recorded
// decision (the same event by the same actor, e.g. an Approve retried
// after its outcome was lost) reports it as done, with
// Decision.Repeated set, and changes nothing.

var (
	// ErrNotAssignee: the gate declares assignees and the actor is not
	// among them, by id or by group.
	ErrNotAssignee = errors.New("the actor is not an assignee of the approval gate")
	// ErrNotAGate: the step is not an approval gate of the run's flow.
	ErrNotAGate = errors.New("the step is not an approval gate")
	// ErrGateStep: ResumeRun was asked to resume an approval gate. A gate
	// is decided only as a gate, so that its assignees are checked and the
	// decider recorded: Client.Approve or Client.Reject (heph approve,
	// heph reject; POST /api/v1/runs/{id}/steps/{step}/approve or
	// .../reject).
	ErrGateStep = errors.New("the step is an approval gate: decide it with Approve or Reject (heph approve/heph reject, POST .../steps/{step}/approve or .../reject), not with a resume")
)

// Actor is who decides an approval gate: an id, and the groups it is a
// member of (a gate that names one of them accepts the actor). The
// client does not authenticate actors: the caller vouches for them.
type Actor struct {
	ID     string
	Groups []string
}

// Decision is a decision recorded on an approval gate.
type Decision struct {
	RunID string
	Step  string
	// Event is flowdoc.EventApproved or flowdoc.EventRejected.
	Event     string
	Actor     string
	Groups    []string
	Comment   string
	DecidedAt time.Time
	// Repeated: the gate had already been decided so, by this actor; this
	// call changed nothing.
	Repeated bool
}

// decisionData is the resume payload of a decision, kept in the history.
type decisionData struct {
	Actor     string    `json:"actor"`
	Groups    []string  `json:"groups,omitempty"`
	Comment   string    `json:"comment"`
	DecidedAt time.Time `json:"decided_at"`
}

// Approve decides the approval gate step of a run: approved, by actor,
// with a comment. It fails with ErrNotAGate when the step is no gate of
// the run's flow (which this client must have registered), ErrNotAssignee
// when the actor may not decide it, and ErrNotWaiting (or ErrRunFinished)
// when the gate no longer waits: decided otherwise, or expired. A call
// that repeats the recorded decision returns it with Repeated set.
func (c *Client) Approve(ctx context.Context, runID, step string, actor Actor, comment string) (*Decision, error) {
	return c.decide(ctx, runID, step, flowdoc.EventApproved, actor, comment)
}

// Reject decides the approval gate step of a run: rejected, by actor,
// with a comment; otherwise as Approve.
func (c *Client) Reject(ctx context.Context, runID, step string, actor Actor, comment string) (*Decision, error) {
	return c.decide(ctx, runID, step, flowdoc.EventRejected, actor, comment)
}

func (c *Client) decide(ctx context.Context, runID, step, event string, actor Actor, comment string) (*Decision, error) {
	verb := "approve"
	if event == flowdoc.EventRejected {
		verb = "reject"
	}
	fail := func(err error) (*Decision, error) {
		return nil, fmt.Errorf("%s gate %q of run %s: %w", verb, step, runID, err)
	}
	if actor.ID == "" {
		return fail(fmt.Errorf("%w: the actor has no id", ErrInvalidInput))
	}
	if step == "" {
		return fail(fmt.Errorf("%w: name the gate's step", ErrInvalidInput))
	}
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return fail(err)
	}
	g, err := c.gate(r, step)
	if err != nil {
		return fail(err)
	}
	if !g.Allows(actor.ID, actor.Groups) {
		return fail(fmt.Errorf("%w: %q (groups %v) is not among the gate's users %v or groups %v; %s", ErrNotAssignee, actor.ID, actor.Groups, g.Users, g.Groups, assigneeHint(g)))
	}
	d := decisionData{Actor: actor.ID, Groups: actor.Groups, Comment: comment, DecidedAt: c.cfg.Clock.Now().UTC()}
	err = c.resume(ctx, runID, event, &ResumeOptions{Step: step, Payload: d}, nil)
	if err == nil {
		return &Decision{RunID: runID, Step: step, Event: event, Actor: d.Actor, Groups: d.Groups, Comment: d.Comment, DecidedAt: d.DecidedAt}, nil
	}
	if !errors.Is(err, ErrNotWaiting) && !errors.Is(err, ErrRunFinished) {
		return fail(err)
	}
	// The gate does not wait: decided already (by this very decision,
	// retried?), or expired.
	prev, herr := c.recordedDecision(ctx, runID, step)
	switch {
	case herr != nil:
		return fail(errors.Join(err, herr))
	case prev == nil:
		return fail(err)
	case prev.Event == event && prev.Actor == actor.ID:
		prev.Repeated = true
		return prev, nil
	}
	return fail(fmt.Errorf("%w: the gate was %s by %q at %s", ErrNotWaiting, prev.Event, prev.Actor, prev.DecidedAt.Format(time.RFC3339)))
}

// assigneeHint tells how to get credentials that may decide a gate.
func assigneeHint(g *flowdoc.Gate) string {
	var ways []string
	for _, u := range g.Users {
		ways = append(ways, fmt.Sprintf("heph tokens create --user %s --role approver", u))
	}
	for _, gr := range g.Groups {
		ways = append(ways, fmt.Sprintf("heph tokens create --user <name> --groups %s --role approver", gr))
	}
	if len(ways) == 0 {
		return "the gate has no assignees"
	}
	return "an admin makes a token that may decide it with: " + strings.Join(ways, " or ")
}

// refuseGates is the guard of ResumeRun: a gate is decided only as a
// gate.
func refuseGates(f *flow.Flow, step string) error {
	gates, err := flowdoc.Gates(f)
	if err != nil {
		return err
	}
	if gates[step] != nil {
		return fmt.Errorf("step %q: %w", step, ErrGateStep)
	}
	return nil
}

// gate returns the approval gate step of a run's flow.
func (c *Client) gate(r *store.Run, step string) (*flowdoc.Gate, error) {
	if r.Kind != hephtype.KindFlow {
		return nil, fmt.Errorf("%w: run %s is a %s, not a flow", ErrNotAGate, r.ID, r.Kind)
	}
	f, err := c.flows.Flow(r.Workflow, r.Version)
	if err != nil {
		return nil, err
	}
	gates, err := flowdoc.Gates(f)
	if err != nil {
		return nil, err
	}
	g := gates[step]
	if g == nil {
		names := make([]string, 0, len(gates))
		for n := range gates {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("%w: flow %q version %d has no gate %q%s (its gates: %v)", ErrNotAGate, r.Workflow, r.Version, step,
			suggest.DidYouMean(step, names, true), names)
	}
	return g, nil
}

// recordedDecision reads the decision of a gate from the run's history;
// nil when the gate was not resumed.
func (c *Client) recordedDecision(ctx context.Context, runID, step string) (*Decision, error) {
	h, err := c.History(ctx, runID)
	if err != nil {
		return nil, err
	}
	for i := len(h) - 1; i >= 0; i-- {
		ev := h[i]
		if ev.Kind != hephtype.EventStepResumed || ev.Step != step {
			continue
		}
		var d decisionData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			d = decisionData{} // resumed by ResumeRun with another payload
		}
		return &Decision{RunID: runID, Step: step, Event: ev.Name, Actor: d.Actor, Groups: d.Groups, Comment: d.Comment, DecidedAt: d.DecidedAt}, nil
	}
	return nil, nil
}

// ApprovalFilter selects pending approvals; zero fields do not filter.
// Assignee and Group together select the gates that name either (an
// inbox: a person and one of their groups). Gates without assignees,
// which anyone may decide, match only a filter without Assignee and
// Group.
type ApprovalFilter struct {
	Assignee string
	Group    string
	RunID    string
	Workflow string
}

// PendingApproval is an approval gate waiting for a decision.
type PendingApproval struct {
	RunID    string
	Workflow string
	Version  int
	Step     string
	Prompt   string
	Users    []string
	Groups   []string
	// WaitingSince is when the gate started to wait.
	WaitingSince time.Time
	// Deadline is when the gate expires; zero without a deadline.
	Deadline time.Time
}

// PendingApprovals lists the approval gates waiting for a decision now,
// oldest first, of the runs of flows this client has registered.
//
// Cost: the gates are in the flows' code, not in the store, so it pages
// through the active flow runs (of filter.Workflow when set; only
// filter.RunID's run when set) through the stores' index of the active
// runs, reading no finished run, and reads the history of each run that
// has a waiting gate, to find when it started waiting: O(active runs)
// plus one history per run with a waiting gate, whatever the runs stored.
func (c *Client) PendingApprovals(ctx context.Context, filter *ApprovalFilter) ([]*PendingApproval, error) {
	if filter == nil {
		filter = &ApprovalFilter{}
	}
	var out []*PendingApproval
	visit := func(r *store.Run) error {
		if r.Kind != hephtype.KindFlow || r.Status.Terminal() || (filter.Workflow != "" && r.Workflow != filter.Workflow) {
			return nil
		}
		f, err := c.flows.Flow(r.Workflow, r.Version)
		if err != nil {
			return nil // not registered here: its gates are unknown
		}
		gates, err := flowdoc.Gates(f)
		if err != nil || len(gates) == 0 {
			return err
		}
		var h []HistoryEvent
		for _, st := range c.toRun(r).Steps {
			g := gates[st.Name]
			if g == nil || st.Status != hephtype.StepWaiting || !filter.matches(g) {
				continue
			}
			if h == nil {
				if h, err = c.History(ctx, r.ID); err != nil {
					return err
				}
			}
			p := &PendingApproval{RunID: r.ID, Workflow: r.Workflow, Version: r.Version, Step: g.Step, Prompt: g.Prompt, Users: g.Users, Groups: g.Groups}
			for i := len(h) - 1; i >= 0; i-- {
				if h[i].Kind == hephtype.EventStepWaiting && h[i].Step == g.Step {
					p.WaitingSince = h[i].At
					break
				}
			}
			if g.Deadline > 0 && !p.WaitingSince.IsZero() {
				p.Deadline = p.WaitingSince.Add(g.Deadline)
			}
			out = append(out, p)
		}
		return nil
	}
	if filter.RunID != "" {
		r, err := c.cfg.Store.GetRun(ctx, filter.RunID)
		if err != nil {
			return nil, fmt.Errorf("pending approvals: %w", err)
		}
		if err := visit(r); err != nil {
			return nil, fmt.Errorf("pending approvals: %w", err)
		}
	} else {
		p := &store.ListRunsParams{Workflow: filter.Workflow, Kind: hephtype.KindFlow,
			Statuses: []hephtype.RunStatus{StatusPending, StatusRunning, StatusWaiting}, Limit: 1000}
		for {
			page, err := c.cfg.Store.ListRuns(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("pending approvals: %w", err)
			}
			for _, r := range page.Runs {
				if err := visit(r); err != nil {
					return nil, fmt.Errorf("pending approvals: run %s: %w", r.ID, err)
				}
			}
			if page.Next == "" {
				break
			}
			p.Cursor = page.Next
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.WaitingSince.Equal(b.WaitingSince) {
			return a.WaitingSince.Before(b.WaitingSince)
		}
		if a.RunID != b.RunID {
			return a.RunID < b.RunID
		}
		return a.Step < b.Step
	})
	return out, nil
}

func (f *ApprovalFilter) matches(g *flowdoc.Gate) bool {
	if f.Assignee == "" && f.Group == "" {
		return true
	}
	return (f.Assignee != "" && slices.Contains(g.Users, f.Assignee)) || (f.Group != "" && slices.Contains(g.Groups, f.Group))
}
