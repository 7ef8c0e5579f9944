package server

import (
	"errors"
	"fmt"
	"net/http"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// pauseRun pauses a run (POST /runs/{id}/pause): none of its tasks is
// claimed until it is unpaused; with cancel_running, the tasks running
// now are stopped too, to run again after unpause. The history records
// run_paused with the authenticated principal. A paused run answers 200
// again, with nothing recorded.
func (s *Server) pauseRun(c *call) error {
	var b struct {
		CancelRunning bool `json:"cancel_running"`
	}
	if err := c.decode(&b, true); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	c.target = id
	if b.CancelRunning {
		c.detail = "cancel_running"
	}
	err := s.cfg.Client.PauseRun(c.ctx(), id, &hephaestus.PauseOptions{CancelRunning: b.CancelRunning, By: c.principal()})
	return s.pausedAnswer(c, id, err)
}

// unpauseRun unpauses a run (POST /runs/{id}/unpause); a run that is not
// paused answers 200, with nothing recorded.
func (s *Server) unpauseRun(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	err := s.cfg.Client.UnpauseRun(c.ctx(), id, &hephaestus.UnpauseOptions{By: c.principal()})
	return s.pausedAnswer(c, id, err)
}

// pausedAnswer answers a pause or an unpause with the run as it is now.
func (s *Server) pausedAnswer(c *call, id string, err error) error {
	if errors.Is(err, hephaestus.ErrRunFinished) {
		return withFix(err, fmt.Sprintf("a finished run runs nothing more, so there is nothing to pause or unpause: see its outcome with heph show %s", id))
	}
	if err != nil {
		return err
	}
	r, err := s.cfg.Client.GetRun(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, runJSON(r, true))
}
