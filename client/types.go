package client

import (
	"encoding/json"
	"time"
)

// The run statuses.
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusWaiting   = "waiting"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	StatusContinued = "continued"
)

// Terminal reports whether a run of status s has ended.
func Terminal(s string) bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusContinued:
		return true
	}
	return false
}

// Run is a run (GET /runs/{id}); the items of a run list carry a subset of
// its fields.
type Run struct {
	ID         string                     `json:"id"`
	Kind       string                     `json:"kind"`
	Workflow   string                     `json:"workflow"`
	Version    int                        `json:"version"`
	Status     string                     `json:"status"`
	Input      json.RawMessage            `json:"input,omitempty"`
	Output     json.RawMessage            `json:"output,omitempty"`
	Error      string                     `json:"error,omitempty"`
	BusinessID string                     `json:"business_id,omitempty"`
	ParentID   string                     `json:"parent_id,omitempty"`
	Tags       []string                   `json:"tags,omitempty"`
	Metadata   map[string]json.RawMessage `json:"metadata,omitempty"`
	// SearchAttributes are the run's search attributes, by name.
	SearchAttributes map[string]any `json:"search_attributes,omitempty"`
	ConcurrencyKey   string         `json:"concurrency_key,omitempty"`
	BuildID          string         `json:"build_id,omitempty"`
	Queue            string         `json:"queue,omitempty"`
	Condition        *Condition     `json:"condition,omitempty"`
	// ScheduledFor is set on a pending or running run whose every task is
	// due later: when the first is due (shown as scheduled).
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
	// Deadline is when the run times out if it has not finished.
	Deadline *time.Time `json:"deadline,omitempty"`
	// ResetFrom is the run a workflow run was reset from, ResetTo the run
	// a reset of it created.
	ResetFrom string `json:"reset_from,omitempty"`
	ResetTo   string `json:"reset_to,omitempty"`
	// WaitingFor is what the run waits for (GET /runs/{id} only).
	WaitingFor []Wait       `json:"waiting_for,omitempty"`
	Steps      []Step       `json:"steps,omitempty"`
	Document   *DocumentRef `json:"document,omitempty"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
}

// Condition says why a run does not progress.
type Condition struct {
	Kind   string     `json:"kind"`
	Reason string     `json:"reason,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
}

// DocumentRef names the flow document a run runs.
type DocumentRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Hash    string `json:"hash"`
}

// StartRequest is the body of POST /runs.
type StartRequest struct {
	// Kind is "flow", "workflow", "job" or "document"; the server's
	// default is "flow".
	Kind           string            `json:"kind,omitempty"`
	Name           string            `json:"name"`
	Version        int               `json:"version,omitempty"`
	Input          json.RawMessage   `json:"input,omitempty"`
	BusinessValue  string            `json:"business_value,omitempty"`
	WorkflowID     string            `json:"workflow_id,omitempty"`
	Tags           []string          `json:"tags,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	ConcurrencyKey string            `json:"concurrency_key,omitempty"`
	CreatedBy      string            `json:"created_by,omitempty"`
	// SearchAttributes are the run's first search attributes, which its
	// flow declares.
	SearchAttributes map[string]any `json:"search_attributes,omitempty"`
	// ExecutionTimeout bounds how long the run may take: a Go duration
	// ("1h"); empty for the definition's default.
	ExecutionTimeout string `json:"execution_timeout,omitempty"`
	// Signal and Update start a workflow with a message (StartWithMessage).
	Signal *SignalStart `json:"signal,omitempty"`
	Update *UpdateStart `json:"update,omitempty"`
}

// RunFilter selects runs: the query of GET /runs and the filter of a bulk
// operation. Zero fields do not filter.
type RunFilter struct {
	Statuses      []string          `json:"statuses,omitempty"`
	Workflow      string            `json:"workflow,omitempty"`
	Queue         string            `json:"queue,omitempty"`
	Tags          []string          `json:"tags,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	CreatedAfter  *time.Time        `json:"created_after,omitempty"`
	CreatedBefore *time.Time        `json:"created_before,omitempty"`
	Text          string            `json:"q,omitempty"`
	Version       int               `json:"version,omitempty"`
	Parent        string            `json:"parent,omitempty"`
	Build         string            `json:"build,omitempty"`
	IDs           []string          `json:"ids,omitempty"`
	// Where filters by search attributes (GET /runs?where=).
	Where string `json:"where,omitempty"`
}

// Empty reports whether f selects every run.
func (f *RunFilter) Empty() bool {
	return len(f.Statuses) == 0 && f.Workflow == "" && f.Queue == "" && len(f.Tags) == 0 &&
		len(f.Metadata) == 0 && f.CreatedAfter == nil && f.CreatedBefore == nil && f.Text == "" &&
		f.Version == 0 && f.Parent == "" && f.Build == "" && len(f.IDs) == 0 && f.Where == ""
}

// RunList is a page of runs.
type RunList struct {
	Runs []Run `json:"runs"`
	// Next continues the list; "" at its end.
	Next string `json:"next"`
}

// Operation is a bulk cancel, retry or delete.
type Operation struct {
	ID        string          `json:"id"`
	Action    string          `json:"action"`
	Filter    json.RawMessage `json:"filter,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Status    string          `json:"status"`
	Total     int             `json:"total"`
	Done      int             `json:"done"`
	Failed    int             `json:"failed"`
	Errors    []string        `json:"errors,omitempty"`
	CreatedBy string          `json:"created_by,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// Finished reports whether the operation has ended.
func (o *Operation) Finished() bool {
	return o.Status == "completed" || o.Status == "failed" || o.Status == "cancelled"
}

// OperationRequest is the body of POST /operations.
type OperationRequest struct {
	Action string    `json:"action"`
	Filter RunFilter `json:"filter"`
	Reason string    `json:"reason,omitempty"`
}

// Definition is a flow, workflow, job kind or document the server knows
// (GET /definitions); PublishedDefinition one of its catalog rows; and
// DefinitionDetail GET /definitions/{name}: the server's own types.
// Graph is a definition's graph, for drawing (package graphtext's JSON).
type Graph struct {
	Flow    string      `json:"flow"`
	Version int         `json:"version"`
	Nodes   []GraphNode `json:"nodes"`
	Edges   []GraphEdge `json:"edges"`
}

// GraphNode is a step of a graph, or its start or done pseudo-node.
type GraphNode struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	// Kind is "start", "step", "map", "wait" or "done".
	Kind string `json:"kind"`
	// Detail says what sets a map or waiting step apart.
	Detail string `json:"detail,omitempty"`
	// State is the step's status in a run, when the graph has states.
	State string `json:"state,omitempty"`
}

// GraphEdge leads From a node To another on Event.
type GraphEdge struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Event   string `json:"event,omitempty"`
	Failure bool   `json:"failure,omitempty"`
}

// Document is a stored flow document.
type Document struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	Hash      string    `json:"hash"`
	Format    string    `json:"format"`
	Size      int       `json:"size,omitempty"`
	Content   string    `json:"content,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// DocumentRequest is the body of POST /documents and of
// POST /documents/validate (without Name).
type DocumentRequest struct {
	Name    string `json:"name,omitempty"`
	Format  string `json:"format"`
	Content string `json:"content"`
}

// Schedule starts runs of a target on a timing.
type Schedule struct {
	ID string `json:"id"`
	// TargetKind is "flow", "workflow", "document" or "job".
	TargetKind string          `json:"target_kind"`
	TargetName string          `json:"target_name"`
	Cron       string          `json:"cron,omitempty"`
	Every      string          `json:"every,omitempty"`
	Anchor     *time.Time      `json:"anchor,omitempty"`
	TimeZone   string          `json:"time_zone,omitempty"`
	Jitter     string          `json:"jitter,omitempty"`
	Overlap    string          `json:"overlap,omitempty"`
	CatchUp    *CatchUp        `json:"catch_up,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Paused     bool            `json:"paused"`
	Declared   bool            `json:"declared,omitempty"`
	NextFire   *time.Time      `json:"next_fire,omitempty"`
	LastTick   *time.Time      `json:"last_tick,omitempty"`
	LastRunID  string          `json:"last_run_id,omitempty"`
	Version    int64           `json:"version,omitempty"`
	CreatedAt  *time.Time      `json:"created_at,omitempty"`
	UpdatedAt  *time.Time      `json:"updated_at,omitempty"`
}

// CatchUp is what a schedule runs of the ticks it missed.
type CatchUp struct {
	Ticks  int    `json:"ticks,omitempty"`
	Within string `json:"within,omitempty"`
}

// ScheduleRun is a run a schedule started.
type ScheduleRun struct {
	Tick time.Time `json:"tick"`
	// Outcome is "started", "skipped", "buffered" or "failed".
	Outcome string `json:"outcome,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Status  string `json:"status,omitempty"`
	Error   string `json:"error,omitempty"`
}

// QueueOptions are a queue's flow-control limits.
type QueueOptions struct {
	MaxRunning       int            `json:"max_running,omitempty"`
	MaxRunningPerKey int            `json:"max_running_per_key,omitempty"`
	Rate             *RateLimit     `json:"rate,omitempty"`
	KeyRate          *RateLimit     `json:"key_rate,omitempty"`
	Fair             bool           `json:"fair,omitempty"`
	Weights          map[string]int `json:"weights,omitempty"`
}

// RateLimit is at most Limit starts in each window of Period.
type RateLimit struct {
	Limit  int    `json:"limit"`
	Period string `json:"period"`
}

// Queue is a queue's configuration and figures.
type Queue struct {
	Name           string       `json:"name"`
	Configured     bool         `json:"configured,omitempty"`
	Paused         bool         `json:"paused"`
	Options        QueueOptions `json:"options"`
	Ready          int          `json:"ready"`
	Scheduled      int          `json:"scheduled"`
	Leased         int          `json:"leased"`
	Running        int          `json:"running"`
	OldestReadyAge string       `json:"oldest_ready_age,omitempty"`
}

// Token is an API token; Secret is set only in the answer that creates
// it.
type Token struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Principal string   `json:"principal"`
	Role      string   `json:"role"`
	Queues    []string `json:"queues,omitempty"`
	Handlers  []string `json:"handlers,omitempty"`
	ActAs     bool     `json:"act_as,omitempty"`
	Payloads  string   `json:"payloads,omitempty"`
	Secret    string   `json:"token,omitempty"`
	// Groups and Kind are the principal's, set only in the answer that
	// creates the token.
	Groups     []string   `json:"groups,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// AuditPage is a page of the audit log, newest first.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next"`
}
