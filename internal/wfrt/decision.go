package wfrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/limits"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// The operations of store.TaskWorkflowOp tasks.
const (
	opStartChild     = "start_child"     // Index: the StartChild's seq; Payload: childPayload
	opCancelChild    = "cancel_child"    // Index: the StartChild's seq
	opReportParent   = "report_parent"   // on a child that ended; Payload: reportPayload
	opContinue       = "continue"        // on a run that continued as new; Payload: the new input
	opCancelChildren = "cancel_children" // on a cancelled run: cancel its open children
)

// errConflict refuses a decision whose run changed since its history was
// read: the decision is dropped and made again from the new history.
var errConflict = errors.New("the run's history changed since the decision read it")

// errRunPaused refuses a decision made in line (an activity's outcome, a
// signal, a child's report) for a paused run: the events go to the
// history with a decision task, which is not claimed until the run is
// unpaused. A decision task or request leased before the pause still
// decides (running tasks finish).
var errRunPaused = errors.New("the run is paused")

// wfState is what a workflow run keeps in store.Run.State. Like any run
// state it is a cache of what the history says, plus the bookkeeping of
// the run's decision task.
type wfState struct {
	// Queue receives the run's decision, timer and operation tasks, and
	// the activities that name no queue.
	Queue string `json:"queue"`
	// Pending: a decision task of the run is queued or running. Events
	// appended meanwhile add no other; the decision task commits only
	// after reading them (its commit is refused otherwise).
	Pending bool `json:"pending,omitempty"`
	// Parent is the run that started this one as a child, and ParentSeq
	// the sequence number of its StartChild.
	Parent    string `json:"parent,omitempty"`
	ParentSeq int    `json:"parent_seq,omitempty"`
	// Build is the build the run is pinned to: only workers of that build
	// decide it. Empty: any worker that has the workflow (a workflow that
	// auto-upgrades, or a run started before builds were recorded).
	Build string `json:"build,omitempty"`
	// Waits is what the workflow waited for after its last decision that
	// wrote history (replay.Instance.Waits): a cache, like the rest.
	Waits []replay.Wait `json:"waits,omitempty"`
	// ResetFrom is the run this one was reset from (ResetWorkflow), and
	// ResetTo the run that a reset of this one created.
	ResetFrom string `json:"reset_from,omitempty"`
	ResetTo   string `json:"reset_to,omitempty"`
	// Reissue: the run was reset by a process that has not the workflow
	// (ResetWorkflow): its first decision executes what the copied
	// history left open, which only the code knows how.
	Reissue bool `json:"reissue,omitempty"`
}

func loadWfState(run *store.Run) (*wfState, error) {
	var s wfState
	if len(run.State) > 0 {
		if err := json.Unmarshal(run.State, &s); err != nil {
			return nil, fmt.Errorf("run %s: decode workflow state: %w", run.ID, err)
		}
	}
	if s.Queue == "" {
		s.Queue = defaultQueue
	}
	return &s, nil
}

func (s *wfState) encode() json.RawMessage { return mustJSON(s) }

const defaultQueue = "default"

func mustJSON(v any) json.RawMessage { return worker.MustJSON(v) }

// toStored and fromStored map replay events to history rows and back:
// the event's ID is the row's Index and its Ref the row's Step.
func toStored(e replay.Event) store.NewEvent {
	return store.NewEvent{Kind: e.Kind, Step: e.Ref, Index: e.ID, Attempt: e.Attempt, Name: e.Name, Data: e.Data, Error: e.Error}
}

func fromStored(e store.Event) replay.Event {
	return replay.Event{Kind: e.Kind, ID: e.Index, Name: e.Name, Ref: e.Step, Attempt: e.Attempt, Data: e.Data, Error: e.Error}
}

// idSpace derives the ids of runs that tasks create, so that a task that
// runs twice creates its run once.
var idSpace = uuid.MustParse("6f1c2f4e-9d7b-4b8e-a3c5-2d1e0f9a8b7c")

// childID is the id of the child run started by command seq of parent.
func childID(parent string, seq int) string {
	return uuid.NewSHA1(idSpace, []byte(parent+"/child/"+strconv.Itoa(seq))).String()
}

// continuedID is the id of the run that continues run as new.
func continuedID(run string) string {
	return uuid.NewSHA1(idSpace, []byte(run+"/continued")).String()
}

// activityPayload is the Payload of an activity task: the input and the
// options of the call (the retry policy's NonRetryable predicate comes
// from the activity registered where it runs).
type activityPayload struct {
	Input        json.RawMessage `json:"input,omitempty"`
	StartToClose time.Duration   `json:"start_to_close,omitempty"`
	Heartbeat    time.Duration   `json:"heartbeat,omitempty"`
	// ScheduleToClose bounds all attempts together from ScheduledAt, the
	// creation of the first attempt's task (set on the retries' payload).
	ScheduleToClose time.Duration `json:"schedule_to_close,omitempty"`
	ScheduledAt     time.Time     `json:"scheduled_at,omitzero"`
	MaxAttempts     int           `json:"max_attempts,omitempty"`
	Initial         time.Duration `json:"initial_backoff,omitempty"`
	MaxBackoff      time.Duration `json:"max_backoff,omitempty"`
	Multiplier      float64       `json:"multiplier,omitempty"`
	Jitter          float64       `json:"jitter,omitempty"`
	// Build is the build the run is pinned to (wfState.Build): the
	// worker that delivers the outcome decides at once only if it is of
	// that build.
	Build string `json:"build,omitempty"`
}

type childPayload struct {
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input,omitempty"`
	// Build is the parent's pinned build: the child pins to it.
	Build string `json:"build,omitempty"`
}

type reportPayload struct {
	Parent   string             `json:"parent"`
	Seq      int                `json:"seq"`
	Workflow string             `json:"workflow"`
	Status   hephtype.RunStatus `json:"status"`
	Output   json.RawMessage    `json:"output,omitempty"`
	Error    string             `json:"error,omitempty"`
}

func opTask(queue, op string, index int, payload any) store.NewTask {
	t := store.NewTask{Queue: queue, Kind: store.TaskWorkflowOp, Step: op, Index: index, Attempt: 1}
	if payload != nil {
		t.Payload = mustJSON(payload)
	}
	return t
}

// decisionTask is a decision task of a run of workflow in state st:
// pinned runs need a worker of their build.
func decisionTask(st *wfState, workflow string, attempt int, ready time.Time) store.NewTask {
	return store.NewTask{Queue: st.Queue, Kind: store.TaskDecision, Index: -1, Attempt: attempt, ReadyAt: ready, Handler: st.handler(workflow)}
}

// errNoChange refuses a change that would write nothing new.
var errNoChange = errors.New("nothing to change")

// decisionUpdate turns a decision into what the store writes: the events
// delivered with it (extra, not yet stored), the decision's history,
// status, output and published state, and the tasks its commands need.
func decisionUpdate(runID, workflow string, st *wfState, dec *replay.Decision, extra []replay.Event) *store.Update {
	u := &store.Update{Status: dec.Status, Published: dec.Published}
	u.History = make([]store.NewEvent, 0, len(extra)+len(dec.History))
	for _, e := range extra {
		u.History = append(u.History, toStored(e))
	}
	for _, e := range dec.History {
		u.History = append(u.History, toStored(e))
	}
	terminal := dec.Status.Terminal()
	for _, cmd := range dec.Commands {
		switch c := cmd.(type) {
		case replay.ScheduleActivity:
			if !terminal {
				u.Tasks = append(u.Tasks, activityTask(st, c))
			}
		case replay.StartTimer:
			if !terminal {
				ready := store.RoundUpMicro(c.FireAt)
				u.Tasks = append(u.Tasks, store.NewTask{Queue: st.Queue, Kind: store.TaskWorkflowTimer, Index: c.Seq, Attempt: 1, ReadyAt: ready,
					Payload: st.timerPayload()})
			}
		case replay.CancelTimer:
			u.Cancel = append(u.Cancel, store.TaskMatch{Kind: store.TaskWorkflowTimer, Index: c.Seq})
		case replay.StartChild:
			if !terminal {
				u.Tasks = append(u.Tasks, opTask(st.Queue, opStartChild, c.Seq, childPayload{Workflow: c.Workflow, Input: c.Input, Build: st.Build}))
			}
		case replay.CancelChild:
			u.Tasks = append(u.Tasks, opTask(st.Queue, opCancelChild, c.Seq, nil))
		case replay.CompleteWorkflow:
			u.Output = c.Output
		case replay.FailWorkflow:
			u.Error = c.Error
			if u.Error == "" {
				u.Error = "the workflow failed"
			}
			// A failed run's output is what its error records beyond the
			// message (an application error's type and details).
			u.Output = c.Data
		case replay.UpsertAttributes:
			// Encoded by the workflow package, checked against the
			// declaration there: it decodes.
			if m, err := store.DecodeAttrs(c.Attrs); err == nil {
				u.SearchAttributes = store.MergeAttrs(u.SearchAttributes, m)
			}
		case replay.ContinueAsNew:
			u.Output = c.Input
			if len(u.Output) == 0 {
				u.Output = json.RawMessage("null")
			}
			u.Tasks = append(u.Tasks, opTask(st.Queue, opContinue, -1, nil))
		}
	}
	if terminal {
		// Whatever the run still had queued is moot; the tasks of this
		// update survive its Cancel.
		u.Cancel = append(u.Cancel, store.TaskMatch{Index: -1})
		if st.Parent != "" && dec.Status != hephtype.StatusContinued {
			u.Tasks = append(u.Tasks, reportTask(st, runID, workflow, dec.Status, u.Output, u.Error))
		}
	}
	return u
}

func reportTask(st *wfState, runID, workflow string, status hephtype.RunStatus, output json.RawMessage, msg string) store.NewTask {
	return opTask(st.Queue, opReportParent, -1, reportPayload{Parent: st.Parent, Seq: st.ParentSeq, Workflow: workflow, Status: status, Output: output, Error: msg})
}

func activityTask(st *wfState, c replay.ScheduleActivity) store.NewTask {
	o := c.Options
	p := activityPayload{
		Input: c.Input, StartToClose: o.StartToCloseTimeout, Heartbeat: o.HeartbeatTimeout, ScheduleToClose: o.ScheduleToCloseTimeout,
		MaxAttempts: o.RetryPolicy.MaxAttempts, Initial: o.RetryPolicy.InitialBackoff, MaxBackoff: o.RetryPolicy.MaxBackoff,
		Multiplier: o.RetryPolicy.Multiplier, Jitter: o.RetryPolicy.Jitter, Build: st.Build,
	}
	q := o.Queue
	if q == "" {
		q = st.Queue
	}
	return store.NewTask{Queue: q, Kind: store.TaskActivity, Step: c.Name, Index: c.Seq, Attempt: 1, Payload: mustJSON(p), Handler: store.ActivityHandler(c.Name)}
}

// runSpec describes a workflow run to create.
type runSpec struct {
	id         string
	workflow   string
	input      json.RawMessage
	businessID string
	scope      businesskey.Scope
	tags       []string
	metadata   map[string]json.RawMessage
	parent     string
	parentSeq  int
	// concurrencyKey: see store.Run.ConcurrencyKey.
	concurrencyKey string
	// deadline: see store.Run.Deadline.
	deadline time.Time
	// attrs are the run's first search attributes.
	attrs map[string]store.Attr
	// extra events reach the first activation with run_started (the
	// signal of signal-with-start).
	extra []replay.Event
	// fence, when set, is the lease of the task that creates the run (a
	// child's start, a continuation): the run is created only while it is
	// held, and the task is deleted with the creation.
	fence *store.Lease
	// request, when set, is a request that goes with the run, in a task
	// created with it (update-with-start).
	request *store.NewRequest
	// pin is the build the run is pinned to ("": any), build the build it
	// records (store.Run.BuildID); see startBuild.
	pin, build string
}

// createWorkflowRun creates a run. When the workflow is registered here
// its first activation is decided at once and written with the run (its
// instance stays in the sticky cache); otherwise the run gets a decision
// task for a process that has the workflow.
func (c *Runtime) createWorkflowRun(ctx context.Context, spec *runSpec) (*store.Run, error) {
	now := c.cfg.Clock.Now()
	st := &wfState{Queue: c.cfg.WorkflowQueue, Parent: spec.parent, ParentSeq: spec.parentSeq, Build: spec.pin}
	events := append([]replay.Event{replay.Started(spec.workflow, spec.input, newSeed(), now)}, spec.extra...)
	nr := &store.NewRun{
		ID: spec.id, Workflow: spec.workflow, Version: 1, Kind: hephtype.KindWorkflow, Input: spec.input,
		BusinessID: spec.businessID, KeyScope: spec.scope, ParentID: spec.parent, Tags: spec.tags, Metadata: spec.metadata,
		ConcurrencyKey: spec.concurrencyKey, BuildID: spec.build, Deadline: spec.deadline, SearchAttributes: spec.attrs,
	}
	if nr.KeyScope == "" || nr.BusinessID == "" {
		nr.KeyScope = businesskey.ScopeNone
	}
	var inst *replay.Instance
	var published json.RawMessage
	if fn, ok := c.reg.workflow(spec.workflow); ok && c.mayDecide(spec.pin) {
		nr.BuildID = c.cfg.BuildID
		var err error
		if inst, err = replay.New(&replay.Config{Workflow: fn, RunID: spec.id, Logger: c.cfg.Logger}); err != nil {
			return nil, err
		}
		dec, err := inst.Decide(&replay.Activation{Events: events, Time: now})
		if err != nil {
			inst.Close()
			return nil, fmt.Errorf("first activation: %w", err)
		}
		st.Waits = dec.Waits
		u := decisionUpdate(spec.id, spec.workflow, st, dec, events)
		nr.Status, nr.Output, nr.Error, nr.History, nr.Tasks = u.Status, u.Output, u.Error, u.History, u.Tasks
		nr.SearchAttributes = store.MergeAttrs(nr.SearchAttributes, u.SearchAttributes)
		published = u.Published
	} else {
		st.Pending = true
		nr.Status = hephtype.StatusPending
		for _, e := range events {
			nr.History = append(nr.History, toStored(e))
		}
		nr.Tasks = []store.NewTask{decisionTask(st, spec.workflow, 1, time.Time{})}
	}
	if r := spec.request; r != nil {
		nr.Tasks = append(nr.Tasks, requestTask(st, spec.workflow, r, true))
	}
	nr.State = st.encode()
	changes := []store.Change{{Create: nr, Fence: spec.fence}}
	if published != nil {
		// NewRun has no published state: set it in the same batch, unless
		// the run is not the one just created (its creation was refused)
		// or a later decision published already.
		changes = append(changes, store.Change{RunID: spec.id, Decide: func(run *store.Run) (*store.Update, error) {
			if len(run.Published) > 0 || run.Seq != int64(len(nr.History)) {
				return nil, errNoChange
			}
			return &store.Update{Published: published}, nil
		}})
	}
	var e *stickyEntry
	if inst != nil {
		// Hold the run's entry until the outcome is known, so that its
		// first activity's outcome is decided with this instance.
		e = c.sticky.lock(spec.id)
	}
	reqs, err := c.cfg.Committer.SubmitAll(ctx, changes)
	if err == nil {
		err = reqs[0].Err
	}
	if e != nil {
		e.drop()
		if err == nil && !nr.Status.Terminal() {
			e.inst = inst
		} else {
			inst.Close()
		}
		c.sticky.unlock(e)
	}
	if err != nil {
		return nil, err
	}
	return reqs[0].Res.Run, nil
}

// delivery is a batch of events that happened outside a workflow run, to
// append to its history.
type delivery struct {
	runID    string
	workflow string
	// fence is the lease of the task whose outcome the events report; the
	// task is deleted with the change.
	fence *store.Lease
	// handoff claims a task of this queue for the caller's slot.
	handoff string
	events  []replay.Event
	// replay: with no instance in the cache, replay the history here to
	// decide at once (workers delivering outcomes); otherwise leave the
	// decision to a decision task (clients sending signals).
	replay bool
	// strict: a finished run is an error (engine.ErrRunFinished) rather than a
	// stale delivery that writes nothing.
	strict bool
	// key makes the delivery idempotent (store.Change.Key): a signal's id,
	// the child that reports. A delivery whose key the run has seen fails
	// with store.ErrDuplicateChange and writes nothing.
	key string
	// pin is the build the run is pinned to, when the caller knows it: a
	// worker of another build does not decide (replay is ignored).
	pin string
	// attrs are search attributes upserted with the events (an
	// activity's, with its completion).
	attrs map[string]store.Attr
}

// deliver appends events to a run. When this process has the workflow (and
// its instance cached, or d.replay), it decides the activation the events
// cause and commits both in one transaction; otherwise, or when that
// decision fails, it appends the events with a decision task. It returns
// the tasks claimed for the caller's slot.
func (c *Runtime) deliver(ctx context.Context, d *delivery) ([]*store.Task, error) {
	var claimed []*store.Task
	if fn, ok := c.reg.workflow(d.workflow); ok && c.mayDecide(d.pin) && (d.replay || c.sticky.has(d.runID)) {
		e := c.sticky.lock(d.runID)
		cached := e.inst != nil
		if cached || d.replay {
			in := &decideInput{runID: d.runID, workflow: d.workflow, fence: d.fence, key: d.key, handoff: d.handoff, extra: d.events, attrs: d.attrs}
			res, err := c.decideLocked(ctx, e, fn, in)
			claimed = append(claimed, res.claimed...)
			if errors.Is(err, errConflict) && cached && d.replay {
				// The cached instance was behind: catch up from the store.
				in.read, in.handoff = true, handoffIf(d.handoff, claimed)
				res, err = c.decideLocked(ctx, e, fn, in)
				claimed = append(claimed, res.claimed...)
			}
			c.sticky.unlock(e)
			switch {
			case err == nil:
				return claimed, nil
			case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrRunNotFound), errors.Is(err, store.ErrDuplicateChange), ctx.Err() != nil:
				return claimed, err
			}
			var nde *replay.NonDeterminismError
			if errors.As(err, &nde) {
				// The decision task reports it, with backoff.
				c.cfg.Logger.Debug("workflow decision failed; leaving it to a decision task", slog.String("run", d.runID), slog.Any("err", err))
			}
		} else {
			c.sticky.unlock(e)
		}
	}
	r, err := c.cfg.Committer.SubmitHandoff(ctx, c.appendChange(d), handoffIf(d.handoff, claimed))
	if r != nil {
		claimed = append(claimed, r.Claimed...)
	}
	return claimed, err
}

// handoffIf returns queue unless a task was claimed already.
func handoffIf(queue string, claimed []*store.Task) string {
	if len(claimed) > 0 {
		return ""
	}
	return queue
}

// appendChange appends a delivery's events and makes sure a decision task
// will see them.
func (c *Runtime) appendChange(d *delivery) store.Change {
	return store.Change{RunID: d.runID, Fence: d.fence, Key: d.key, Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindWorkflow {
			return nil, fmt.Errorf("%w: run %s is a %s, not a workflow", limits.ErrInvalidInput, run.ID, run.Kind)
		}
		if run.Status.Terminal() {
			if d.strict {
				return nil, fmt.Errorf("%w (status %s)", engine.ErrRunFinished, run.Status)
			}
			return &store.Update{}, nil // stale: the run ended meanwhile
		}
		st, err := loadWfState(run)
		if err != nil {
			return nil, err
		}
		u := &store.Update{History: make([]store.NewEvent, len(d.events)), SearchAttributes: d.attrs}
		for i, e := range d.events {
			u.History[i] = toStored(e)
		}
		if !st.Pending {
			st.Pending = true
			u.State = st.encode()
			u.Tasks = []store.NewTask{decisionTask(st, run.Workflow, 1, time.Time{})}
		}
		return u, nil
	}}
}

// decideInput is what one decision of a run works from.
type decideInput struct {
	runID    string
	workflow string
	fence    *store.Lease
	// key: see delivery.key.
	key     string
	handoff string
	// extra are events not stored yet, delivered to this activation and
	// written before its decision.
	extra   []replay.Event
	updates []replay.UpdateRequest
	// read the history the instance has not seen before deciding;
	// otherwise trust that the cached instance has seen all of it (the
	// commit is refused if not).
	read bool
	// task: the run's decision task decides; it commits even when nothing
	// happened, to delete itself and clear wfState.Pending.
	task bool
	// request: a request task offers its update (the one of updates): a
	// rejected update commits unfenced, only if something else happened,
	// and the caller answers the request under the fence.
	request bool
	// open is what the stored history left open (replay.Instance.Outstanding),
	// set when the decision read the history: a reset run reissues it.
	open     []replay.Command
	openRead bool
	// attrs: see delivery.attrs.
	attrs map[string]store.Attr
}

// decisionFailure is the failure of a decision itself (the workflow's code
// does not replay, panics, is not deterministic), as opposed to the store
// failing under it (a history read or a commit on a lost connection),
// which says nothing about the workflow and is tried again.
type decisionFailure struct{ err error }

func (e *decisionFailure) Error() string { return e.err.Error() }
func (e *decisionFailure) Unwrap() error { return e.err }

type decideResult struct {
	dec *replay.Decision
	// seq is the run's last sequence number after the decision.
	seq     int64
	claimed []*store.Task
}

// decideLocked makes one decision of a run with the instance of its sticky
// entry e, which the caller holds locked, and commits it. A refused commit
// (errConflict, a lost lease) or a failed decision drops the instance.
func (c *Runtime) decideLocked(ctx context.Context, e *stickyEntry, fn replay.Func, in *decideInput) (*decideResult, error) {
	res := &decideResult{}
	begin := c.cfg.Clock.Now()
	read := in.read || e.inst == nil
	if e.inst == nil {
		inst, err := replay.New(&replay.Config{Workflow: fn, RunID: in.runID, Logger: c.cfg.Logger})
		if err != nil {
			return res, &decisionFailure{err}
		}
		e.inst = inst
	}
	var evs []replay.Event
	if read {
		h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: in.runID, AfterSeq: int64(e.inst.Len())})
		if err != nil {
			if e.inst.Len() == 0 {
				e.drop() // nothing learnt: keep no empty instance
			}
			return res, fmt.Errorf("read history of run %s: %w", in.runID, err)
		}
		evs = make([]replay.Event, 0, len(h)+len(in.extra))
		for _, x := range h {
			if x.Kind == hephtype.EventRunCancelled || x.Kind == hephtype.EventRunTimedOut {
				e.drop()
				st := hephtype.StatusCancelled
				if x.Kind == hephtype.EventRunTimedOut {
					st = hephtype.StatusFailed
				}
				return res, fmt.Errorf("%w (status %s)", engine.ErrRunFinished, st)
			}
			evs = append(evs, fromStored(x))
		}
	}
	base := int64(e.inst.Len() + len(evs))
	if read {
		// What the stored history left open, for a run to reissue it.
		if err := e.inst.Replay(evs); err != nil {
			e.drop()
			return res, &decisionFailure{err}
		}
		in.open, in.openRead, evs = e.inst.Outstanding(), true, nil
	}
	now := c.cfg.Clock.Now()
	dec, err := e.inst.Decide(&replay.Activation{Events: append(evs, in.extra...), Time: now, Updates: in.updates})
	if err != nil {
		e.drop()
		return res, &decisionFailure{err}
	}
	res.dec, res.seq = dec, base
	if in.request && len(dec.Updates) == 1 && (!dec.Updates[0].Accepted || dec.Updates[0].Duplicate) {
		cp := *in
		cp.fence = nil // the request's answer completes the task
		in = &cp
	}
	if len(dec.History) == 0 && len(in.extra) == 0 && !in.task && in.fence == nil {
		return res, nil // nothing happened: rejected updates, nothing new
	}
	r, err := c.cfg.Committer.SubmitHandoff(ctx, c.decisionChange(in, base, dec), in.handoff)
	if r != nil {
		res.claimed = r.Claimed
	}
	if err != nil {
		if len(dec.History) > 0 || len(in.extra) > 0 || errors.Is(err, errReissue) {
			e.drop() // ahead of the stored history, or to read it
		}
		return res, err
	}
	res.seq = base + int64(len(in.extra)+len(dec.History))
	if !in.task && !in.request && r.Res.Run != nil {
		// A decision task's span (the worker's) is its decision's.
		c.cfg.Tracer.Decision(ctx, r.Res.Run, begin, c.cfg.Clock.Now())
	}
	if dec.Status.Terminal() {
		e.drop()
	}
	c.afterDecision(in.runID, dec)
	return res, nil
}

// decisionChange commits a decision made from the history up to seq base:
// it is refused with errConflict if the run has moved on.
func (c *Runtime) decisionChange(in *decideInput, base int64, dec *replay.Decision) store.Change {
	return store.Change{RunID: in.runID, Fence: in.fence, Key: in.key, Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind != hephtype.KindWorkflow {
			return nil, fmt.Errorf("%w: run %s is a %s, not a workflow", limits.ErrInvalidInput, run.ID, run.Kind)
		}
		if run.Status.Terminal() {
			return nil, fmt.Errorf("%w (status %s)", engine.ErrRunFinished, run.Status)
		}
		if run.Paused != nil && !in.task && !in.request {
			return nil, fmt.Errorf("%w: run %s", errRunPaused, run.ID)
		}
		if run.Seq != base {
			return nil, fmt.Errorf("%w: run %s is at event %d, the decision read up to %d", errConflict, run.ID, run.Seq, base)
		}
		st, err := loadWfState(run)
		if err != nil {
			return nil, err
		}
		if !c.mayDecide(st.Build) {
			return nil, fmt.Errorf("%w: run %s is pinned to build %q, this worker is of build %q", errWrongBuild, run.ID, st.Build, c.cfg.BuildID)
		}
		u := decisionUpdate(run.ID, run.Workflow, st, dec, in.extra)
		// The delivery's upsert first, the decision's after it.
		u.SearchAttributes = store.MergeAttrs(in.attrs, u.SearchAttributes)
		if st.Build == "" && run.BuildID != c.cfg.BuildID {
			u.BuildID = c.cfg.BuildID // it moves to the build that decides it
		}
		if in.task && st.Pending {
			st.Pending = false
			u.State = st.encode()
		}
		if st.Reissue {
			if !in.openRead {
				return nil, errReissue
			}
			reissue(u, run, st, in.open, dec)
		}
		if len(dec.History) > 0 {
			st.Waits = dec.Waits
			u.State = st.encode()
		}
		if !run.Condition.IsZero() && len(dec.History) > 0 {
			u.Condition = &store.Condition{} // it decides again: whatever held it up is over
		}
		return u, nil
	}}
}

// afterDecision tells this process's waiting update callers about a
// committed decision.
func (c *Runtime) afterDecision(runID string, dec *replay.Decision) {
	for _, cmd := range dec.Commands {
		switch cu := cmd.(type) {
		case replay.AcceptUpdate:
			c.updates.notify(runID, cu.UpdateID)
		case replay.CompleteUpdate:
			c.updates.notify(runID, cu.UpdateID)
		}
	}
	if dec.Status.Terminal() {
		c.updates.notifyRun(runID)
	}
}

// decideRetrying makes the decision in under the run's sticky lock, again
// after a conflict (up to 8 more times), each attempt handing off to the
// queue of in.handoff only while no earlier attempt claimed a task. It
// returns the last attempt's result, the tasks every attempt claimed, and
// the last error.
func (c *Runtime) decideRetrying(ctx context.Context, fn replay.Func, in *decideInput) (*decideResult, []*store.Task, error) {
	handoff := in.handoff
	var (
		res     *decideResult
		claimed []*store.Task
		err     error
	)
	e := c.sticky.lock(in.runID)
	defer c.sticky.unlock(e)
	for attempt := 0; ; attempt++ {
		res, err = c.decideLocked(ctx, e, fn, in)
		claimed = append(claimed, res.claimed...)
		in.handoff = handoffIf(handoff, claimed)
		if !errors.Is(err, errConflict) || attempt >= 8 {
			return res, claimed, err
		}
	}
}

// runDecision runs a decision task. A decision that fails (the code is not
// deterministic, the workflow is not registered here, the history does
// not replay) is tried again later with backoff: the run waits, and goes
// on once a process with working code decides.
func (c *Runtime) runDecision(ctx context.Context, t *store.Task, handoff string) ([]*store.Task, error) {
	if t.Step == requestStep {
		return c.runRequest(ctx, t, handoff)
	}
	fn, ok := c.reg.workflow(t.Workflow)
	if !ok {
		// Claims ask only for registered workflows (Task.Handler): only a
		// task enqueued without a handler gets here.
		err := fmt.Errorf("%w: %q is not registered in this process (worker %s)", ErrWorkflowNotFound, t.Workflow, c.cfg.WorkerID)
		c.retryDecision(t, err)
		return nil, err
	}
	lease := t.Lease()
	ev := telemetry.OfTask(t)
	ev.Kind = telemetry.DecisionStarted
	c.cfg.Telemetry.Emit(ev)
	start := c.cfg.Clock.Now()
	in := &decideInput{runID: t.RunID, workflow: t.Workflow, fence: &lease, handoff: handoff, read: true, task: true}
	_, claimed, err := c.decideRetrying(ctx, fn, in)
	switch {
	case err == nil:
		// Committed: the decision's change held the task's lease.
		ev.Kind, ev.Duration = telemetry.DecisionCompleted, c.cfg.Clock.Now().Sub(start)
		c.cfg.Telemetry.Emit(ev)
		return claimed, nil
	case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrRunNotFound):
		return claimed, err
	case errors.Is(err, errConflict):
		// The run keeps changing under the decision (a burst of signals,
		// say): give the task back to be tried again at once.
		c.cfg.Logger.Warn("workflow decision keeps conflicting; trying again", slog.String("run", t.RunID), slog.Any("err", err))
		c.cfg.Release([]*store.Task{t})
		return claimed, nil
	case errors.Is(err, engine.ErrRunFinished):
		// Nothing to decide any more: the task goes.
		_, err = c.cfg.Committer.Submit(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{}, nil
		}})
		return claimed, err
	case ctx.Err() != nil:
		// The lease was lost or is about to end, or the worker stops: the
		// decision is not at fault, and whoever claims the task next makes
		// it.
		return claimed, err
	}
	c.retryDecision(t, err)
	return claimed, err
}

// retryDecision replaces a failed decision task by one that runs after a
// backoff, and reports the failure.
func (c *Runtime) retryDecision(t *store.Task, cause error) {
	backoff := c.cfg.DecisionRetryBackoff << min(max(t.Attempt-1, 0), 20)
	backoff = min(backoff, maxDecisionBackoff)
	c.cfg.Logger.Error("workflow decision failed; it is retried later", slog.String("run", t.RunID), slog.String("workflow", t.Workflow),
		slog.Int("attempt", t.Attempt), slog.Duration("retry_in", backoff), slog.Any("err", cause))
	ev := telemetry.OfTask(t)
	ev.Kind, ev.Duration, ev.Err = telemetry.DecisionFailed, backoff, cause
	c.cfg.Telemetry.Emit(ev)
	lease := t.Lease()
	ready := c.cfg.Clock.Now().Add(backoff)
	msg := fmt.Sprintf("the decision failed %d time(s) and is tried again at %s: %v", t.Attempt, ready.UTC().Format(time.RFC3339), cause)
	_, err := c.cfg.Committer.Submit(context.Background(), store.Change{RunID: t.RunID, Fence: &lease, Decide: func(run *store.Run) (*store.Update, error) {
		if run.Status.Terminal() {
			return &store.Update{}, nil
		}
		// The run shows why it does not progress (GetRun, ListRuns).
		cond := &store.Condition{Code: hephtype.ConditionDecisionFailing, Message: msg}
		if run.Condition.Code == cond.Code {
			cond.Since = run.Condition.Since
		}
		next := store.NewTask{Queue: t.Queue, Kind: store.TaskDecision, Index: -1, Attempt: t.Attempt + 1, ReadyAt: ready, Handler: t.Handler}
		return &store.Update{Condition: cond, Tasks: []store.NewTask{next}}, nil
	}})
	switch {
	case err == nil:
		c.cfg.Telemetry.Emit(telemetry.Event{Kind: telemetry.RunCondition, RunID: t.RunID, Workflow: t.Workflow, Version: t.Version, Queue: t.Queue, TaskID: t.ID,
			Attempt: t.Attempt, Condition: hephtype.ConditionDecisionFailing, Err: cause, Tags: t.Tags, Metadata: t.Metadata})
	case !errors.Is(err, store.ErrLeaseLost):
		c.cfg.Logger.Warn("reschedule workflow decision", slog.String("run", t.RunID), slog.Any("err", err))
	}
}

// maxDecisionBackoff caps the delay between attempts of a failing decision.
const maxDecisionBackoff = 5 * time.Minute

// cancelWorkflowUpdate cancels a workflow run: its queued and running tasks
// go, its open children are cancelled and its parent is told.
func cancelWorkflowUpdate(run *store.Run, reason string) (*store.Update, error) {
	return stopWorkflowUpdate(run, hephtype.StatusCancelled, hephtype.EventRunCancelled, reason)
}

// stopWorkflowUpdate ends a workflow run in status (cancelled, or failed
// for a timeout) with the history entry kind: its tasks go, its open
// children are cancelled and its parent is told.
func stopWorkflowUpdate(run *store.Run, status hephtype.RunStatus, kind hephtype.EventKind, reason string) (*store.Update, error) {
	if run.Status.Terminal() {
		return nil, fmt.Errorf("%w (status %s)", engine.ErrRunFinished, run.Status)
	}
	st, err := loadWfState(run)
	if err != nil {
		return nil, err
	}
	u := &store.Update{
		Status: status, Error: reason,
		History: []store.NewEvent{{Kind: kind, Error: reason}},
		Cancel:  []store.TaskMatch{{Index: -1}},
		Tasks:   []store.NewTask{opTask(st.Queue, opCancelChildren, -1, nil)},
	}
	if st.Parent != "" {
		u.Tasks = append(u.Tasks, reportTask(st, run.ID, run.Workflow, status, nil, reason))
	}
	return u, nil
}
