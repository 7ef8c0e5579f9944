package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// runRoutePrefix starts the path of every route that takes a run as {id}.
const runRoutePrefix = Prefix + "/runs/{id}"

// takesRun reports whether a route's {id} names a run.
func takesRun(path string) bool {
	return path == runRoutePrefix || strings.HasPrefix(path, runRoutePrefix+"/")
}

// activeStatuses are the statuses of a run that still holds work.
var activeStatuses = []hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusRunning, hephtype.StatusWaiting}

// resolveRun is the one place where the {id} of a run route is read: a
// run id as it is, or a business id "key::value" (with its suffix under
// the key scope none), which names the active run that holds it if any,
// else the newest run that held it (a business id is unique per workflow
// while active, so two workflows, or runs over time, may share one). The
// handler then sees the run's id in {id}. A run that does not exist is a
// 404 saying what to do.
func (s *Server) resolveRun(c *call) error {
	ref := c.r.PathValue("id")
	c.target = ref // for the audit of a call that ends here; the handler sets the id
	id, err := s.runID(c, ref)
	if err != nil {
		return err
	}
	c.r.SetPathValue("id", id)
	return nil
}

// runID returns the id of the run that ref names (see resolveRun).
func (s *Server) runID(c *call, ref string) (string, error) {
	if _, err := s.cfg.Store.GetRun(c.ctx(), ref); err == nil {
		return ref, nil
	} else if !errors.Is(err, store.ErrRunNotFound) {
		return "", err
	}
	if _, _, err := businesskey.Parse(ref); err != nil {
		return "", runNotFound("run "+ref+" not found", "list runs with heph ls")
	}
	for _, statuses := range [][]hephtype.RunStatus{activeStatuses, nil} {
		page, err := s.cfg.Store.ListRuns(c.ctx(), &store.ListRunsParams{BusinessID: ref, Statuses: statuses, Limit: 1})
		if err != nil {
			return "", err
		}
		if len(page.Runs) > 0 {
			return page.Runs[0].ID, nil
		}
	}
	return "", runNotFound("no run has the id or business id "+ref, "find runs with heph ls --search "+ref)
}

// runNotFound is the 404 of a run reference that names no run: the
// detail ends with the fix, so that it reads as one line where the fix
// is not shown apart (heph prints a fix the detail holds only once).
func runNotFound(what, fix string) *Problem {
	return &Problem{Status: http.StatusNotFound, Kind: kindNotFound, Detail: what + ": " + fix, Fix: fix}
}
