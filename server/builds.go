package server

import (
	"net/http"
	"time"
)

// WorkflowBuild is a build of a code-first workflow: its open runs and
// live workers (docs/deploying.md#rolling-deploys-of-workflows).
type WorkflowBuild struct {
	// BuildID is "" for the open runs that record no build.
	BuildID     string `json:"build_id"`
	OpenRuns    int    `json:"open_runs"`
	LiveWorkers int    `json:"live_workers"`
	// Newest: the build new runs pin to when a process without the
	// workflow starts them.
	Newest bool `json:"newest"`
	// Draining: open runs are left on it and it is not the newest.
	Draining  bool       `json:"draining"`
	Retired   bool       `json:"retired"`
	RetiredAt *time.Time `json:"retired_at,omitempty"`
}

func (s *Server) workflowBuilds(c *call) error {
	bs, err := s.cfg.Client.WorkflowBuilds(c.ctx(), c.r.PathValue("name"))
	if err != nil {
		return err
	}
	out := make([]WorkflowBuild, 0, len(bs))
	for _, b := range bs {
		out = append(out, WorkflowBuild{BuildID: b.BuildID, OpenRuns: b.OpenRuns, LiveWorkers: b.LiveWorkers, Newest: b.Newest,
			Draining: b.Draining, Retired: !b.RetiredAt.IsZero(), RetiredAt: optTime(b.RetiredAt)})
	}
	return c.json(http.StatusOK, out)
}

// retireBuild retires a build of a workflow (409 while it has open runs)
// and answers with the workflow's builds.
func (s *Server) retireBuild(c *call) error {
	name, build := c.r.PathValue("name"), c.r.PathValue("build")
	c.target = name + "@" + build
	if err := s.cfg.Client.RetireBuild(c.ctx(), name, build); err != nil {
		return err
	}
	return s.workflowBuilds(c)
}
