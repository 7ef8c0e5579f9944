package server

import (
	"math"
	"net/http"

	"github.com/hephaestus-go/hephaestus"
)

// logs answers a run's step logs (GET /runs/{id}/logs): filtered by
// step, index, attempt and level, after a cursor, and with ?wait a long
// poll for the next record.
func (s *Server) logs(c *call) error {
	q := c.query()
	o := hephaestus.LogsOptions{Step: q.str("step"), Level: q.str("level"), After: q.int64("after"),
		Attempt: q.integer("attempt", 0, 0, math.MaxInt32), Limit: q.integer("limit", 0, 0, 1000)}
	if q.str("index") != "" {
		i := q.integer("index", 0, 0, math.MaxInt32)
		o.Index = &i
	}
	if o.Level != "" {
		if _, err := hephaestus.ParseLogLevel(o.Level); err != nil {
			q.fail("level", "%q is not one of DEBUG, INFO, WARN and ERROR", o.Level)
		}
	}
	wait := q.dur("wait", MaxWait)
	if err := q.err(); err != nil {
		return err
	}
	o.Wait = s.longPoll(wait)
	if o.Step != "" {
		// A step the run does not have is a mistake to point out, not
		// an empty page to wait on.
		run, err := s.cfg.Client.GetRun(c.ctx(), c.r.PathValue("id"))
		if err != nil {
			return err
		}
		if err := unknownStep(run, o.Step, nil); err != nil {
			return err
		}
	}
	page, err := s.cfg.Client.RunLogs(c.ctx(), c.r.PathValue("id"), o)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}
