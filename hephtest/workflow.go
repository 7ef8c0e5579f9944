package hephtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// WorkflowEnv runs code-first workflows in memory, the way the runtime
// does (replaying each run over its history, so non-determinism shows up
// here too) but with no store and no workers: activities run when the
// test drives the env, by calling their code or a mock, and a virtual
// clock jumps to the next timer, so a 30-day sleep ends at once.
//
// Nothing happens by itself: Drive runs activities, children and timers
// until every run has ended or waits for a signal or an update; Advance
// moves the clock by a duration. Signals and updates are decided at once.
// A WorkflowEnv is not safe for concurrent use.
type WorkflowEnv struct {
	cfg        WorkflowEnvConfig
	workflows  map[string]replay.Func
	defs       map[string]heph.Workflow
	activities map[string]replay.ActivityFunc
	sim        *replay.Sim
	nextUpdate int
}

// WorkflowEnvConfig configures a WorkflowEnv. The zero value is fine.
type WorkflowEnvConfig struct {
	// Start is the virtual clock's first reading. Defaults to
	// 2025-01-01T00:00:00Z.
	Start time.Time
	// Seed seeds the deterministic random source of the first run (each
	// further run takes the next number). Defaults to 1.
	Seed uint64
	// Fresh replays each run's whole history at every decision instead of
	// keeping its instance (the runtime's sticky cache) between decisions.
	Fresh bool
}

// NewWorkflowEnv returns an env with the workflows ws registered.
func NewWorkflowEnv(cfg *WorkflowEnvConfig, ws ...heph.Workflow) *WorkflowEnv {
	e := &WorkflowEnv{workflows: map[string]replay.Func{}, defs: map[string]heph.Workflow{}, activities: map[string]replay.ActivityFunc{}}
	if cfg != nil {
		e.cfg = *cfg
	}
	e.RegisterWorkflows(ws...)
	return e
}

// RegisterWorkflows registers more workflows (children, say).
func (e *WorkflowEnv) RegisterWorkflows(ws ...heph.Workflow) {
	for _, w := range ws {
		e.workflows[w.Name()] = wfdef.Of(w)
		e.defs[w.Name()] = w
	}
}

// RegisterActivities registers activities: their code runs when the
// workflow calls them.
func (e *WorkflowEnv) RegisterActivities(as ...heph.Activity) {
	for _, a := range as {
		e.activities[a.Name()] = a.Invoke
	}
}

// MockActivity makes calls of activity a run fn instead of its code.
func MockActivity[In, Out any](e *WorkflowEnv, a *workflow.Activity[In, Out], fn func(ctx context.Context, in In) (Out, error)) {
	e.activities[a.Name()] = workflow.NewActivity(a.Name(), fn).Invoke
}

func (e *WorkflowEnv) ensure() error {
	if e.sim != nil {
		return nil
	}
	sim, err := replay.NewSim(&replay.SimConfig{
		Workflows: e.workflows, Activities: e.activities, Start: e.cfg.Start, Seed: e.cfg.Seed, Fresh: e.cfg.Fresh,
	})
	if err != nil {
		return fmt.Errorf("hephtest: %w", err)
	}
	e.sim = sim
	return nil
}

// Close ends the env's runs (their coroutines). Call it when the test ends.
func (e *WorkflowEnv) Close() {
	if e.sim != nil {
		e.sim.Close()
	}
}

// Now returns the virtual time.
func (e *WorkflowEnv) Now() time.Time {
	if e.sim == nil {
		if e.cfg.Start.IsZero() {
			return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return e.cfg.Start
	}
	return e.sim.Now()
}

// Drive runs activities and children, and fires timers (moving the clock
// to each), until every run has ended or waits for a signal or an update.
func (e *WorkflowEnv) Drive(ctx context.Context) error {
	if err := e.ensure(); err != nil {
		return err
	}
	return e.sim.Drive(ctx)
}

// Settle runs activities and children until none is pending, without
// moving the clock.
func (e *WorkflowEnv) Settle(ctx context.Context) error {
	if err := e.ensure(); err != nil {
		return err
	}
	return e.sim.Settle(ctx)
}

// Advance moves the clock by d, firing the timers due meanwhile and
// running what they lead to.
func (e *WorkflowEnv) Advance(ctx context.Context, d time.Duration) error {
	if err := e.ensure(); err != nil {
		return err
	}
	return e.sim.Advance(ctx, d)
}

// WorkflowRun is a run in a WorkflowEnv of a workflow whose output is an
// Out.
type WorkflowRun[Out any] struct {
	e *WorkflowEnv
	r *replay.SimRun
}

// StartWorkflow starts a run of def and runs its first activation; drive
// the env to go on.
func StartWorkflow[In, Out any](e *WorkflowEnv, def *workflow.Definition[In, Out], in In) (*WorkflowRun[Out], error) {
	if _, ok := e.workflows[def.Name()]; !ok {
		e.RegisterWorkflows(def)
	}
	if err := e.ensure(); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("hephtest: input does not encode as JSON: %w", err)
	}
	r, err := e.sim.Start(def.Name(), raw)
	if err != nil {
		return nil, fmt.Errorf("hephtest: %w", err)
	}
	return &WorkflowRun[Out]{e: e, r: r}, nil
}

// ExecuteWorkflow starts a run of def, drives the env and returns the
// run's result. A run that is still waiting then (for a signal, an
// update) is an error.
func ExecuteWorkflow[In, Out any](ctx context.Context, e *WorkflowEnv, def *workflow.Definition[In, Out], in In) (Out, error) {
	var zero Out
	r, err := StartWorkflow(e, def, in)
	if err != nil {
		return zero, err
	}
	if err := e.Drive(ctx); err != nil {
		return zero, err
	}
	return r.Result()
}

// Status returns the run's status.
func (r *WorkflowRun[Out]) Status() hephtype.RunStatus { return r.r.Status() }

// Result returns the run's output, or its failure as a *heph.WorkflowError,
// following continue-as-new to the run that ends the chain. A run that
// has not ended is an error.
func (r *WorkflowRun[Out]) Result() (Out, error) {
	var out Out
	run := r.r
	for run.Status() == hephtype.StatusContinued && run.Next() != nil {
		run = run.Next()
	}
	switch run.Status() {
	case hephtype.StatusCompleted:
		if err := json.Unmarshal(run.Output(), &out); err != nil {
			return out, fmt.Errorf("hephtest: decode output: %w", err)
		}
		return out, nil
	case hephtype.StatusFailed, hephtype.StatusCancelled:
		return out, &heph.WorkflowError{RunID: run.ID(), Workflow: run.Workflow(), Message: run.Err()}
	}
	return out, fmt.Errorf("hephtest: the run is %s, not finished", run.Status())
}

// current is the run that carries r on (continue-as-new).
func (r *WorkflowRun[Out]) current() *replay.SimRun {
	run := r.r
	for run.Next() != nil {
		run = run.Next()
	}
	return run
}

// Signal sends a signal to the run (or the run that continues it) and
// decides at once.
func (r *WorkflowRun[Out]) Signal(name string, payload any) error {
	if err := r.e.checkName(r.current().Workflow(), name, true); err != nil {
		return err
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("hephtest: payload does not encode as JSON: %w", err)
	}
	return r.current().Signal(name, raw)
}

// Query decodes the state the run published last into a T.
func Query[T, Out any](r *WorkflowRun[Out]) (T, error) {
	var v T
	raw := r.current().Published()
	if raw == nil {
		raw = json.RawMessage("null")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("hephtest: decode published state: %w", err)
	}
	return v, nil
}

// Update sends an update to the run, drives the env until the handler
// replied, and returns the reply decoded into an R. A rejection is a
// *heph.UpdateRejectedError, a failed handler a *heph.UpdateFailedError.
func Update[R, Out any](ctx context.Context, r *WorkflowRun[Out], name string, args any) (R, error) {
	var v R
	raw, err := json.Marshal(args)
	if err != nil {
		return v, fmt.Errorf("hephtest: arguments do not encode as JSON: %w", err)
	}
	e := r.e
	e.nextUpdate++
	id := "update-" + strconv.Itoa(e.nextUpdate)
	run := r.current()
	if err := e.checkName(run.Workflow(), name, false); err != nil {
		return v, &heph.UpdateRejectedError{RunID: run.ID(), Name: name, ID: id, Err: err}
	}
	o, err := run.Update(id, name, raw)
	if err != nil {
		return v, err
	}
	if !o.Accepted {
		cause := o.Err
		var re *replay.UpdateRejectedError
		if errors.As(cause, &re) {
			cause = re.Err
		}
		if !errors.Is(cause, heph.ErrUpdateNotAccepted) {
			// As the runtime reports it: the validator's error, which
			// is ErrUpdateInvalid.
			cause = &invalidUpdate{cause}
		}
		return v, &heph.UpdateRejectedError{RunID: run.ID(), Name: name, ID: id, Err: cause}
	}
	res, msg, done := run.UpdateResult(id)
	if !done {
		if err := e.Drive(ctx); err != nil {
			return v, err
		}
		if res, msg, done = run.UpdateResult(id); !done {
			return v, fmt.Errorf("hephtest: update %q was accepted but the handler has not replied (the run is %s)", name, run.Status())
		}
	}
	if msg != "" {
		return v, &heph.UpdateFailedError{RunID: run.ID(), Name: name, ID: id, Message: msg}
	}
	if err := json.Unmarshal(res, &v); err != nil {
		return v, fmt.Errorf("hephtest: decode reply: %w", err)
	}
	return v, nil
}

// invalidUpdate is a validator's rejection: its error, and
// heph.ErrUpdateInvalid.
type invalidUpdate struct{ err error }

func (e *invalidUpdate) Error() string   { return e.err.Error() }
func (e *invalidUpdate) Unwrap() []error { return []error{e.err, heph.ErrUpdateInvalid} }

// checkName refuses an update or signal name that the workflow, which
// declares its messages, does not declare, as a client that has it does.
func (e *WorkflowEnv) checkName(workflowName, name string, signal bool) error {
	d, ok := e.defs[workflowName].(interface {
		Declared() (updates, signals []string)
	})
	if !ok {
		return nil
	}
	updates, signals := d.Declared()
	names, unknown, what := updates, heph.ErrUnknownUpdate, "update"
	if signal {
		names, unknown, what = signals, heph.ErrUnknownSignal, "signal"
	}
	if len(names) == 0 || slices.Contains(names, name) {
		return nil
	}
	return fmt.Errorf("hephtest: workflow %q declares no %s %q (it declares %s): %w", workflowName, what, name, strings.Join(names, ", "), unknown)
}

// RunUpdate is Update for the declared update u.
func RunUpdate[A, R, Out any](ctx context.Context, r *WorkflowRun[Out], u *workflow.Update[A, R], args A) (R, error) {
	return Update[R](ctx, r, u.Name(), args)
}

// SendSignal is Signal for the declared signal s.
func SendSignal[A, Out any](r *WorkflowRun[Out], s *workflow.Signal[A], payload A) error {
	return r.Signal(s.Name(), payload)
}

// RunQuery asks the run's named query q with args, answered by the
// workflow's handler over the state the run published last (see
// workflow.HandleQuery); an undeclared name fails with
// heph.ErrUnknownQuery, a failing handler with a *heph.QueryFailedError.
func RunQuery[A, R, Out any](r *WorkflowRun[Out], q *workflow.Query[A, R], args A) (R, error) {
	var v R
	run := r.current()
	qs, ok := r.e.defs[run.Workflow()].(interface {
		AnswerQuery(name string, published, args json.RawMessage) (json.RawMessage, error)
	})
	if !ok {
		return v, fmt.Errorf("hephtest: workflow %q answers no named query: %w", run.Workflow(), heph.ErrUnknownQuery)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return v, fmt.Errorf("hephtest: arguments do not encode as JSON: %w", err)
	}
	out, err := qs.AnswerQuery(q.Name(), run.Published(), raw)
	if errors.Is(err, heph.ErrUnknownQuery) {
		return v, err
	}
	if err != nil {
		return v, &heph.QueryFailedError{RunID: run.ID(), Name: q.Name(), Message: err.Error()}
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return v, fmt.Errorf("hephtest: decode answer: %w", err)
	}
	return v, nil
}

// History returns the run's history in the format of
// Client.ExportHistory, which ReplayHistory reads.
func (r *WorkflowRun[Out]) History() []byte {
	x := heph.HistoryExport{RunID: r.r.ID(), Workflow: r.r.Workflow()}
	for i, ev := range r.r.History() {
		x.Events = append(x.Events, heph.ExportedEvent{Seq: int64(i + 1), Kind: ev.Kind, ID: ev.ID, Name: ev.Name, Ref: ev.Ref,
			Attempt: ev.Attempt, Data: ev.Data, Error: ev.Error})
	}
	b, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("hephtest: encode history: %v", err))
	}
	return b
}

// ReplayHistory replays an exported history (Client.ExportHistory, or
// WorkflowRun.History here) against the current code of its workflow,
// which must be among ws: it returns nil if the code issues the same
// commands the history recorded, and a *heph.NonDeterminismError naming
// the first difference (the recorded event, the new command, the file and
// line of the code) if not. Run it in tests over histories of runs in
// flight before deploying a change.
func ReplayHistory(history []byte, ws ...heph.Workflow) error {
	var x heph.HistoryExport
	if err := json.Unmarshal(history, &x); err != nil {
		return fmt.Errorf("hephtest: read history: %w", err)
	}
	return x.Replay(ws...)
}
