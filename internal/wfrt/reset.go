package wfrt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/store"
)

// The points a run can be reset to (ResetOptions.Point), besides a
// decision number.
const (
	PointFirst    = "first"
	PointLastGood = "last_good"
)

// ResetOptions say where to reset a workflow run and who asks.
type ResetOptions struct {
	// Point: PointFirst (before the first decision), PointLastGood (the
	// last decision before the one that ended the run; the default) or a
	// decision number N >= 1 (right after decision N).
	Point          string
	ReapplySignals bool
	By, Reason     string
}

// ResetLinks returns the runs a workflow run was reset from and to, from
// its state ("" when none).
func ResetLinks(r *store.Run) (from, to string) {
	if r.Kind != hephtype.KindWorkflow {
		return "", ""
	}
	st, err := loadWfState(r)
	if err != nil {
		return "", ""
	}
	return st.ResetFrom, st.ResetTo
}

// resetID is the id of the run that resets run to the history cut at
// position cut: a reset tried again creates its run once.
func resetID(run string, cut int) string {
	return uuid.NewSHA1(idSpace, []byte(run+"/reset/"+strconv.Itoa(cut))).String()
}

// resetPlan is a reset decided from the old run's history.
type resetPlan struct {
	old     *store.Run
	events  []store.Event
	cut     int // the copied history is events[:cut]
	point   string
	signals []store.Event // signals after the cut, to append again
}

// ResetWorkflow creates a new run of the workflow of run runID whose
// history is run's cut at opts.Point, executes again what that history
// left open (activities, timers, children) with the workflow's current
// code, and marks the old run reset (cancelling it when it is active).
// The new run's id derives from the old one and the point, and the two
// writes go in one transaction: a reset tried again returns the run the
// first try created.
func (c *Runtime) ResetWorkflow(ctx context.Context, runID string, opts *ResetOptions) (*store.Run, error) {
	if opts == nil {
		opts = &ResetOptions{}
	}
	p, err := c.planReset(ctx, runID, opts)
	if err != nil {
		return nil, fmt.Errorf("reset workflow run %s: %w", runID, err)
	}
	nr, err := c.resetRun(ctx, p, opts)
	if err != nil {
		return nil, fmt.Errorf("reset workflow run %s: %w", runID, err)
	}
	old := store.Change{RunID: runID, Key: "reset:" + nr.ID, Decide: func(run *store.Run) (*store.Update, error) {
		return markReset(run, nr.ID, resetData(p, nr.ID, opts))
	}}
	reqs, err := c.cfg.Committer.SubmitAll(ctx, []store.Change{old, {Create: nr}})
	if err != nil {
		return nil, fmt.Errorf("reset workflow run %s: %w", runID, err)
	}
	if err := reqs[0].Err; err != nil && !errors.Is(err, store.ErrDuplicateChange) {
		return nil, fmt.Errorf("reset workflow run %s: %w", runID, err)
	}
	if err := reqs[1].Err; err != nil {
		if !errors.Is(err, store.ErrRunExists) {
			return nil, fmt.Errorf("reset workflow run %s: %w", runID, err)
		}
		// An earlier try created it.
		return c.cfg.Store.GetRun(ctx, nr.ID)
	}
	return reqs[1].Res.Run, nil
}

// planReset reads the run and its history and finds the cut.
func (c *Runtime) planReset(ctx context.Context, runID string, opts *ResetOptions) (*resetPlan, error) {
	old, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if old.Kind != hephtype.KindWorkflow {
		return nil, fmt.Errorf("%w: run %s is not a code-first workflow run", limits.ErrInvalidInput, runID)
	}
	if old.ParentID != "" {
		return nil, fmt.Errorf("%w: run %s is a child workflow run: reset its parent", limits.ErrInvalidInput, runID)
	}
	events, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: runID})
	if err != nil {
		return nil, err
	}
	p := &resetPlan{old: old, events: events, point: opts.Point}
	if p.point == "" {
		p.point = PointLastGood
	}
	if p.cut, err = cutAt(events, p.point); err != nil {
		return nil, err
	}
	if opts.ReapplySignals {
		for _, e := range events[p.cut:] {
			if e.Kind == hephtype.EventSignalReceived {
				p.signals = append(p.signals, e)
			}
		}
	}
	return p, nil
}

// cutAt returns the length of the history that point keeps.
func cutAt(events []store.Event, point string) (int, error) {
	var decisions []int // positions of the decision events
	ended := 0          // the number of the decision that ended the run, or 0
	for i, e := range events {
		switch e.Kind {
		case hephtype.EventDecision:
			decisions = append(decisions, i)
		case hephtype.EventRunCompleted, hephtype.EventRunFailed, hephtype.EventRunContinued:
			if ended == 0 {
				ended = len(decisions)
			}
		}
	}
	n := 0
	switch point {
	case PointFirst:
	case PointLastGood:
		n = len(decisions)
		if ended > 0 {
			n = ended - 1
		}
	default:
		var err error
		if n, err = strconv.Atoi(point); err != nil || n < 1 {
			return 0, fmt.Errorf("%w: point %q: want %q, %q or a decision number", limits.ErrInvalidInput, point, PointFirst, PointLastGood)
		}
		if n > len(decisions) {
			return 0, fmt.Errorf("%w: point %q: the run has %d decisions", limits.ErrInvalidInput, point, len(decisions))
		}
		if n == ended {
			return 0, fmt.Errorf("%w: point %q: decision %d ended the run; reset to an earlier one", limits.ErrInvalidInput, point, n)
		}
	}
	if n == 0 {
		if len(decisions) == 0 {
			return len(events), nil
		}
		return decisions[0], nil
	}
	j := decisions[n-1] + 1
	for j < len(events) && replay.IsCommandKind(events[j].Kind) {
		j++
	}
	return j, nil
}

// resetRun builds the new run: the copied history replayed with the
// current code, which tells what is still open.
func (c *Runtime) resetRun(ctx context.Context, p *resetPlan, opts *ResetOptions) (*store.NewRun, error) {
	old := p.old
	id := resetID(old.ID, p.cut)
	oldSt, err := loadWfState(old)
	if err != nil {
		return nil, err
	}
	st := &wfState{Queue: oldSt.Queue, ResetFrom: old.ID}
	st.Build, _ = c.startBuild(ctx, old.Workflow)
	nr := c.resetNewRun(p, id, opts)
	fn, ok := c.reg.workflow(old.Workflow)
	if !ok {
		if c.cfg.Served == nil || !c.cfg.Served(ctx, store.WorkflowHandler(old.Workflow)) {
			return nil, fmt.Errorf("%w: workflow %q: register it with RegisterWorkflows, here or in a running worker process", ErrWorkflowNotFound, old.Workflow)
		}
		// A process that has the workflow reissues what is open with
		// its first decision.
		st.Pending, st.Reissue = true, true
		nr.Tasks = []store.NewTask{decisionTask(st, old.Workflow, 1, time.Time{})}
		nr.Status, nr.State, nr.BuildID = hephtype.StatusPending, st.encode(), st.Build
		return nr, nil
	}
	inst, err := replay.New(&replay.Config{Workflow: fn, RunID: id, Logger: c.cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	prefix := make([]replay.Event, 0, p.cut)
	for _, e := range p.events[:p.cut] {
		prefix = append(prefix, fromStored(e))
	}
	if err := inst.Replay(prefix); err != nil {
		return nil, fmt.Errorf("the current code does not replay the history up to point %q: %w", p.point, err)
	}
	st.Waits = inst.Waits()
	status := inst.Status()
	if status.Terminal() {
		return nil, fmt.Errorf("%w: point %q: the run had ended there", limits.ErrInvalidInput, p.point)
	}
	dec := &replay.Decision{Commands: inst.Outstanding(), Status: status}
	nr.Tasks = decisionUpdate(id, old.Workflow, st, dec, nil).Tasks
	if len(p.signals) > 0 || !hasDecision(p.events[:p.cut]) {
		// Events wait for a decision.
		st.Pending, status = true, hephtype.StatusPending
		nr.Tasks = append(nr.Tasks, decisionTask(st, old.Workflow, 1, time.Time{}))
	}
	nr.Status, nr.State = status, st.encode()
	return nr, nil
}

// resetNewRun is the new run of a reset, with its history but no state,
// status or tasks yet.
func (c *Runtime) resetNewRun(p *resetPlan, id string, opts *ResetOptions) *store.NewRun {
	old := p.old
	nr := &store.NewRun{
		ID: id, Workflow: old.Workflow, Version: 1, Kind: hephtype.KindWorkflow, Input: old.Input,
		BusinessID: old.BusinessID, KeyScope: old.KeyScope, Tags: old.Tags, Metadata: old.Metadata,
		ConcurrencyKey: old.ConcurrencyKey, BuildID: c.cfg.BuildID,
		// The new run describes the same work: it keeps the old run's
		// search attributes as they are now.
		SearchAttributes: store.CloneAttrs(old.SearchAttributes),
	}
	if nr.BusinessID == "" {
		nr.KeyScope = businesskey.ScopeNone
	}
	now := c.cfg.Clock.Now()
	if !old.Deadline.IsZero() {
		// The run's execution timeout, from the reset.
		nr.Deadline = now.Add(old.Deadline.Sub(old.CreatedAt))
	}
	for _, e := range p.events[:p.cut] {
		nr.History = append(nr.History, copyEvent(e))
	}
	nr.History = append(nr.History, store.NewEvent{Kind: hephtype.EventWorkflowReset, Name: old.ID, Data: mustJSON(resetData(p, id, opts))})
	for _, e := range p.signals {
		nr.History = append(nr.History, copyEvent(e))
	}
	return nr
}

func hasDecision(events []store.Event) bool {
	for _, e := range events {
		if e.Kind == hephtype.EventDecision {
			return true
		}
	}
	return false
}

func copyEvent(e store.Event) store.NewEvent {
	return store.NewEvent{Kind: e.Kind, Step: e.Step, Index: e.Index, Attempt: e.Attempt, Name: e.Name, Data: e.Data, Error: e.Error}
}

// resetInfo is the Data of a workflow_reset entry.
type resetInfo struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Point  string `json:"point"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func resetData(p *resetPlan, to string, opts *ResetOptions) resetInfo {
	return resetInfo{From: p.old.ID, To: to, Point: p.point, By: opts.By, Reason: opts.Reason}
}

// markReset is the old run's side of a reset: the workflow_reset entry and
// the link to the new run; an active run is cancelled.
func markReset(run *store.Run, to string, info resetInfo) (*store.Update, error) {
	st, err := loadWfState(run)
	if err != nil {
		return nil, err
	}
	st.ResetTo = to
	ev := store.NewEvent{Kind: hephtype.EventWorkflowReset, Name: to, Data: mustJSON(info)}
	if run.Status.Terminal() {
		return &store.Update{State: st.encode(), History: []store.NewEvent{ev}}, nil
	}
	u, err := stopWorkflowUpdate(run, hephtype.StatusCancelled, hephtype.EventWorkflowReset, "reset: continued in run "+to)
	if err != nil {
		return nil, err
	}
	ev.Error = u.History[0].Error
	u.History[0], u.State = ev, st.encode()
	return u, nil
}

// errReissue refuses the first decision of a run to reissue made without
// reading its history: it is made again from the store.
var errReissue = errors.New("the reset run's first decision must read its history")

// reissue adds to the first decision of a run reset by a process that had
// not the workflow the tasks of what its copied history left open.
func reissue(u *store.Update, run *store.Run, st *wfState, open []replay.Command, dec *replay.Decision) {
	st.Reissue = false
	u.State = st.encode()
	if dec.Status.Terminal() {
		return
	}
	more := decisionUpdate(run.ID, run.Workflow, st, &replay.Decision{Commands: open, Status: dec.Status}, nil)
	u.Tasks = append(more.Tasks, u.Tasks...)
}
