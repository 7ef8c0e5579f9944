package hephaestus

import (
	"time"

	"github.com/hephaestus-go/hephaestus/internal/maintenance"
)

// RetentionPolicy keeps the finished runs of some workflows for times of
// their own (see Config.RetentionPolicies). The sweep deletes them in
// small batches, each its own short transaction, skipping runs other
// transactions hold; it never deletes a run that is pending, running or
// waiting, nor a finished run that still has work to do.
type RetentionPolicy struct {
	// Workflows names the flows, workflows, documents and job kinds the
	// policy covers.
	Workflows []string
	// Queue, when set, also covers every registered flow, document and
	// job kind with a step on this queue (looked up at each sweep).
	Queue string
	// Completed is how long completed runs (and runs continued as new)
	// are kept after they finish; Failed how long failed and cancelled
	// runs are. 0 means Config.Retention (0 there: kept); a negative
	// duration keeps them forever.
	Completed time.Duration
	Failed    time.Duration
}

func (c *Config) retentionPolicies() []maintenance.Policy {
	out := make([]maintenance.Policy, len(c.RetentionPolicies))
	for i, p := range c.RetentionPolicies {
		out[i] = maintenance.Policy{Workflows: p.Workflows, Queue: p.Queue, Completed: p.Completed, Failed: p.Failed}
	}
	return out
}
