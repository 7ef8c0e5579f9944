package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Code-first workflows (package workflow) run on the same durable core as
// flows: a run, its history and its tasks change together in one
// transaction. A workflow run advances by decisions: the runtime replays
// the workflow function over the run's history (internal/replay) and
// executes the commands of the new activation — activities become tasks,
// sleeps become timer tasks, children and continue-as-new become runs.
//
// Who decides: the worker that delivers an outcome (an activity's result,
// a fired timer) decides at once, in the transaction that records the
// outcome, when this process has the workflow registered; otherwise the
// outcome is appended with a decision task that a process which has the
// workflow picks up. A decision is committed only if the history did not
// change since it was read (optimistic concurrency on the run's last
// sequence number): a refused decision is dropped and made again.

// Errors of code-first workflows that callers branch on.
var (
	// ErrWorkflowNotFound: no workflow of that name is registered.
	ErrWorkflowNotFound = hephtype.ErrWorkflowNotFound
	// ErrUpdateNotAccepted: no phase of the workflow accepts the update
	// now (the run is not in a phase with a handler for it, or has ended).
	// Nothing was written.
	ErrUpdateNotAccepted = hephtype.ErrUpdateNotAccepted
	// ErrUnknownQuery: the workflow declares no query of that name
	// (workflow.HandleQuery).
	ErrUnknownQuery = workflow.ErrUnknownQuery
	// ErrUnknownUpdate: the workflow declares its updates
	// (workflow.Definition.Declare), and none of that name. Told by the
	// worker that has the workflow, or at once by a client that has it.
	ErrUnknownUpdate = workflow.ErrUnknownUpdate
	// ErrUnknownSignal: the workflow declares its signals, and none of
	// that name; told by a client that has the workflow registered (a
	// signal sent from a process without it is recorded, and waits for a
	// handler like any other).
	ErrUnknownSignal = workflow.ErrUnknownSignal
)

// Workflow is a code-first workflow as the runtime registers it: a
// *workflow.Definition of any input and output types.
type Workflow = workflow.Workflow

// Activity is an activity as the runtime registers it; a
// *workflow.Activity is one.
type Activity interface {
	Name() string
	Invoke(ctx context.Context, input json.RawMessage) (json.RawMessage, error)
	Options() workflow.ActivityOptions
}

// RegisterWorkflows makes workflows known to the client: it can then start
// them and decide their runs. Every process that serves the workflows'
// queue (Config.WorkflowQueue) must register them. Registering a workflow
// again replaces its code: that is how a fixed version takes over runs
// whose decisions failed.
func (c *Client) RegisterWorkflows(ws ...Workflow) error {
	for _, w := range ws {
		if w == nil {
			return errors.New("hephaestus: RegisterWorkflows: a workflow needs a name")
		}
		if err := c.wf.RegisterWorkflow(w.Name(), wfdef.Of(w), w); err != nil {
			return fmt.Errorf("hephaestus: RegisterWorkflows: %w", err)
		}
		c.cat.workflows.Store(w.Name(), w)
		if err := c.publishLater(func() ([]*store.Definition, error) {
			return []*store.Definition{c.workflowDefinition(w)}, nil
		}); err != nil {
			return err
		}
		if d, ok := w.(interface{ Schedules() []workflow.Schedule }); ok {
			if err := c.declare(TargetWorkflow, w.Name(), d.Schedules()); err != nil {
				return fmt.Errorf("hephaestus: RegisterWorkflows %q: %w", w.Name(), err)
			}
		}
	}
	return nil
}

// RegisterActivities makes activities known to the client's workers. A
// process runs the activities of the queues it serves; each must be
// registered there.
func (c *Client) RegisterActivities(as ...Activity) error {
	for _, a := range as {
		if a == nil {
			return errors.New("hephaestus: RegisterActivities: an activity needs a name")
		}
		if err := c.wf.RegisterActivity(a); err != nil {
			return fmt.Errorf("hephaestus: RegisterActivities: %w", err)
		}
	}
	return nil
}

// WorkflowOptions are the optional parameters of starting a workflow.
type WorkflowOptions struct {
	// ID is the workflow id: a business value (letters, digits, '.', '_'
	// and '-', at most 200 bytes: "order-42", a UUID) that names the
	// workflow across its runs (continue-as-new keeps it). At most one run
	// per workflow and ID is active at a time. Empty means none.
	ID string
	// Tags are stored on the run.
	Tags []string
	// Metadata is stored on the run.
	Metadata map[string]any
	// ConcurrencyKey groups the run's activities for flow control (see
	// StartOptions.ConcurrencyKey); "" keeps the key the workflow
	// computes from its input, if any.
	ConcurrencyKey string
	// RunID, when set, is the new run's id instead of a random one: a
	// UUID in canonical form (ErrInvalidInput otherwise). A start that
	// finds a run with this id already starts nothing and returns that
	// run with an error that wraps ErrRunExists.
	RunID string
	// ExecutionTimeout, when positive, bounds how long the workflow may
	// take, counted from its start and kept across continue-as-new: a
	// run not finished by then fails as timed out (its activities and
	// timers are cancelled, its children cancelled and its parent told,
	// as by a cancel; see docs/operations.md, Time limits). Negative is
	// ErrInvalidInput.
	ExecutionTimeout time.Duration
	// SignalID, for SignalWithStart only, identifies its signal (letters,
	// digits and "._:-", at most 190 bytes): a call repeated with the same
	// SignalID, as a retried request is, delivers the signal once. The
	// open run it went to refuses the repeat (its history records the
	// id), and a run the first call started is found by its id, which is
	// derived from the workflow name, ID and SignalID. A repeat after the
	// run ended, or continued as new, when the first call did not start
	// it, signals again. Other calls refuse it.
	SignalID string
	// SearchAttributes are the run's first search attributes, by name:
	// those the workflow declares (workflow.Definition.SearchAttribute),
	// with values of their types (see StartOptions.SearchAttributes). The
	// workflow's code upserts them (workflow.UpsertSearchAttributes), its
	// activities too (workflow.UpsertActivitySearchAttributes); a run that
	// continues as new, or is reset, keeps them.
	SearchAttributes map[string]any
}

// WorkflowError is the failure of a workflow run: the error its function
// returned (or panicked with), as the history recorded it. When that
// error carried a *workflow.ApplicationError (returned by the workflow,
// or by one of its activities), Cause is it, with its type and details:
// errors.As finds it.
type WorkflowError struct {
	RunID    string
	Workflow string
	Message  string
	Cause    error
}

func (e *WorkflowError) Error() string {
	return fmt.Sprintf("workflow %q (run %s) failed: %s", e.Workflow, e.RunID, e.Message)
}

// Unwrap returns Cause.
func (e *WorkflowError) Unwrap() error { return e.Cause }

// CanceledError reports that a run was cancelled.
type CanceledError struct {
	RunID  string
	Reason string
}

func (e *CanceledError) Error() string {
	return fmt.Sprintf("run %s was cancelled: %s", e.RunID, e.Reason)
}

// StartWorkflow starts a run of the registered workflow name with input
// (encoded as JSON) and returns it as stored. The first activation is
// decided in the same transaction as the creation, so the run's first
// activities are queued when StartWorkflow returns.
//
// A workflow this client does not register is started too when a live
// worker of another process sharing the store registers it (as `heph
// server` starts the workflows of Go workers): its first activation is
// then decided by that worker, and a concurrency key the workflow would
// compute from its input is not computed (pass
// WorkflowOptions.ConcurrencyKey). With neither, it fails with
// ErrWorkflowNotFound.
//
// With WorkflowOptions.RunID of a run that exists, it returns that run and
// an error that wraps ErrRunExists.
func (c *Client) StartWorkflow(ctx context.Context, name string, input any, opts *WorkflowOptions) (*Run, error) {
	if err := opts.noSignalID("StartWorkflow"); err != nil {
		return nil, fmt.Errorf("start workflow %q: %w", name, err)
	}
	o := opts.internal()
	runID := ""
	if opts != nil {
		if err := checkRunID("WorkflowOptions.RunID", opts.RunID); err != nil {
			return nil, fmt.Errorf("start workflow %q: %w", name, err)
		}
		runID, o.RunID = opts.RunID, opts.RunID
	}
	r, err := c.wf.StartWorkflow(ctx, name, input, o)
	if err != nil {
		return c.existingRun(ctx, runID, err)
	}
	return c.toRun(r), nil
}

func (o *WorkflowOptions) internal() *wfrt.StartOptions {
	if o == nil {
		return nil
	}
	return &wfrt.StartOptions{ID: o.ID, Tags: o.Tags, Metadata: o.Metadata, ConcurrencyKey: o.ConcurrencyKey, SignalID: o.SignalID,
		ExecutionTimeout: o.ExecutionTimeout, SearchAttributes: o.SearchAttributes}
}

// noSignalID refuses a WorkflowOptions.SignalID outside SignalWithStart.
func (o *WorkflowOptions) noSignalID(call string) error {
	if o != nil && o.SignalID != "" {
		return fmt.Errorf("%w: WorkflowOptions.SignalID is for SignalWithStart, not %s", ErrInvalidInput, call)
	}
	return nil
}

// noRunID refuses a WorkflowOptions.RunID where a call finds or starts a
// run by its workflow id.
func (o *WorkflowOptions) noRunID(call string) error {
	if o != nil && o.RunID != "" {
		return fmt.Errorf("%w: WorkflowOptions.RunID is for StartWorkflow; %s finds or starts the run by its workflow id (WorkflowOptions.ID)", ErrInvalidInput, call)
	}
	return nil
}

// FindWorkflow returns the current run of a workflow id: the newest run of
// the workflow with that id, followed through continue-as-new to the run
// that carries it on.
func (c *Client) FindWorkflow(ctx context.Context, name, id string) (*Run, error) {
	r, err := c.wf.FindWorkflow(ctx, name, id)
	if err != nil {
		return nil, err
	}
	return c.toRun(r), nil
}

// SignalWorkflow sends a signal to a workflow run. Signals are buffered in
// the run's history and never lost: the workflow receives them in the
// order they were sent (WaitSignal, or a phase's handlers). A signal to a
// run that continued as new goes to the run that carries it on; a signal
// to a finished run fails with ErrRunFinished.
func (c *Client) SignalWorkflow(ctx context.Context, runID, name string, payload any) error {
	return c.wf.SignalWorkflow(ctx, runID, name, payload)
}

// SignalWithStart signals the active run of a workflow id, starting one
// first (with input) if there is none; a new run receives the signal in its
// first activation. It returns the run that got the signal. Set
// WorkflowOptions.SignalID when the call may be repeated: the signal is
// then delivered once.
func (c *Client) SignalWithStart(ctx context.Context, name, id, signal string, payload, input any, opts *WorkflowOptions) (*Run, error) {
	if err := opts.noRunID("SignalWithStart"); err != nil {
		return nil, fmt.Errorf("signal with start %q: %w", name, err)
	}
	r, err := c.wf.SignalWithStart(ctx, name, id, signal, payload, input, opts.internal())
	if err != nil {
		return nil, err
	}
	return c.toRun(r), nil
}

// QueryWorkflow returns the state the workflow run published last
// (workflow.Publish), or JSON null if it published none. It reads the run
// as stored: it never replays the workflow, and works while the workflow
// runs an activity or waits. A run that continued as new is followed to
// the run that carries it on.
func (c *Client) QueryWorkflow(ctx context.Context, runID string) (json.RawMessage, error) {
	return c.wf.QueryWorkflow(ctx, runID)
}

// QueryNamed asks the named query of a workflow run with args (encoded as
// JSON) and returns its answer: the workflow's handler
// (workflow.HandleQuery) computes it over the state the run published
// last, without replaying the run. When this client has the workflow
// registered it answers at once; otherwise a worker that has it answers,
// through the store: bound the wait with ctx. An empty name returns the
// published state (QueryWorkflow). A name the workflow does not declare
// fails with ErrUnknownQuery, a failed handler with a *QueryFailedError.
// A run that continued as new is followed to the run that carries it on.
func (c *Client) QueryNamed(ctx context.Context, runID, name string, args any) (json.RawMessage, error) {
	out, err := c.wf.QueryNamed(ctx, runID, name, args)
	var qf *wfrt.QueryFailedError
	if errors.As(err, &qf) {
		return nil, qf
	}
	return out, err
}

// QueryFailedError reports a named query whose handler returned an error
// (hephtype.QueryFailedError, where it is defined).
type QueryFailedError = hephtype.QueryFailedError

// WorkflowResult waits until the workflow run ends, following
// continue-as-new to the run that ends the chain, and returns that run: its
// Output when completed, or its Error.
func (c *Client) WorkflowResult(ctx context.Context, runID string) (*Run, error) {
	r, err := c.wf.Result(ctx, runID)
	if err != nil {
		return nil, err
	}
	return c.toRun(r), nil
}

// resultError turns a finished run into the error its caller sees.
func resultError(r *Run) error {
	switch r.Status {
	case hephtype.StatusCompleted:
		return nil
	case hephtype.StatusCancelled:
		return &CanceledError{RunID: r.ID, Reason: r.Error}
	}
	we := &WorkflowError{RunID: r.ID, Workflow: r.Flow, Message: r.Error}
	if app := workflow.ApplicationErrorOf(nil, r.Output); app != nil {
		we.Cause = app
	}
	return we
}

// HistoryExport is a workflow run's history as Client.ExportHistory writes
// it: what hephtest's replayer reads back to check that current code still
// replays it.
type HistoryExport struct {
	RunID    string          `json:"run_id"`
	Workflow string          `json:"workflow"`
	Events   []ExportedEvent `json:"events"`
}

// ExportedEvent is one history event of an export, as the workflow's
// replay reads it.
type ExportedEvent struct {
	Seq  int64              `json:"seq"`
	Kind hephtype.EventKind `json:"kind"`
	// ID is the sequence number of the workflow command the event belongs
	// to (the activity, timer, child, marker or update); 0 for none.
	ID int `json:"id,omitempty"`
	// Name is the workflow, activity, signal, update or patch name.
	Name string `json:"name,omitempty"`
	// Ref is the update id, the marker kind, or a command's call record.
	Ref     string          `json:"ref,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// ExportHistory returns a run's history as indented JSON (a HistoryExport).
func (c *Client) ExportHistory(ctx context.Context, runID string) ([]byte, error) {
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("export history of run %s: %w", runID, err)
	}
	if r.Kind != KindWorkflow {
		return nil, fmt.Errorf("export history of run %s: %w: it is a run of %s %q; only workflow runs have a history to replay", runID, ErrInvalidInput, RunKindOf(r.Kind, r.Metadata), r.Workflow)
	}
	h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("export history of run %s: %w", runID, err)
	}
	x := HistoryExport{RunID: r.ID, Workflow: r.Workflow, Events: make([]ExportedEvent, len(h))}
	for i, e := range h {
		ev := wfrt.FromStored(e)
		x.Events[i] = ExportedEvent{Seq: e.Seq, Kind: ev.Kind, ID: ev.ID, Name: ev.Name, Ref: ev.Ref,
			Attempt: ev.Attempt, Data: ev.Data, Error: ev.Error}
	}
	b, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export history of run %s: %w", runID, err)
	}
	return b, nil
}

// --- Typed helpers -------------------------------------------------------

// WorkflowRun is a handle on a run of a workflow whose output is an Out.
type WorkflowRun[Out any] struct {
	c *Client
	// ID is the run's id.
	ID string
	// Workflow is the workflow's name.
	Workflow string
}

// StartWorkflow starts a run of def with input in (see Client.StartWorkflow).
func StartWorkflow[In, Out any](ctx context.Context, c *Client, def *workflow.Definition[In, Out], in In, opts *WorkflowOptions) (*WorkflowRun[Out], error) {
	r, err := c.StartWorkflow(ctx, def.Name(), in, opts)
	if r == nil {
		return nil, err
	}
	// With a RunID that exists, the handle of that run and ErrRunExists.
	return &WorkflowRun[Out]{c: c, ID: r.ID, Workflow: def.Name()}, err
}

// ExecuteWorkflow starts a run of def and waits for its result. When this
// client was not started and no live worker of another process has the
// workflow, it returns ErrNotStarted (the run is stored and waits for a
// worker) instead of waiting until ctx ends.
func ExecuteWorkflow[In, Out any](ctx context.Context, c *Client, def *workflow.Definition[In, Out], in In, opts *WorkflowOptions) (Out, error) {
	var zero Out
	r, err := c.StartWorkflow(ctx, def.Name(), in, opts)
	if err != nil {
		return zero, err
	}
	if !r.Status.Terminal() {
		if err := c.checkServed(ctx, r.ID, store.WorkflowHandler(def.Name())); err != nil {
			return zero, err
		}
		// Just started here: no need to read it back before waiting.
		done, err := c.wf.StartedResult(ctx, r.ID)
		if err != nil {
			return zero, err
		}
		return workflowOutput[Out](c.toRun(done))
	}
	return GetWorkflow(c, def, r.ID).Get(ctx)
}

// SignalWithStartWorkflow is Client.SignalWithStart for def.
func SignalWithStartWorkflow[In, Out any](ctx context.Context, c *Client, def *workflow.Definition[In, Out], id, signal string, payload any, in In, opts *WorkflowOptions) (*WorkflowRun[Out], error) {
	r, err := c.SignalWithStart(ctx, def.Name(), id, signal, payload, in, opts)
	if err != nil {
		return nil, err
	}
	return &WorkflowRun[Out]{c: c, ID: r.ID, Workflow: def.Name()}, nil
}

// GetWorkflow returns a handle on an existing run of def.
func GetWorkflow[In, Out any](c *Client, def *workflow.Definition[In, Out], runID string) *WorkflowRun[Out] {
	return &WorkflowRun[Out]{c: c, ID: runID, Workflow: def.Name()}
}

// Get waits for the run's result (following continue-as-new): its output,
// or a *WorkflowError or *CanceledError.
func (r *WorkflowRun[Out]) Get(ctx context.Context) (Out, error) {
	run, err := r.c.WorkflowResult(ctx, r.ID)
	if err != nil {
		var zero Out
		return zero, err
	}
	return workflowOutput[Out](run)
}

// workflowOutput is a finished run's output decoded, or the error its
// caller sees.
func workflowOutput[Out any](run *Run) (Out, error) {
	var out Out
	if err := resultError(run); err != nil {
		return out, err
	}
	if err := json.Unmarshal(run.Output, &out); err != nil {
		return out, fmt.Errorf("decode output of run %s: %w", run.ID, err)
	}
	return out, nil
}

// Signal sends a signal to the run (see Client.SignalWorkflow).
func (r *WorkflowRun[Out]) Signal(ctx context.Context, name string, payload any) error {
	return r.c.SignalWorkflow(ctx, r.ID, name, payload)
}

// Cancel cancels the run (see Client.CancelRun).
func (r *WorkflowRun[Out]) Cancel(ctx context.Context, reason string) error {
	return r.c.CancelRun(ctx, r.ID, reason)
}

// Query decodes the state a workflow run published last into a T (see
// Client.QueryWorkflow).
func Query[T any](ctx context.Context, c *Client, runID string) (T, error) {
	var v T
	raw, err := c.QueryWorkflow(ctx, runID)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("query run %s: decode published state: %w", runID, err)
	}
	return v, nil
}

// Update sends an update to a workflow run and waits for the handler's
// reply, decoded into an R (see Client.UpdateWorkflow).
func Update[R any](ctx context.Context, c *Client, runID, name string, args any, opts *UpdateOptions) (R, error) {
	var v R
	raw, err := c.UpdateWorkflow(ctx, runID, name, args, opts)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("update %q of run %s: decode reply: %w", name, runID, err)
	}
	return v, nil
}

// RunQuery asks query q of a workflow run with args and decodes the answer
// (see Client.QueryNamed).
func RunQuery[A, R any](ctx context.Context, c *Client, runID string, q *workflow.Query[A, R], args A) (R, error) {
	var v R
	raw, err := c.QueryNamed(ctx, runID, q.Name(), args)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("query %q of run %s: decode answer into a %T: %w", q.Name(), runID, v, err)
	}
	return v, nil
}
