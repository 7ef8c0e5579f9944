package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// Schedule is a schedule as the API shows it.
type Schedule struct {
	ID         string          `json:"id"`
	TargetKind string          `json:"target_kind"`
	TargetName string          `json:"target_name"`
	Cron       string          `json:"cron,omitempty"`
	Every      string          `json:"every,omitempty"`
	Anchor     *time.Time      `json:"anchor,omitempty"`
	TimeZone   string          `json:"time_zone,omitempty"`
	Jitter     string          `json:"jitter,omitempty"`
	Overlap    string          `json:"overlap"`
	CatchUp    *CatchUp        `json:"catch_up,omitempty"`
	Input      json.RawMessage `json:"input,omitempty" payload:""`
	Paused     bool            `json:"paused"`
	Declared   bool            `json:"declared"`
	NextFire   *time.Time      `json:"next_fire,omitempty"`
	LastTick   *time.Time      `json:"last_tick,omitempty"`
	LastRunID  string          `json:"last_run_id,omitempty"`
	Version    int64           `json:"version"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// CatchUp is what a schedule runs of the ticks it missed.
type CatchUp struct {
	Ticks  int    `json:"ticks"`
	Within string `json:"within,omitempty"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func optDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func scheduleJSON(s *hephaestus.Schedule) *Schedule {
	out := &Schedule{
		ID: s.ID, TargetKind: string(s.Target), TargetName: s.TargetName, Cron: s.Cron, Every: optDuration(s.Every),
		Anchor: optTime(s.Anchor), TimeZone: s.TimeZone, Jitter: optDuration(s.Jitter), Overlap: string(s.Overlap),
		Paused: s.Paused, Declared: s.Declared, NextFire: optTime(s.NextFire), LastTick: optTime(s.LastTick),
		LastRunID: s.LastRunID, Version: s.Version, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC(),
	}
	if s.CatchUp != nil {
		out.CatchUp = &CatchUp{Ticks: s.CatchUp.Ticks, Within: optDuration(s.CatchUp.Within)}
	}
	if raw, ok := s.Input.(json.RawMessage); ok {
		out.Input = raw
	}
	return out
}

// scheduleBody is the body of POST /schedules and PUT /schedules/{id}.
type scheduleBody struct {
	ID         string          `json:"id"`
	TargetKind string          `json:"target_kind"`
	TargetName string          `json:"target_name"`
	Cron       string          `json:"cron"`
	Every      duration        `json:"every"`
	Anchor     *timestamp      `json:"anchor"`
	TimeZone   string          `json:"time_zone"`
	Jitter     duration        `json:"jitter"`
	Overlap    string          `json:"overlap"`
	CatchUp    *catchUpBody    `json:"catch_up"`
	Input      json.RawMessage `json:"input"`
	Paused     bool            `json:"paused"`
}

type catchUpBody struct {
	Ticks  int      `json:"ticks"`
	Within duration `json:"within"`
}

func (b *scheduleBody) schedule() *hephaestus.Schedule {
	s := &hephaestus.Schedule{
		ID: b.ID, Target: hephaestus.TargetKind(b.TargetKind), TargetName: b.TargetName, Cron: b.Cron,
		Every: time.Duration(b.Every), TimeZone: b.TimeZone, Jitter: time.Duration(b.Jitter),
		Overlap: hephaestus.OverlapPolicy(b.Overlap), Paused: b.Paused,
	}
	if b.Anchor != nil {
		s.Anchor = time.Time(*b.Anchor)
	}
	if b.CatchUp != nil {
		s.CatchUp = &hephaestus.CatchUp{Ticks: b.CatchUp.Ticks, Within: time.Duration(b.CatchUp.Within)}
	}
	if len(b.Input) > 0 {
		s.Input = b.Input
	}
	return s
}

func (s *Server) createSchedule(c *call) error {
	var b scheduleBody
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.ID == "" {
		return fieldProblem("id", "is required")
	}
	c.target = b.ID
	sc, err := s.cfg.Client.CreateSchedule(c.ctx(), b.schedule())
	if err != nil {
		return err
	}
	c.w.Header().Set("Location", "/api/v1/schedules/"+url.PathEscape(sc.ID))
	return c.json(http.StatusCreated, scheduleJSON(sc))
}

func (s *Server) updateSchedule(c *call) error {
	var b scheduleBody
	if err := c.decode(&b, false); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	c.target = id
	if b.ID != "" && b.ID != id {
		return fieldProblem("id", "differs from the schedule id in the path")
	}
	b.ID = id
	sc, err := s.cfg.Client.UpdateSchedule(c.ctx(), b.schedule())
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, scheduleJSON(sc))
}

// ScheduleList is a page of schedules, by id.
type ScheduleList struct {
	Schedules []*Schedule `json:"schedules"`
	// Next is the after parameter of the next page; empty on the last.
	Next string `json:"next"`
}

func (s *Server) listSchedules(c *call) error {
	q := c.query()
	after, limit := q.str("after"), q.integer("limit", 100, 1, 1000)
	if err := q.err(); err != nil {
		return err
	}
	ss, err := s.cfg.Client.ListSchedules(c.ctx(), after, limit)
	if err != nil {
		return err
	}
	out := &ScheduleList{Schedules: make([]*Schedule, 0, len(ss))}
	for _, sc := range ss {
		out.Schedules = append(out.Schedules, scheduleJSON(sc))
	}
	if len(ss) == limit {
		out.Next = ss[len(ss)-1].ID
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) getSchedule(c *call) error {
	sc, err := s.cfg.Client.GetSchedule(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, scheduleJSON(sc))
}

func (s *Server) deleteSchedule(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	if err := s.cfg.Client.DeleteSchedule(c.ctx(), id); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseSchedule pauses (or resumes) a schedule and answers with it.
func (s *Server) pauseSchedule(pause bool) func(c *call) error {
	return func(c *call) error {
		id := c.r.PathValue("id")
		c.target = id
		fn := s.cfg.Client.ResumeSchedule
		if pause {
			fn = s.cfg.Client.PauseSchedule
		}
		if err := fn(c.ctx(), id); err != nil {
			return err
		}
		return s.getSchedule(c)
	}
}

func (s *Server) triggerSchedule(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	r, err := s.cfg.Client.TriggerSchedule(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, runJSON(r, true))
}

// Backfill lists the runs a backfill started.
type Backfill struct {
	RunIDs []string `json:"run_ids"`
}

func (s *Server) backfill(c *call) error {
	var b struct {
		From *timestamp `json:"from"`
		To   *timestamp `json:"to"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.From == nil {
		return fieldProblem("from", "is required")
	}
	if b.To == nil {
		return fieldProblem("to", "is required")
	}
	id := c.r.PathValue("id")
	c.target = id
	ids, err := s.cfg.Client.BackfillSchedule(c.ctx(), id, time.Time(*b.From), time.Time(*b.To))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, Backfill{RunIDs: nonNil(ids)})
}

func (s *Server) nextFires(c *call) error {
	q := c.query()
	n := q.integer("n", 5, 1, 1000)
	if err := q.err(); err != nil {
		return err
	}
	ts, err := s.cfg.Client.NextFireTimes(c.ctx(), c.r.PathValue("id"), n)
	if err != nil {
		return err
	}
	out := make([]time.Time, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.UTC())
	}
	return c.json(http.StatusOK, out)
}

// ScheduleRun is an entry of a schedule's tick log.
type ScheduleRun struct {
	Tick    time.Time `json:"tick"`
	Outcome string    `json:"outcome"`
	RunID   string    `json:"run_id,omitempty"`
	Status  string    `json:"status,omitempty"`
	Error   string    `json:"error,omitempty"`
}

func (s *Server) scheduleRuns(c *call) error {
	q := c.query()
	limit := q.integer("limit", 100, 1, 1000)
	if err := q.err(); err != nil {
		return err
	}
	rs, err := s.cfg.Client.ScheduleRuns(c.ctx(), c.r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	out := make([]ScheduleRun, 0, len(rs))
	for _, r := range rs {
		out = append(out, ScheduleRun{Tick: r.Tick.UTC(), Outcome: r.Outcome, RunID: r.RunID, Status: string(r.Status), Error: r.Error})
	}
	return c.json(http.StatusOK, out)
}
