package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// The worker protocol: workers in any language claim tasks (the steps and
// document actions they registered, and workflow activities), heartbeat
// them, and complete or fail them, all through the client's task seam
// (Client.ClaimRemote and the rest), so fencing, retries, timeouts and
// exactly-once hold as for Go workers. A claim is bound to the caller's
// principal: only the same identity may heartbeat, complete or fail it.

// Defaults of a claim.
const (
	defaultClaimWait  = 30 * time.Second
	defaultClaimLease = 30 * time.Second
)

// Task is a task handed to a worker.
type Task struct {
	// Token is the claim's opaque capability: a secret of the claim, good
	// for the claiming credentials' principal only.
	Token    string `json:"token"`
	RunID    string `json:"run_id"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Workflow string `json:"workflow"`
	Version  int    `json:"version"`
	Step     string `json:"step"`
	Index    int    `json:"index"`
	Attempt  int    `json:"attempt"`
	Queue    string `json:"queue"`
	// Input is the action's resolved arguments, the remote step's input,
	// a map element, or the activity's input.
	Input json.RawMessage `json:"input" payload:""`
	// Deadline is when the attempt must be done.
	Deadline time.Time `json:"deadline"`
	// HeartbeatTimeout is the lease: heartbeat more often than that.
	HeartbeatTimeout duration  `json:"heartbeat_timeout"`
	LeaseUntil       time.Time `json:"lease_until"`
	// Details are the heartbeat details recorded last, to resume from.
	Details json.RawMessage `json:"details,omitempty" payload:""`
	// TraceParent is the W3C traceparent of the run's root span, when the
	// run is traced: the worker's own spans may join the run's trace.
	TraceParent string `json:"traceparent,omitempty"`
}

// Tasks is the answer to a claim.
type Tasks struct {
	Tasks []Task `json:"tasks"`
}

func (s *Server) claim(c *call) error {
	var b struct {
		WorkerID   string    `json:"worker_id"`
		Actions    []string  `json:"actions"`
		Activities []string  `json:"activities"`
		Queues     []string  `json:"queues"`
		MaxTasks   int       `json:"max_tasks"`
		Wait       *duration `json:"wait"`
		Lease      duration  `json:"lease"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	switch {
	case b.WorkerID == "":
		return fieldProblem("worker_id", "is required")
	case len(b.Actions)+len(b.Activities) == 0:
		return fieldProblem("actions", "name at least one action or activity the worker runs")
	case b.MaxTasks < 0 || b.MaxTasks > hephaestus.MaxRemoteClaim:
		return fieldProblem("max_tasks", "must be 1 to 100")
	}
	wait := defaultClaimWait
	if b.Wait != nil {
		wait = time.Duration(*b.Wait)
	}
	lease := time.Duration(b.Lease)
	if lease == 0 {
		lease = defaultClaimLease
	}
	c.target = b.WorkerID
	if err := claimAllowed(c, b.Queues, b.Actions, b.Activities); err != nil {
		return err
	}
	ts, err := s.cfg.Client.ClaimRemote(c.ctx(), &hephaestus.RemoteClaim{
		WorkerID: b.WorkerID, Principal: c.principal(), Actions: b.Actions, Activities: b.Activities, Queues: b.Queues, Max: max(b.MaxTasks, 1),
		Lease: lease, Wait: s.longPoll(wait),
	})
	if err != nil {
		return err
	}
	out := Tasks{Tasks: make([]Task, 0, len(ts))}
	for _, t := range ts {
		in := t.Input
		if len(in) == 0 {
			in = json.RawMessage("null")
		}
		out.Tasks = append(out.Tasks, Task{
			Token: t.Token, RunID: t.RunID, Kind: t.Kind, Name: t.Name, Workflow: t.Workflow, Version: t.Version, Step: t.Step,
			Index: t.Index, Attempt: t.Attempt, Queue: t.Queue, Input: in, Deadline: t.Deadline.UTC(),
			HeartbeatTimeout: duration(t.Lease), LeaseUntil: t.LeaseUntil.UTC(), Details: t.Details, TraceParent: t.TraceParent,
		})
	}
	return c.json(http.StatusOK, out)
}

// Heartbeat is the answer to a heartbeat.
type Heartbeat struct {
	// Cancelled: the run was cancelled; the worker stops the task.
	Cancelled bool `json:"cancelled"`
}

func (s *Server) heartbeat(c *call) error {
	var b struct {
		Token   string                 `json:"token"`
		Details json.RawMessage        `json:"details"`
		Logs    []hephaestus.RemoteLog `json:"logs"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Token == "" {
		return fieldProblem("token", "is required")
	}
	if err := s.remoteLogs(c, b.Token, b.Logs); err != nil {
		return err
	}
	cancelled, err := s.cfg.Client.HeartbeatRemote(hephaestus.WithRemoteCaller(c.ctx(), c.principal()), b.Token, b.Details)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, Heartbeat{Cancelled: cancelled})
}

func (s *Server) complete(c *call) error {
	var b struct {
		Token  string                 `json:"token"`
		Output json.RawMessage        `json:"output"`
		Logs   []hephaestus.RemoteLog `json:"logs"`
		// SearchAttributes are upserted with the result
		// (hephaestus.CompleteOptions).
		SearchAttributes map[string]any `json:"search_attributes"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Token == "" {
		return fieldProblem("token", "is required")
	}
	if err := s.remoteLogs(c, b.Token, b.Logs); err != nil {
		return err
	}
	if err := s.cfg.Client.CompleteRemoteWith(hephaestus.WithRemoteCaller(c.ctx(), c.principal()), b.Token, b.Output,
		&hephaestus.CompleteOptions{SearchAttributes: b.SearchAttributes}); err != nil {
		return err
	}
	return c.json(http.StatusOK, empty{})
}

func (s *Server) failTask(c *call) error {
	var b struct {
		Token     string                 `json:"token"`
		Error     string                 `json:"error"`
		Retryable *bool                  `json:"retryable"`
		Details   json.RawMessage        `json:"details"`
		Logs      []hephaestus.RemoteLog `json:"logs"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Token == "" {
		return fieldProblem("token", "is required")
	}
	if b.Error == "" {
		return fieldProblem("error", "is required: say why the task failed")
	}
	if err := s.remoteLogs(c, b.Token, b.Logs); err != nil {
		return err
	}
	retryable := b.Retryable == nil || *b.Retryable
	if err := s.cfg.Client.FailRemote(hephaestus.WithRemoteCaller(c.ctx(), c.principal()), b.Token, b.Error, retryable, b.Details); err != nil {
		return err
	}
	return c.json(http.StatusOK, empty{})
}

// remoteLogs stores the "logs" of a worker's report, before the report:
// a bad record is a 400 naming it (logs[i].field).
func (s *Server) remoteLogs(c *call, token string, logs []hephaestus.RemoteLog) error {
	if len(logs) > hephaestus.MaxRemoteLogs {
		return fieldProblem("logs", fmt.Sprintf("has %d records; at most %d per request", len(logs), hephaestus.MaxRemoteLogs))
	}
	return s.cfg.Client.LogRemote(hephaestus.WithRemoteCaller(c.ctx(), c.principal()), token, logs)
}

// claimAllowed enforces a worker token's limits (TokenOptions.Queues and
// Handlers) on a claim: every queue and every action or activity named
// must be among the token's (403 otherwise). A claim without queues
// claims from "default".
func claimAllowed(c *call, queues, actions, activities []string) error {
	if c.token == nil {
		return nil
	}
	o := c.token.Options
	if len(o.Queues) > 0 {
		if len(queues) == 0 {
			queues = []string{"default"}
		}
		for _, q := range queues {
			if !slices.Contains(o.Queues, q) {
				return &Problem{Status: http.StatusForbidden, Kind: kindForbidden, Detail: fmt.Sprintf("queues: the token %q may claim only from the queues %v, not %q", c.token.Name, o.Queues, q)}
			}
		}
	}
	if len(o.Handlers) > 0 {
		for _, h := range slices.Concat(actions, activities) {
			if !slices.Contains(o.Handlers, h) {
				return &Problem{Status: http.StatusForbidden, Kind: kindForbidden, Detail: fmt.Sprintf("actions: the token %q may claim only the handlers %v, not %q", c.token.Name, o.Handlers, h)}
			}
		}
	}
	return nil
}
