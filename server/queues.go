package server

import (
	"net/http"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// Queue is a queue's configuration and figures.
type Queue struct {
	Name       string       `json:"name"`
	Configured bool         `json:"configured"`
	Paused     bool         `json:"paused"`
	Options    QueueOptions `json:"options"`
	// Ready tasks are claimable now: the queue's depth.
	Ready     int `json:"ready"`
	Scheduled int `json:"scheduled"`
	Leased    int `json:"leased"`
	Running   int `json:"running"`
	// OldestReadyAge is how long the oldest ready task has waited
	// (a duration string), and OldestReadySeconds the same in seconds.
	OldestReadyAge     string     `json:"oldest_ready_age"`
	OldestReadySeconds float64    `json:"oldest_ready_seconds"`
	RunningByKey       []KeyCount `json:"running_by_key"`
	RateWindow         *time.Time `json:"rate_window,omitempty"`
	RateWindowStarts   int        `json:"rate_window_starts"`
	UpdatedAt          *time.Time `json:"updated_at,omitempty"`
}

// KeyCount is a count for a concurrency key.
type KeyCount struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
}

// QueueOptions are a queue's flow-control limits; zero values do not
// limit.
type QueueOptions struct {
	MaxRunning       int            `json:"max_running"`
	MaxRunningPerKey int            `json:"max_running_per_key"`
	Rate             *RateLimit     `json:"rate,omitempty"`
	KeyRate          *RateLimit     `json:"key_rate,omitempty"`
	Fair             bool           `json:"fair"`
	Weights          map[string]int `json:"weights,omitempty"`
}

// RateLimit is at most Limit starts in each window of Period.
type RateLimit struct {
	Limit  int      `json:"limit"`
	Period duration `json:"period"`
}

func rateJSON(r hephaestus.RateLimit) *RateLimit {
	if r.Limit == 0 && r.Period == 0 {
		return nil
	}
	return &RateLimit{Limit: r.Limit, Period: duration(r.Period)}
}

func rateOf(r *RateLimit) hephaestus.RateLimit {
	if r == nil {
		return hephaestus.RateLimit{}
	}
	return hephaestus.RateLimit{Limit: r.Limit, Period: time.Duration(r.Period)}
}

func queueJSON(q *hephaestus.QueueInfo) *Queue {
	out := &Queue{
		Name: q.Name, Configured: q.Configured, Paused: q.Paused,
		Options: QueueOptions{
			MaxRunning: q.Options.MaxRunning, MaxRunningPerKey: q.Options.MaxRunningPerKey, Rate: rateJSON(q.Options.Rate),
			KeyRate: rateJSON(q.Options.KeyRate), Fair: q.Options.Fair, Weights: q.Options.Weights,
		},
		Ready: q.Ready, Scheduled: q.Scheduled, Leased: q.Leased, Running: q.Running,
		OldestReadyAge: q.OldestReadyAge.String(), OldestReadySeconds: q.OldestReadyAge.Seconds(),
		RunningByKey: make([]KeyCount, 0, len(q.RunningByKey)), RateWindow: optTime(q.RateWindow),
		RateWindowStarts: q.RateWindowStarts, UpdatedAt: optTime(q.UpdatedAt),
	}
	for _, k := range q.RunningByKey {
		out.RunningByKey = append(out.RunningByKey, KeyCount{Key: k.Key, Count: k.Count})
	}
	return out
}

func (s *Server) listQueues(c *call) error {
	qs, err := s.cfg.Client.ListQueues(c.ctx())
	if err != nil {
		return err
	}
	out := make([]*Queue, 0, len(qs))
	for _, q := range qs {
		out = append(out, queueJSON(q))
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) getQueue(c *call) error {
	q, err := s.cfg.Client.GetQueue(c.ctx(), c.r.PathValue("name"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, queueJSON(q))
}

func (s *Server) setQueue(c *call) error {
	var b QueueOptions
	if err := c.decode(&b, false); err != nil {
		return err
	}
	name := c.r.PathValue("name")
	c.target = name
	opts := hephaestus.QueueOptions{
		MaxRunning: b.MaxRunning, MaxRunningPerKey: b.MaxRunningPerKey, Rate: rateOf(b.Rate), KeyRate: rateOf(b.KeyRate),
		Fair: b.Fair, Weights: b.Weights,
	}
	if err := s.cfg.Client.SetQueue(c.ctx(), name, opts); err != nil {
		return err
	}
	return s.getQueue(c)
}

// pauseQueue pauses (or resumes) a queue and answers with it.
func (s *Server) pauseQueue(pause bool) func(c *call) error {
	return func(c *call) error {
		name := c.r.PathValue("name")
		c.target = name
		fn := s.cfg.Client.ResumeQueue
		if pause {
			fn = s.cfg.Client.PauseQueue
		}
		if err := fn(c.ctx(), name); err != nil {
			return err
		}
		return s.getQueue(c)
	}
}
