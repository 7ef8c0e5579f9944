package server

import (
	"net/http"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// Trigger is a stored trigger, as the API gives it: declared in code by a
// program, or managed at run time through the API.
type Trigger struct {
	Name       string `json:"name"`
	Event      string `json:"event"`
	TargetKind string `json:"target_kind"`
	TargetName string `json:"target_name"`
	Filter     string `json:"filter,omitempty"`
	Input      string `json:"input,omitempty"`
	// BusinessKey and ConcurrencyKey are CEL expressions of the run's
	// keys.
	BusinessKey    string `json:"business_key,omitempty"`
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// Key, Debounce, Throttle and Batch are the trigger's flow control
	// over its events (durations as "30s").
	Key       string           `json:"key,omitempty"`
	Debounce  string           `json:"debounce,omitempty"`
	Throttle  *TriggerThrottle `json:"throttle,omitempty"`
	Batch     *TriggerBatch    `json:"batch,omitempty"`
	Declared  bool             `json:"declared"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// TriggerThrottle starts at most Limit runs per Period per key.
type TriggerThrottle struct {
	Limit  int    `json:"limit"`
	Period string `json:"period"`
}

// TriggerBatch collects up to Size events, or those within Window of the
// first, into one run.
type TriggerBatch struct {
	Size   int    `json:"size"`
	Window string `json:"window"`
}

// TriggerList is every stored trigger, by name.
type TriggerList struct {
	Triggers []*Trigger `json:"triggers"`
}

type triggerBody struct {
	Event          string   `json:"event"`
	TargetKind     string   `json:"target_kind"`
	TargetName     string   `json:"target_name"`
	Filter         string   `json:"filter"`
	Input          string   `json:"input"`
	BusinessKey    string   `json:"business_key"`
	ConcurrencyKey string   `json:"concurrency_key"`
	Key            string   `json:"key"`
	Debounce       duration `json:"debounce"`
	Throttle       *struct {
		Limit  int      `json:"limit"`
		Period duration `json:"period"`
	} `json:"throttle"`
	Batch *struct {
		Size   int      `json:"size"`
		Window duration `json:"window"`
	} `json:"batch"`
}

// trigger is the library's trigger of a put's body.
func (b *triggerBody) trigger(name string) *hephaestus.Trigger {
	t := &hephaestus.Trigger{Name: name, Event: b.Event, Target: hephaestus.TargetKind(b.TargetKind), TargetName: b.TargetName, Filter: b.Filter,
		Input: b.Input, BusinessKey: b.BusinessKey, ConcurrencyKey: b.ConcurrencyKey, Key: b.Key, Debounce: time.Duration(b.Debounce)}
	if b.Throttle != nil {
		t.Throttle = &hephaestus.Throttle{Limit: b.Throttle.Limit, Period: time.Duration(b.Throttle.Period)}
	}
	if b.Batch != nil {
		t.Batch = &hephaestus.Batch{Size: b.Batch.Size, Window: time.Duration(b.Batch.Window)}
	}
	return t
}

func triggerJSON(t *hephaestus.StoredTrigger) *Trigger {
	out := &Trigger{Name: t.Name, Event: t.Event, TargetKind: string(t.Target), TargetName: t.TargetName,
		Filter: t.Filter, Input: t.Input, BusinessKey: t.BusinessKey, ConcurrencyKey: t.ConcurrencyKey, Key: t.Key,
		Declared: t.Declared, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
	if t.Debounce > 0 {
		out.Debounce = t.Debounce.String()
	}
	if t.Throttle != nil {
		out.Throttle = &TriggerThrottle{Limit: t.Throttle.Limit, Period: t.Throttle.Period.String()}
	}
	if t.Batch != nil {
		out.Batch = &TriggerBatch{Size: t.Batch.Size, Window: t.Batch.Window.String()}
	}
	return out
}

func (s *Server) listTriggers(c *call) error {
	ts, err := s.cfg.Client.ListTriggers(c.ctx())
	if err != nil {
		return err
	}
	out := &TriggerList{Triggers: make([]*Trigger, len(ts))}
	for i, t := range ts {
		out.Triggers[i] = triggerJSON(t)
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) getTrigger(c *call) error {
	t, err := s.cfg.Client.GetTrigger(c.ctx(), c.r.PathValue("name"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, triggerJSON(t))
}

// putTrigger creates or replaces a managed trigger: 201 when new, 200
// when replaced; 409 for a trigger declared in code.
func (s *Server) putTrigger(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	var b triggerBody
	if err := c.decode(&b, false); err != nil {
		return err
	}
	for _, f := range [...][2]string{{"event", b.Event}, {"target_kind", b.TargetKind}, {"target_name", b.TargetName}} {
		if f[1] == "" {
			return fieldProblem(f[0], "is required")
		}
	}
	created, err := s.cfg.Client.PutTrigger(c.ctx(), b.trigger(name))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	t, err := s.cfg.Client.GetTrigger(c.ctx(), name)
	if err != nil {
		return err
	}
	return c.json(status, triggerJSON(t))
}

func (s *Server) deleteTrigger(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	if err := s.cfg.Client.DeleteTrigger(c.ctx(), name); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// listTriggerGroups pages the groups of a trigger that debounces,
// throttles or batches its events, oldest first.
func (s *Server) listTriggerGroups(c *call) error {
	q := c.query()
	o := &hephaestus.ListTriggerGroupsOptions{Status: q.str("status"), After: q.int64("after"),
		Limit: q.integer("limit", 100, 1, hephaestus.MaxTriggerGroupsPage)}
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.cfg.Client.ListTriggerGroups(c.ctx(), c.r.PathValue("name"), o)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}
