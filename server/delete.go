package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// DeletedRun is the answer of DELETE /runs/{id}: the run that was
// deleted, as it was.
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

// deleteRun deletes a run with its history, tasks, requests and step
// logs. An active run (or a finished one with work left) is a 409 unless
// ?force=true. A run that is not there — deleted already, say by a first
// attempt of this request whose answer was lost — is a 404, as for any
// route of a run: the caller that retries a delete takes 404 as done.
func (s *Server) deleteRun(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	q := c.query()
	force := false
	if v := q.str("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			q.fail("force", "expected true or false, got %q", v)
		}
		force = b
	}
	if err := q.err(); err != nil {
		return err
	}
	if force {
		c.detail = "forced"
	}
	// The kind's name (document, job …) is read from the run's metadata,
	// which never changes.
	kind := ""
	if r, err := s.cfg.Client.GetRun(c.ctx(), id); err == nil {
		kind = string(r.KindName())
	}
	d, err := s.cfg.Client.DeleteRun(c.ctx(), id, &hephaestus.DeleteOptions{Force: force})
	if errors.Is(err, hephaestus.ErrRunActive) {
		return &Problem{Status: http.StatusConflict, Kind: kindConflict, Detail: err.Error(),
			Fix: fmt.Sprintf("cancel the run first (heph cancel %s), or delete it anyway with force=true (heph delete %s --force)", id, id)}
	}
	if errors.Is(err, hephaestus.ErrRunNotFound) {
		return runNotFound("run "+id+" not found", "it may have been deleted already: list runs with heph ls")
	}
	if err != nil {
		return err
	}
	if kind == "" {
		kind = string(d.Kind)
	}
	return c.json(http.StatusOK, &DeletedRun{ID: d.ID, Workflow: d.Workflow, Kind: kind, Status: string(d.Status), Tasks: d.Tasks, Forced: force})
}
