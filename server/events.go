package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// SentEvent is an event sent to the engine, as the API gives it.
type SentEvent struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty" payload:""`
	At   time.Time       `json:"at"`
	Seq  int64           `json:"seq"`
	// Duplicate: the send found an event with this id stored already and
	// answers with it (nothing was written).
	Duplicate bool `json:"duplicate,omitempty"`
	// Firings are what the triggers did with the event (GET
	// /events/{id} only).
	Firings []*hephaestus.TriggerFiring `json:"firings,omitempty"`
	// Waits are the runs' waits this event matched (GET /events/{id}
	// only).
	Waits []*hephaestus.EventWait `json:"waits,omitempty"`
}

// EventWaitList is the waits for events of a run, oldest first.
type EventWaitList struct {
	Waits []*hephaestus.EventWait `json:"waits"`
}

// runEventWaits lists the waits for events of a run.
func (s *Server) runEventWaits(c *call) error {
	r, err := s.cfg.Client.GetRun(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	ws, err := s.cfg.Client.EventWaits(c.ctx(), r.ID)
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []*hephaestus.EventWait{}
	}
	return c.json(http.StatusOK, &EventWaitList{Waits: ws})
}

// SentEventList is a page of events, newest first.
type SentEventList struct {
	Events []*SentEvent `json:"events"`
	// Next is the before_seq parameter of the next page; 0 on the last.
	Next int64 `json:"next"`
}

type eventBody struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
	ID   string          `json:"id"`
}

func sentEventJSON(e *hephaestus.EventRecord) *SentEvent {
	return &SentEvent{ID: e.ID, Name: e.Name, Data: e.Data, At: e.At, Seq: e.Seq, Duplicate: e.Duplicate}
}

// sendEvent stores an event: 201 when stored, 200 with the stored one
// when its id was sent before.
func (s *Server) sendEvent(c *call) error {
	var b eventBody
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Name == "" {
		return fieldProblem("name", "is required")
	}
	c.target = b.Name
	e, err := s.cfg.Client.SendEvent(c.ctx(), b.Name, b.Data, &hephaestus.SendEventOptions{ID: b.ID})
	if err != nil {
		return err
	}
	c.w.Header().Set("Location", Prefix+"/events/"+url.PathEscape(e.ID))
	status := http.StatusCreated
	if e.Duplicate {
		status = http.StatusOK
	}
	return c.json(status, sentEventJSON(e))
}

func (s *Server) listEvents(c *call) error {
	q := c.query()
	o := &hephaestus.ListEventsOptions{
		Name: q.str("name"), After: q.time("after"), Before: q.time("before"), BeforeSeq: q.int64("before_seq"),
		Field: q.str("field"), Limit: q.integer("limit", 100, 1, hephaestus.MaxEventsPage),
	}
	if v := q.str("value"); v != "" {
		o.Value = json.RawMessage(v)
	}
	if err := q.err(); err != nil {
		return err
	}
	es, err := s.cfg.Client.ListEvents(c.ctx(), o)
	if err != nil {
		return err
	}
	out := &SentEventList{Events: make([]*SentEvent, 0, len(es))}
	for _, e := range es {
		out.Events = append(out.Events, sentEventJSON(e))
	}
	if len(es) == o.Limit {
		out.Next = es[len(es)-1].Seq
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) getEvent(c *call) error {
	e, err := s.cfg.Client.GetEvent(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	out := sentEventJSON(e)
	if out.Firings, err = s.cfg.Client.EventFirings(c.ctx(), e.ID); err != nil {
		return err
	}
	if out.Waits, err = s.cfg.Client.EventWaitsMatched(c.ctx(), e.ID); err != nil {
		return err
	}
	return c.json(http.StatusOK, out)
}
