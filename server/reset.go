package server

import (
	"errors"
	"fmt"
	"net/http"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store"
)

// maxResetKey bounds the Idempotency-Key of a reset: the store's key
// limit less the prefix the reset's key is stored under.
const maxResetKey = store.MaxKeyLen - len("reset:")

// resetRun resets a flow, document or job run to a step (POST
// /runs/{id}/reset {"step": ...}): the step and every step after it run
// again, the other steps keep their outputs. The history records
// run_reset with the authenticated principal. An Idempotency-Key header
// makes the call idempotent: repeated with the same key, it resets
// nothing more and answers the run as it is.
func (s *Server) resetRun(c *call) error {
	var b struct {
		Step string `json:"step"`
	}
	if err := c.decode(&b, true); err != nil {
		return err
	}
	id := c.r.PathValue("id")
	c.target = id
	c.detail = "step " + b.Step
	key := c.r.Header.Get("Idempotency-Key")
	if len(key) > maxResetKey {
		return badRequest(fmt.Sprintf("the Idempotency-Key header is %d bytes long, more than %d", len(key), maxResetKey))
	}
	r, err := s.cfg.Client.ResetRun(c.ctx(), id, b.Step, &hephaestus.ResetOptions{By: c.principal(), Key: key})
	if errors.Is(err, hephaestus.ErrNotResettable) {
		return withFix(err, fmt.Sprintf("reset a flow, document or job run to a step that ran (heph show %s lists them); start a new run of a cancelled one", id))
	}
	if err != nil {
		return err
	}
	out, err := s.runWithSteps(c, r)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, out)
}
