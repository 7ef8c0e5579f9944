package server

import (
	"net/http"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Worker is a live worker: a process running a Client, or a worker of
// the HTTP protocol.
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

func (s *Server) listWorkers(c *call) error {
	ws, err := s.cfg.Store.ListWorkers(c.ctx(), &store.ListWorkersParams{Now: s.cfg.Clock.Now()})
	if err != nil {
		return err
	}
	out := make([]Worker, 0, len(ws))
	for _, w := range ws {
		out = append(out, Worker{ID: w.ID, Queues: nonNil(w.Queues), Handlers: nonNil(w.Handlers), BuildID: w.BuildID, Host: w.Host, PID: w.PID,
			StartedAt: optTime(w.StartedAt), LastHeartbeat: w.SeenAt.UTC(), ExpiresAt: w.ExpiresAt.UTC()})
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) healthz(c *call) error {
	return c.json(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the store answers, 503 otherwise.
func (s *Server) readyz(c *call) error {
	if _, err := s.cfg.Store.ListWorkers(c.ctx(), &store.ListWorkersParams{Now: s.cfg.Clock.Now()}); err != nil {
		s.cfg.Logger.Warn("server: not ready: the store does not answer", "err", err)
		return &Problem{Status: http.StatusServiceUnavailable, Kind: kindUnavailable, Detail: "the store does not answer"}
	}
	return c.json(http.StatusOK, map[string]string{"status": "ready"})
}
