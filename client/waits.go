package client

import "time"

// Wait is one thing a run waits for (Run.WaitingFor); fields that do not
// apply to the kind are zero. Kinds: signal, update, timer, gate, step,
// child, queue_paused, queue_limit, concurrency_key, rate_limit,
// no_worker, scheduled.
type Wait struct {
	Kind   string     `json:"kind"`
	Name   string     `json:"name,omitempty"`
	Step   string     `json:"step,omitempty"`
	Queue  string     `json:"queue,omitempty"`
	RunID  string     `json:"run_id,omitempty"`
	Due    *time.Time `json:"due,omitempty"`
	Limit  int        `json:"limit,omitempty"`
	Users  []string   `json:"users,omitempty"`
	Groups []string   `json:"groups,omitempty"`
	Prompt string     `json:"prompt,omitempty"`
	Events []string   `json:"events,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
}
