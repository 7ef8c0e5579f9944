package client

// The JSON types of the API, the client's own copies of the server's
// (so that a program importing client links none of the engine).

import (
	"encoding/json"
	"fmt"
	"time"
)

type WorkflowBuild struct {
	// BuildID is "" for the open runs that record no build.
	BuildID     string `json:"build_id"`
	OpenRuns    int    `json:"open_runs"`
	LiveWorkers int    `json:"live_workers"`
	// Newest: the build new runs pin to when a process without the
	// workflow starts them.
	Newest bool `json:"newest"`
	// Draining: open runs are left on it and it is not the newest.
	Draining  bool       `json:"draining"`
	Retired   bool       `json:"retired"`
	RetiredAt *time.Time `json:"retired_at,omitempty"`
}

type DeletedRun struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	// Kind is flow, document, job or workflow.
	Kind string `json:"kind"`
	// Status is the run's status when it was deleted.
	Status string `json:"status"`
	// Tasks counts the tasks deleted with it (work it had left; 0 unless
	// forced).
	Tasks  int  `json:"tasks"`
	Forced bool `json:"forced"`
}

type Step struct {
	Name     string          `json:"name"`
	Status   string          `json:"status"`
	Attempts int             `json:"attempts"`
	Event    string          `json:"event,omitempty"`
	Output   json.RawMessage `json:"output,omitempty" payload:""`
	// What the step did (steps.go), on GET /runs/{id} and /steps.
	Kind           string        `json:"kind,omitempty"`
	StartedAt      *time.Time    `json:"started_at,omitempty"`
	FinishedAt     *time.Time    `json:"finished_at,omitempty"`
	DurationMS     *int64        `json:"duration_ms,omitempty"`
	Worker         string        `json:"worker,omitempty"`
	Error          string        `json:"error,omitempty"`
	AttemptDetails []StepAttempt `json:"attempt_details,omitempty"`
	Waits          []StepWait    `json:"waits,omitempty"`
}

type StepAttempt struct {
	Number      int             `json:"number"`
	Worker      string          `json:"worker,omitempty"`
	ReadyAt     *time.Time      `json:"ready_at,omitempty"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	DurationMS  *int64          `json:"duration_ms,omitempty"`
	Outcome     string          `json:"outcome"`
	Error       string          `json:"error,omitempty"`
	Reexecution bool            `json:"reexecution,omitempty"`
	Claims      int             `json:"claims,omitempty"`
	Details     json.RawMessage `json:"details,omitempty" payload:""`
	LeaseUntil  *time.Time      `json:"lease_until,omitempty"`
}

type StepWait struct {
	From    time.Time  `json:"from"`
	To      *time.Time `json:"to,omitempty"`
	Outcome string     `json:"outcome"`
	Event   string     `json:"event,omitempty"`
	Actor   string     `json:"actor,omitempty"`
}

type StepList struct {
	Steps []Step `json:"steps"`
}

type HistoryEvent struct {
	Seq     int64           `json:"seq"`
	Kind    string          `json:"kind"`
	Step    string          `json:"step,omitempty"`
	Index   int             `json:"index"`
	Attempt int             `json:"attempt,omitempty"`
	Name    string          `json:"name,omitempty"`
	Data    json.RawMessage `json:"data,omitempty" payload:""`
	Error   string          `json:"error,omitempty"`
	At      time.Time       `json:"at"`
}

type History struct {
	Events []HistoryEvent `json:"events"`
	// Last is the sequence number of the last event returned (the after
	// parameter when none): the next call's after.
	Last int64 `json:"last"`
}

type UpdateResult struct {
	Result json.RawMessage `json:"result,omitempty" payload:""`
	Stage  string          `json:"stage"`
}

type QueryResult struct {
	Result json.RawMessage `json:"result" payload:""`
}

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

type Definition struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Versions []int  `json:"versions"`
	// Latest is the highest version (0 for a workflow: see Builds).
	Latest int `json:"latest"`
	// Builds published it; Local: the server's client has its code;
	// Served: a live worker has it (Workers).
	Builds  []string `json:"builds"`
	Local   bool     `json:"local"`
	Served  bool     `json:"served"`
	Workers []string `json:"workers"`
	// Published are its catalog rows (per version, or per build of a
	// workflow).
	Published []PublishedDefinition `json:"published"`
}

type PublishedDefinition struct {
	Version      int             `json:"version"`
	BuildID      string          `json:"build_id"`
	Hash         string          `json:"hash"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Queues       []string        `json:"queues"`
	Handlers     []string        `json:"handlers"`
	Schedules    []string        `json:"schedules"`
	PublishedAt  time.Time       `json:"published_at"`
	PublishedBy  string          `json:"published_by"`
	// Spec is set by GET /definitions/{name} only.
	Spec json.RawMessage `json:"spec,omitempty"`
}

type DefinitionDetail struct {
	Definition
	Schedules []string `json:"schedules"`
}

type Worker struct {
	ID            string     `json:"id"`
	Queues        []string   `json:"queues"`
	Handlers      []string   `json:"handlers"`
	BuildID       string     `json:"build_id,omitempty"`
	Host          string     `json:"host,omitempty"`
	PID           int        `json:"pid,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	LastHeartbeat time.Time  `json:"last_heartbeat"`
	ExpiresAt     time.Time  `json:"expires_at"`
}

type Stats struct {
	Since         time.Time     `json:"since"`
	Until         time.Time     `json:"until"`
	Bucket        duration      `json:"bucket"`
	BucketSeconds float64       `json:"bucket_seconds"`
	Workflow      string        `json:"workflow,omitempty"`
	StaleAfter    duration      `json:"stale_after"`
	Buckets       []StatsBucket `json:"buckets"`
	// Totals sums the buckets.
	Totals  StatsCounts    `json:"totals"`
	Latency StatsLatency   `json:"latency"`
	Active  map[string]int `json:"active"`
	Blocked StatsRuns      `json:"blocked"`
	Stale   StatsRuns      `json:"stale"`
}

type duration time.Duration

type StatsBucket struct {
	Start time.Time `json:"start"`
	StatsCounts
}

type StatsCounts struct {
	Started   int `json:"started"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

type StatsLatency struct {
	Count      int     `json:"count"`
	Sampled    int     `json:"sampled"`
	P50Seconds float64 `json:"p50_seconds"`
	P90Seconds float64 `json:"p90_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

type StatsRuns struct {
	Count int         `json:"count"`
	Runs  []*StatsRun `json:"runs"`
}

type StatsRun struct {
	ID        string        `json:"id"`
	Kind      string        `json:"kind"`
	Workflow  string        `json:"workflow"`
	Status    string        `json:"status"`
	Condition *RunCondition `json:"condition,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
}

type RunCondition struct {
	Kind   string    `json:"kind"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

type Principal struct {
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Groups     []string   `json:"groups"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Role   string    `json:"role"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Status int       `json:"status"`
	Detail string    `json:"detail,omitempty"`
}

type CreatedWebhook struct {
	Webhook
	Secret string `json:"secret"`
}

type NewWebhook struct {
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	Workflows []string `json:"workflows,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	// Format is "json" (the default) or "slack".
	Format string `json:"format,omitempty"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
}

type LogPage struct {
	Records []LogRecord `json:"records"`
	// Next is the cursor to read on from (LogsOptions.After): the Seq of
	// the last record, or the After given when there was none.
	Next int64 `json:"next"`
}

type LogRecord struct {
	// Seq orders the records of a run: pass the last one seen as
	// LogsOptions.After to read on.
	Seq int64 `json:"seq"`
	// Step is the step or activity; Index the map element (0 for a step)
	// or the activity's sequence number; Attempt counts from 1.
	Step    string `json:"step"`
	Index   int    `json:"index"`
	Attempt int    `json:"attempt"`
	// Worker is who ran the attempt.
	Worker string    `json:"worker,omitempty"`
	Time   time.Time `json:"time"`
	// Level is slog's name of the level: DEBUG, INFO, WARN, ERROR.
	Level   string          `json:"level"`
	Message string          `json:"message"`
	Attrs   json.RawMessage `json:"attrs,omitempty"`
	// Dropped, when positive, makes the record a marker: that many
	// earlier records of the attempt were dropped for the bounds.
	Dropped int `json:"dropped,omitempty"`
}

type LogFilter struct {
	Step string
	// Index keeps one map element (or activity sequence number).
	Index *int
	// Attempt keeps one attempt.
	Attempt int
	// Level keeps records at this level and above (DEBUG, INFO, WARN,
	// ERROR, in any case); markers always.
	Level string
	// After keeps the records after this Seq (a cursor).
	After int64
	// Limit bounds the records returned: 1000 by default and at most.
	Limit int
	// Wait, when positive and no record matches, waits up to Wait (on the
	// client's clock) for one, or for the run to end, polling as
	// HistoryAfter does.
	Wait time.Duration
}

type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are the event types it receives.
	Events []string `json:"events"`
	// Workflows and Tags filter the runs: when set, a run event is sent
	// only for a run of one of the workflows that has one of the tags.
	// Events of no run (schedule.tick_failed) go only to webhooks
	// without them.
	Workflows []string `json:"workflows,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	// Format is WebhookFormatJSON or WebhookFormatSlack.
	Format  string `json:"format"`
	Enabled bool   `json:"enabled"`
	// Sealed tells whether the secret is stored encrypted with
	// Config.SecretKeys (false: stored as is).
	Sealed    bool      `json:"sealed"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

type WebhookDelivery struct {
	// ID is the idempotency key the receiver sees (WebhookIDHeader).
	ID        string `json:"id"`
	WebhookID string `json:"webhook_id"`
	Event     string `json:"event"`
	RunID     string `json:"run_id,omitempty"`
	// Status is "pending", "delivered" or "dead" (every attempt failed).
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// NextAttempt is when a pending delivery is due.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// LastStatus and LastError are those of the last attempt.
	LastStatus int    `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	// Body is what is sent. It holds the run's payloads: the server
	// shows it as a payload (tag payload, docs/payloads.md).
	Body      json.RawMessage          `json:"body" payload:""`
	CreatedAt time.Time                `json:"created_at"`
	UpdatedAt time.Time                `json:"updated_at"`
	Log       []WebhookDeliveryAttempt `json:"log"`
}

type WebhookDeliveryAttempt struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// StatusCode is the receiver's HTTP status; 0 when none came.
	StatusCode int           `json:"status_code"`
	Error      string        `json:"error,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
	// NextAttempt is when the next attempt was due; zero after the last.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// UnmarshalJSON reads a Go duration string ("1.5s").
func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration: want a string like \"1.5s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("a duration: %w", err)
	}
	*d = duration(v)
	return nil
}

// MarshalJSON writes a Go duration string.
func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
