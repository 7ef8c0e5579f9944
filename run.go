package hephaestus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/internal/wfrt"
	"github.com/hephaestus-go/hephaestus/store"
)

// RunStatus is a run's lifecycle state.
type RunStatus = hephtype.RunStatus

// The run statuses.
const (
	StatusPending   = hephtype.StatusPending
	StatusRunning   = hephtype.StatusRunning
	StatusWaiting   = hephtype.StatusWaiting
	StatusCompleted = hephtype.StatusCompleted
	StatusFailed    = hephtype.StatusFailed
	StatusCancelled = hephtype.StatusCancelled
)

// RunKind tells a run's authoring model.
type RunKind = hephtype.RunKind

// The run kinds.
const (
	// KindFlow: a run of a DAG flow (a Go flow, a stored document or a
	// job).
	KindFlow = hephtype.KindFlow
	// KindWorkflow: a run of a code-first workflow.
	KindWorkflow = hephtype.KindWorkflow
	// KindJob and KindDocument are what RunKindOf (and Run.KindName)
	// call the KindFlow runs of a job kind and of a stored document.
	KindJob      = hephtype.KindJob
	KindDocument = hephtype.KindDocument
)

// RunKindOf is a run's kind as the CLI, the API's "kind", the dashboard
// and the docs name it: flow, workflow, document or job, from the stored
// kind (Run.Kind) and the run's metadata.
func RunKindOf(kind RunKind, metadata map[string]json.RawMessage) RunKind {
	return hephtype.KindOf(kind, metadata)
}

// KindName is the run's kind as every surface names it: flow, workflow,
// document or job (RunKindOf).
func (r *Run) KindName() RunKind { return hephtype.KindOf(r.Kind, r.Metadata) }

// Condition says why an active run does not progress, when the runtime
// knows: its Code is one of the Condition… constants, its Message the
// last error. The zero Condition means nothing is known to be wrong. The
// condition is cleared when the run progresses again.
type Condition = store.Condition

// The condition codes.
const (
	// ConditionDecisionFailing: the workflow's decision keeps failing
	// (non-deterministic code, a panic in replay); it is retried with
	// backoff until code that works is registered.
	ConditionDecisionFailing = hephtype.ConditionDecisionFailing
	// ConditionUnserved: a task of the run has waited longer than a lease
	// period and no live worker of its queue can run it: none has its
	// flow version, workflow or activity registered.
	ConditionUnserved = hephtype.ConditionUnserved
	// ConditionTimedOut: the run's execution timeout passed before it
	// finished, and the run failed for it; unlike the others it stays on
	// the finished run (docs/operations.md, Time limits).
	ConditionTimedOut = hephtype.ConditionTimedOut
)

// Run is a run as stored.
type Run struct {
	ID      string
	Flow    string
	Version int
	// Kind is KindFlow for runs of flows, documents and jobs, and
	// KindWorkflow for runs of code-first workflows; KindName tells the
	// first three apart (flow, document, job), as every surface names
	// them.
	Kind       RunKind
	Status     RunStatus
	Input      json.RawMessage
	Output     json.RawMessage
	Error      string
	BusinessID string
	// ParentID is the run that started this one as a child workflow, or
	// "".
	ParentID string
	Tags     []string
	Metadata map[string]json.RawMessage
	// SearchAttributes are the run's search attributes (docs/operations.md,
	// Search attributes), by name: a string (string, keyword), a []string
	// (keyword_list), an int64, a float64, a bool or a time.Time (UTC).
	SearchAttributes map[string]any
	// ConcurrencyKey groups the run's steps for flow control
	// (docs/flow-control.md); "" for none.
	ConcurrencyKey string
	// Condition says why the run does not progress, if the runtime knows.
	Condition Condition
	// BuildID is the build (Config.BuildID) that started the run, for a
	// code-first workflow; for one that auto-upgrades, the build that
	// decided it last. "" when unknown (a run started before builds were
	// recorded, flow runs).
	BuildID string
	// ScheduledFor is set on a pending or running run whose tasks are all
	// due later (a job inserted with RunAt, a step retried after a
	// backoff): the earliest time one of them is ready. Such a run is
	// shown as scheduled; its Status stays as stored. Zero otherwise.
	// GetRun and ListRuns set it (ListRuns with one query per page).
	ScheduledFor time.Time
	// Deadline is when the run times out if it has not finished (its
	// execution timeout: StartOptions.ExecutionTimeout and the like);
	// zero for none. A run that timed out failed with the condition
	// ConditionTimedOut and a run_timed_out history entry.
	Deadline time.Time
	// ResetFrom is the run this code-first workflow run was reset from
	// (ResetWorkflow, RetryRun), ResetTo the run a reset of it created;
	// "" when none.
	ResetFrom, ResetTo string
	// Steps is each step's state, in the flow's declaration order.
	Steps      []StepState
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
}

// StepState is a step's state within a run.
type StepState struct {
	Name    string
	Status  hephtype.StepStatus
	Event   string
	Attempt int
	Output  json.RawMessage
}

// Step returns the named step's state.
func (r *Run) Step(name string) (StepState, bool) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return StepState{}, false
}

// DecodeOutput decodes the run's output into v.
func (r *Run) DecodeOutput(v any) error {
	if err := json.Unmarshal(r.Output, v); err != nil {
		return fmt.Errorf("decode output of run %s: %w", r.ID, err)
	}
	return nil
}

// toRun converts a stored run, naming its steps from the registered flow.
func (c *Client) toRun(r *store.Run) *Run {
	if r == nil {
		return nil
	}
	out := &Run{
		ID: r.ID, Flow: r.Workflow, Version: r.Version, Kind: r.Kind, Status: r.Status, Input: r.Input, Output: r.Output,
		Error: r.Error, BusinessID: r.BusinessID, ParentID: r.ParentID, Tags: r.Tags, Metadata: r.Metadata, Condition: r.Condition,
		ConcurrencyKey: r.ConcurrencyKey, BuildID: r.BuildID, Deadline: r.Deadline, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
	}
	out.ResetFrom, out.ResetTo = wfrt.ResetLinks(r)
	if len(r.SearchAttributes) > 0 {
		out.SearchAttributes = make(map[string]any, len(r.SearchAttributes))
		for k, a := range store.CloneAttrs(r.SearchAttributes) {
			out.SearchAttributes[k] = a.Value
		}
	}
	if r.Paused != nil {
		// Pausing wins over what else keeps the run from progressing.
		out.Condition = pausedCondition(r.Paused)
	}
	var s struct {
		Steps []struct {
			Status  hephtype.StepStatus `json:"status"`
			Event   string              `json:"event"`
			Attempt int                 `json:"attempt"`
			Output  json.RawMessage     `json:"output"`
		} `json:"steps"`
	}
	var names []string
	if f, err := c.flows.Lookup(r.Workflow, r.Version); err == nil {
		for _, st := range flowgraph.Of(f).Steps {
			names = append(names, st.Name)
		}
	}
	if r.Kind == hephtype.KindFlow && json.Unmarshal(r.State, &s) == nil {
		for i, st := range s.Steps {
			name := ""
			if i < len(names) {
				name = names[i]
			}
			out.Steps = append(out.Steps, StepState{Name: name, Status: st.Status, Event: st.Event, Attempt: st.Attempt, Output: c.stepOutput(r.ID, name, st.Output)})
		}
	}
	return out
}

// stepOutput is a step's output as a run's snapshot holds it, with the
// values offloaded from it read back (docs/payloads.md); a value that
// cannot be read leaves the output empty, and says so in the log.
func (c *Client) stepOutput(runID, step string, v json.RawMessage) json.RawMessage {
	resolve := payloadstore.Resolver(c.cfg.Store)
	if resolve == nil || len(v) == 0 {
		return v
	}
	out, err := resolve(context.Background(), v)
	if err != nil {
		c.cfg.Logger.Warn("a step's output cannot be read", "run", runID, "step", step, "err", err)
		return nil
	}
	return out
}
