package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
	"github.com/hephaestus-go/hephaestus/store"
)

// Run is a run as the API shows it.
type Run struct {
	ID         string                     `json:"id"`
	Kind       string                     `json:"kind"`
	Workflow   string                     `json:"workflow"`
	Version    int                        `json:"version"`
	Status     string                     `json:"status"`
	Input      json.RawMessage            `json:"input,omitempty" payload:""`
	Output     json.RawMessage            `json:"output,omitempty" payload:""`
	Error      string                     `json:"error,omitempty"`
	BusinessID string                     `json:"business_id,omitempty"`
	ParentID   string                     `json:"parent_id,omitempty"`
	Tags       []string                   `json:"tags"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	// SearchAttributes are the run's search attributes (docs/operations.md,
	// Search attributes): strings, lists of strings, numbers, booleans and
	// times (RFC 3339).
	SearchAttributes map[string]any `json:"search_attributes,omitempty"`
	ConcurrencyKey   string         `json:"concurrency_key,omitempty"`
	// BuildID is the build that started a workflow run (for one that
	// auto-upgrades, the build that decided it last).
	BuildID   string        `json:"build_id,omitempty"`
	Condition *RunCondition `json:"condition,omitempty"`
	// ScheduledFor is set on a pending or running run whose every task is
	// due later: when the first is due. Such a run is shown as
	// "scheduled"; Status stays as stored.
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
	// Deadline is when the run times out if it has not finished (its
	// execution timeout); a run that timed out failed with the condition
	// "timed_out".
	Deadline *time.Time `json:"deadline,omitempty"`
	// ResetFrom is the run a workflow run was reset from, ResetTo the
	// run a reset of it created (POST /runs/{id}/reset-workflow, retry).
	ResetFrom string `json:"reset_from,omitempty"`
	ResetTo   string `json:"reset_to,omitempty"`
	// WaitingFor is what the run waits for (only on GET /runs/{id}).
	WaitingFor []Wait `json:"waiting_for,omitempty"`
	// Steps is nil in a RunSummary (a list); a workflow run's are its
	// activities, timers and children (steps.go).
	Steps      []StepJSON              `json:"steps,omitempty"`
	Document   *hephaestus.DocumentRef `json:"document,omitempty"`
	CreatedAt  time.Time               `json:"created_at"`
	UpdatedAt  time.Time               `json:"updated_at"`
	FinishedAt *time.Time              `json:"finished_at,omitempty"`
}

// RunCondition says why an active run does not progress.
type RunCondition struct {
	Kind   string    `json:"kind"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// StepJSON is a step's state in a run.
type StepJSON struct {
	Name     string          `json:"name"`
	Status   string          `json:"status"`
	Attempts int             `json:"attempts"`
	Event    string          `json:"event,omitempty"`
	Output   json.RawMessage `json:"output,omitempty" payload:""`
	// What the step did (steps.go), on GET /runs/{id} and /steps.
	Kind           string            `json:"kind,omitempty"`
	StartedAt      *time.Time        `json:"started_at,omitempty"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
	DurationMS     *int64            `json:"duration_ms,omitempty"`
	Worker         string            `json:"worker,omitempty"`
	Error          string            `json:"error,omitempty"`
	AttemptDetails []StepAttemptJSON `json:"attempt_details,omitempty"`
	Waits          []StepWaitJSON    `json:"waits,omitempty"`
}

// runJSON converts a run; full includes its input, output and steps.
func runJSON(r *hephaestus.Run, full bool) *Run {
	out := &Run{
		ID: r.ID, Kind: string(r.KindName()), Workflow: r.Flow, Version: r.Version, Status: string(r.Status), Error: r.Error,
		BusinessID: r.BusinessID, ParentID: r.ParentID, Tags: r.Tags, Metadata: r.Metadata, ConcurrencyKey: r.ConcurrencyKey,
		BuildID: r.BuildID, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), SearchAttributes: r.SearchAttributes,
		ResetFrom: r.ResetFrom, ResetTo: r.ResetTo,
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]json.RawMessage{}
	}
	if !r.Condition.IsZero() {
		out.Condition = &RunCondition{Kind: r.Condition.Code, Reason: r.Condition.Message, Since: r.Condition.Since.UTC()}
	}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt.UTC()
		out.FinishedAt = &t
	}
	if !r.Deadline.IsZero() {
		t := r.Deadline.UTC()
		out.Deadline = &t
	}
	if !r.ScheduledFor.IsZero() {
		t := r.ScheduledFor.UTC()
		out.ScheduledFor = &t
	}
	if d, ok := r.Document(); ok {
		out.Document = &d
	}
	if full {
		out.Input, out.Output = r.Input, r.Output
		out.Steps = make([]StepJSON, 0, len(r.Steps))
		for _, s := range r.Steps {
			out.Steps = append(out.Steps, StepJSON{Name: s.Name, Status: string(s.Status), Attempts: s.Attempt, Event: s.Event, Output: s.Output})
		}
	}
	return out
}

// startRequest is the body of POST /runs.
type startRequest struct {
	Kind           string                     `json:"kind"`
	Name           string                     `json:"name"`
	Version        int                        `json:"version"`
	Input          json.RawMessage            `json:"input"`
	BusinessValue  string                     `json:"business_value"`
	WorkflowID     string                     `json:"workflow_id"`
	Tags           []string                   `json:"tags"`
	Metadata       map[string]json.RawMessage `json:"metadata"`
	ConcurrencyKey string                     `json:"concurrency_key"`
	// SearchAttributes are the run's first search attributes, which its
	// flow, job kind or workflow declares (a typo or a value of another
	// type is refused, naming the attribute).
	SearchAttributes map[string]any `json:"search_attributes"`
	// CreatedBy is refused: the run's creator is the caller's principal.
	CreatedBy string `json:"created_by"`
	// OnBehalfOf names the end user the caller starts the run for; only a
	// token with the act-as permission may.
	OnBehalfOf string `json:"on_behalf_of"`
	// ExecutionTimeout bounds how long the run may take ("1h", "90m");
	// empty for the definition's default, if any.
	ExecutionTimeout string `json:"execution_timeout"`
	timeout          time.Duration
	// Signal and Update start a workflow with a message (withstart.go).
	Signal *signalStart `json:"signal"`
	Update *updateStart `json:"update"`
}

// check validates what decoding cannot.
func (b *startRequest) check() error {
	if b.Kind == "" {
		b.Kind = "flow"
	}
	switch b.Kind {
	case "flow", "workflow", "document", "job":
	default:
		return fieldProblem("kind", fmt.Sprintf(`%q is not a kind: use "flow", "workflow", "job" or "document"`, b.Kind))
	}
	if b.Name == "" {
		return fieldProblem("name", "is required")
	}
	if b.Version < 0 {
		return fieldProblem("version", "must not be negative")
	}
	if b.Kind == "workflow" && (b.BusinessValue != "" || b.Version != 0) {
		return fieldProblem("business_value", "a workflow takes workflow_id, not business_value or version")
	}
	if b.Kind == "job" && b.Version != 0 {
		return fieldProblem("version", "a job kind has no versions")
	}
	if b.Kind != "workflow" && b.WorkflowID != "" {
		return fieldProblem("workflow_id", "only a workflow takes a workflow id; a flow takes business_value")
	}
	if b.ExecutionTimeout != "" {
		d, err := time.ParseDuration(b.ExecutionTimeout)
		if err != nil || d <= 0 {
			return fieldProblem("execution_timeout", fmt.Sprintf("%q is not a positive duration such as \"90s\", \"30m\" or \"1h\"", b.ExecutionTimeout))
		}
		b.timeout = d
	}
	return b.checkMessage()
}

// fieldProblem is a 400 naming a field of the body.
func fieldProblem(field, msg string) *Problem {
	p := badRequest(field + ": " + msg)
	p.Errors = []FieldError{{Path: field, Message: msg}}
	return p
}

func anyMap(m map[string]json.RawMessage) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// input is the run input to pass on: JSON null when absent.
func input(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// idempotencyNamespace is the UUID namespace of the run ids derived from
// Idempotency-Key headers.
var idempotencyNamespace = uuid.MustParse("6f1c2a0e-3b7d-5e8f-9a41-2c6d8e0f1b35")

// maxIdempotencyKey bounds an Idempotency-Key, in bytes.
const maxIdempotencyKey = 200

// runIDOf derives the run id of a start from its Idempotency-Key, its kind
// and its name: a repeated request names the same run.
func runIDOf(key, kind, name string) string {
	return uuid.NewSHA1(idempotencyNamespace, []byte(key+"\x00"+kind+"\x00"+name)).String()
}

// startRun starts a run: 201 with it, or 200 with the run an earlier
// request with the same Idempotency-Key (and kind and name) started.
func (s *Server) startRun(c *call) error {
	var b startRequest
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if err := b.check(); err != nil {
		return err
	}
	var runID string
	if key := c.r.Header.Get("Idempotency-Key"); key != "" {
		if len(key) > maxIdempotencyKey {
			return badRequest(fmt.Sprintf("the Idempotency-Key header is %d bytes long, more than %d", len(key), maxIdempotencyKey))
		}
		runID = runIDOf(key, b.Kind, b.Name)
	}
	// Who starts the run comes from the credential only.
	createdBy := c.principal()
	actAs := c.token != nil && c.token.Options.ActAs
	switch {
	case b.CreatedBy != "":
		return fieldProblem("created_by", "is not accepted: the run's creator is the caller's principal; a token with the act-as permission names the end user with on_behalf_of")
	case b.OnBehalfOf != "" && !actAs:
		return &Problem{Status: http.StatusForbidden, Kind: kindForbidden, Detail: fmt.Sprintf("on_behalf_of: %q may not start runs on behalf of others: it needs a token with the act-as permission (heph tokens create --act-as)", createdBy)}
	case len(b.OnBehalfOf) > store.MaxPrincipalName:
		return fieldProblem("on_behalf_of", fmt.Sprintf("is %d bytes long, more than %d", len(b.OnBehalfOf), store.MaxPrincipalName))
	}
	cl := s.cfg.Client
	var run *hephaestus.Run
	var err error
	switch b.Kind {
	case "workflow":
		md := anyMap(b.Metadata)
		if md == nil {
			md = map[string]any{}
		}
		if _, ok := md["created_by"]; ok {
			return fieldProblem("metadata", `the key "created_by" is reserved: the run's creator is the caller's principal`)
		}
		if _, ok := md["on_behalf_of"]; ok {
			return fieldProblem("metadata", `the key "on_behalf_of" is reserved: name the end user with the body's on_behalf_of`)
		}
		md["created_by"] = createdBy
		if b.OnBehalfOf != "" {
			md["on_behalf_of"] = b.OnBehalfOf
		}
		if b.Signal != nil || b.Update != nil {
			return s.startWithMessage(c, &b, md)
		}
		run, err = cl.StartWorkflow(c.ctx(), b.Name, input(b.Input), &hephaestus.WorkflowOptions{
			ID: b.WorkflowID, Tags: b.Tags, Metadata: md, ConcurrencyKey: b.ConcurrencyKey, RunID: runID,
			ExecutionTimeout: b.timeout, SearchAttributes: b.SearchAttributes,
		})
	case "job":
		var j *hephaestus.Job
		j, err = cl.InsertJobJSON(c.ctx(), b.Name, b.Input, &hephaestus.JobOptions{
			UniqueKey: b.BusinessValue, Tags: b.Tags, Metadata: anyMap(b.Metadata), ConcurrencyKey: b.ConcurrencyKey, RunID: runID,
			ExecutionTimeout: b.timeout, SearchAttributes: b.SearchAttributes,
		})
		if err != nil {
			break // an unknown kind is explained below
		}
		if run, err = cl.GetRun(c.ctx(), j.ID); err != nil {
			return err
		}
		if j.Duplicate {
			err = hephaestus.ErrRunExists
		}
	default:
		opts := &hephaestus.StartOptions{
			BusinessValue: b.BusinessValue, Version: b.Version, Tags: b.Tags, Metadata: anyMap(b.Metadata),
			CreatedBy: createdBy, OnBehalfOf: b.OnBehalfOf, ConcurrencyKey: b.ConcurrencyKey, RunID: runID,
			ExecutionTimeout: b.timeout, SearchAttributes: b.SearchAttributes,
		}
		if b.Kind == "document" {
			run, err = cl.StartDocument(c.ctx(), b.Name, b.Version, input(b.Input), opts)
		} else {
			run, err = cl.StartRun(c.ctx(), b.Name, input(b.Input), opts)
		}
	}
	if errors.Is(err, hephaestus.ErrBusinessValueRequired) {
		p := fieldProblem("business_value", "is required: "+err.Error())
		return withFix(p, "pass business_value, the value of the flow's business key (such as \"order-42\"; heph start --business-value order-42)")
	}
	if definitionNotFound(err) {
		return s.unknownDefinition(c, b.Kind, b.Name, true, err)
	}
	status := http.StatusCreated
	if errors.Is(err, hephaestus.ErrRunExists) && run != nil && runID != "" {
		status, err = http.StatusOK, nil
	}
	if err != nil {
		return err
	}
	c.target = run.ID
	c.w.Header().Set("Location", "/api/v1/runs/"+url.PathEscape(run.ID))
	return c.json(status, runJSON(run, true))
}

// statusScheduled is the status filter of the runs shown as scheduled
// (Run.ScheduledFor): pending or running, every task due later.
const statusScheduled = "scheduled"

// runStatusNames are the values of the status filter.
var runStatusNames = []string{"pending", "running", "waiting", "completed", "failed", "cancelled", "continued", statusScheduled}

// RunList is a page of runs.
type RunList struct {
	Runs []*Run `json:"runs"`
	Next string `json:"next"`
}

func (s *Server) listRuns(c *call) error {
	q := c.query()
	opts := &hephaestus.ListOptions{
		Flow:          q.str("workflow"),
		BusinessID:    q.str("business_id"),
		Tags:          q.list("tag"),
		CreatedAfter:  q.time("created_after"),
		CreatedBefore: q.time("created_before"),
		Queue:         q.str("queue"),
		Text:          q.str("q"),
		Version:       q.integer("version", 0, 0, 1<<31-1),
		Parent:        q.str("parent"),
		Build:         q.str("build"),
		IDs:           q.list("id"),
		Limit:         q.integer("limit", 100, 1, 1000),
		Cursor:        q.str("cursor"),
		Where:         q.str("where"),
	}
	if cur := opts.Cursor; cur != "" {
		if _, _, err := store.DecodeRunCursor(cur); err != nil {
			q.failFix("cursor", "pass the next of the page before, or no cursor for the first page", "%q is not a cursor of this list", cur)
		}
	}
	if n := len(opts.IDs); n > maxFilterIDs {
		q.failFix("id", fmt.Sprintf("pass at most %d and page through the rest", maxFilterIDs), "%d run ids, more than %d", n, maxFilterIDs)
	}
	switch k := q.str("kind"); k {
	case "", string(hephaestus.KindFlow), string(hephaestus.KindWorkflow):
		opts.Kind = hephaestus.RunKind(k)
	default:
		q.failFix("kind", `pass "flow" (flows, documents and jobs) or "workflow"`, "%q is not a kind of run", k)
	}
	for name, vs := range q.v {
		if key, ok := strings.CutPrefix(name, "meta."); ok && key != "" {
			if opts.Metadata == nil {
				opts.Metadata = map[string]string{}
			}
			opts.Metadata[key] = vs[0]
		}
	}
	statuses := q.list("status")
	for _, st := range statuses {
		switch {
		case st == statusScheduled && len(statuses) > 1:
			q.failFix("status", "pass scheduled alone", "scheduled is not combined with other statuses")
		case st == statusScheduled:
			opts.Scheduled = true
		case !hephtype.RunStatus(st).Valid():
			q.failFix("status", "pass one of "+strings.Join(runStatusNames, ", "), "%q is not a run status%s", st, suggest.DidYouMean(st, runStatusNames, false))
		default:
			opts.Statuses = append(opts.Statuses, hephtype.RunStatus(st))
		}
	}
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.cfg.Client.ListRuns(c.ctx(), opts)
	if opts.Where != "" && errors.Is(err, hephaestus.ErrInvalidInput) {
		_, msg, _ := strings.Cut(err.Error(), "where: ")
		return withFix(fieldProblem("where", msg), "name the attributes the flows declare, such as amount > 100 and region in [eu, us] (docs/operations.md, Search attributes)")
	}
	if err != nil {
		return err
	}
	out := &RunList{Runs: make([]*Run, 0, len(page.Runs)), Next: page.Next}
	for _, r := range page.Runs {
		out.Runs = append(out.Runs, runJSON(r, false))
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) getRun(c *call) error {
	r, err := s.cfg.Client.GetRun(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	ws, err := s.cfg.Client.WaitingFor(c.ctx(), r.ID)
	if err != nil {
		return err
	}
	out, err := s.runWithSteps(c, r)
	if err != nil {
		return err
	}
	out.WaitingFor = waitsJSON(ws)
	return c.json(http.StatusOK, out)
}

// Event is a history entry as the API shows it.
type Event struct {
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

// History is a page of a run's history.
type History struct {
	Events []Event `json:"events"`
	// Last is the sequence number of the last event returned (the after
	// parameter when none): the next call's after.
	Last int64 `json:"last"`
}

func (s *Server) history(c *call) error {
	q := c.query()
	after := q.int64("after")
	wait := q.dur("wait", MaxWait)
	if err := q.err(); err != nil {
		return err
	}
	evs, err := s.cfg.Client.HistoryAfter(c.ctx(), c.r.PathValue("id"), after, s.longPoll(wait))
	if err != nil {
		return err
	}
	out := &History{Events: []Event{}, Last: after}
	for _, e := range evs {
		out.Events = append(out.Events, Event{Seq: e.Seq, Kind: string(e.Kind), Step: e.Step, Index: e.Index, Attempt: e.Attempt,
			Name: e.Name, Data: e.Data, Error: e.Error, At: e.At.UTC()})
		out.Last = e.Seq
	}
	return c.json(http.StatusOK, out)
}

// exportHistory answers a workflow run's history as Client.ExportHistory
// writes it: what heph replay and hephaestus.ReplayCheck read.
func (s *Server) exportHistory(c *call) error {
	if !c.readsPayloads() {
		return &Problem{Status: http.StatusForbidden, Kind: kindForbidden, Detail: "a history export holds the run's payloads, which the " + string(c.role) + " role may not read on a server that encrypts them (docs/payloads.md)"}
	}
	b, err := s.cfg.Client.ExportHistory(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, json.RawMessage(b))
}

// longPoll bounds a requested wait: at most MaxWait, and nine tenths of
// the request timeout so that the answer is written in time.
func (s *Server) longPoll(d time.Duration) time.Duration {
	return min(d, MaxWait, s.cfg.RequestTimeout*9/10)
}

// result answers 200 with the run once it is terminal, 202 (with
// Retry-After) while it is not; with ?wait it first waits up to that long
// for the run to end.
func (s *Server) result(c *call) error {
	q := c.query()
	wait := q.dur("wait", MaxWait)
	if err := q.err(); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	cl := s.cfg.Client
	r, err := cl.GetRun(c.ctx(), id)
	if err != nil {
		return err
	}
	if !r.Status.Terminal() && wait > 0 {
		wctx, cancel := context.WithTimeout(c.ctx(), s.longPoll(wait))
		done, err := cl.WaitRun(wctx, id)
		cancel()
		switch {
		case err == nil:
			r = done
		case wctx.Err() != nil && c.ctx().Err() == nil:
			if r, err = cl.GetRun(c.ctx(), id); err != nil {
				return err
			}
		default:
			return err
		}
	}
	if r.Status.Terminal() {
		return c.json(http.StatusOK, runJSON(r, true))
	}
	c.w.Header().Set("Retry-After", "1")
	return c.json(http.StatusAccepted, runJSON(r, true))
}

// retry runs a failed run again from its failed steps.
func (s *Server) retry(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	r, err := s.cfg.Client.GetRun(c.ctx(), id)
	if err == nil && r.Kind == hephaestus.KindWorkflow {
		r, err = s.retryWorkflow(c, r)
	} else {
		r, err = s.cfg.Client.RetryRun(c.ctx(), id)
	}
	if err != nil {
		return err
	}
	out, err := s.runWithSteps(c, r)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, out)
}
