package server

import (
	"encoding/json"
	"net/http"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// StepAttemptJSON is one attempt of a step as the API shows it.
type StepAttemptJSON struct {
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

// StepWaitJSON is a stretch a step waited to be resumed (or a timer's).
type StepWaitJSON struct {
	From    time.Time  `json:"from"`
	To      *time.Time `json:"to,omitempty"`
	Outcome string     `json:"outcome"`
	Event   string     `json:"event,omitempty"`
	Actor   string     `json:"actor,omitempty"`
}

// StepList is the answer of GET /runs/{id}/steps.
type StepList struct {
	Steps []StepJSON `json:"steps"`
}

// stepTimes gives a run's steps what they did: a flow step's times,
// attempts and error; the steps the history adds (a map's elements, a
// workflow's activities, timers and children) follow the flow's.
func stepTimes(steps []StepJSON, details []hephaestus.StepDetail) []StepJSON {
	at := map[string]int{}
	for i, s := range steps {
		at[s.Name] = i
	}
	for _, d := range details {
		i, ok := at[d.Name]
		if !ok {
			steps = append(steps, StepJSON{Name: d.Name, Status: d.Status, Attempts: len(d.Attempts)})
			i = len(steps) - 1
			at[d.Name] = i
		}
		s := &steps[i]
		s.Kind = d.Kind
		if s.Status == "scheduled" && d.Status == "running" {
			s.Status = d.Status
		}
		s.StartedAt, s.FinishedAt = timePtr(d.StartedAt), timePtr(d.FinishedAt)
		if !d.StartedAt.IsZero() && !d.FinishedAt.IsZero() { // one answer for one state: no "so far"
			s.DurationMS = msPtr(d.Duration)
		}
		s.Error = d.Error
		for _, a := range d.Attempts {
			j := StepAttemptJSON{Number: a.Number, Worker: a.Worker, ReadyAt: timePtr(a.ReadyAt), StartedAt: timePtr(a.StartedAt),
				FinishedAt: timePtr(a.FinishedAt), Outcome: a.Outcome, Error: a.Error, Reexecution: a.Reexecution, Claims: a.Claims,
				Details: a.Details, LeaseUntil: timePtr(a.LeaseUntil)}
			if !a.StartedAt.IsZero() && !a.FinishedAt.IsZero() {
				j.DurationMS = msPtr(a.FinishedAt.Sub(a.StartedAt))
			}
			if a.Worker != "" {
				s.Worker = a.Worker
			}
			s.AttemptDetails = append(s.AttemptDetails, j)
		}
		for _, w := range d.Waits {
			s.Waits = append(s.Waits, StepWaitJSON{From: w.From.UTC(), To: timePtr(w.To), Outcome: w.Outcome, Event: w.Event, Actor: w.Actor})
		}
	}
	return steps
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func msPtr(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}

// runWithSteps is a run as GET /runs/{id} answers it: with what each
// step did.
func (s *Server) runWithSteps(c *call, r *hephaestus.Run) (*Run, error) {
	out := runJSON(r, true)
	details, err := s.cfg.Client.Steps(c.ctx(), r.ID)
	if err != nil {
		return nil, err
	}
	out.Steps = stepTimes(out.Steps, details)
	return out, nil
}

// steps answers GET /runs/{id}/steps: what each step of the run did.
func (s *Server) steps(c *call) error {
	r, err := s.cfg.Client.GetRun(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	out, err := s.runWithSteps(c, r)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, &StepList{Steps: out.Steps})
}
