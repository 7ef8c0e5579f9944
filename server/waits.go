package server

import (
	"time"

	"github.com/hephaestus-go/hephaestus"
)

// Wait is one thing a run waits for, as GET /runs/{id} shows it
// (hephaestus.Wait); fields that do not apply to the kind are absent.
type Wait struct {
	Kind   string    `json:"kind"`
	Name   string    `json:"name,omitempty"`
	Step   string    `json:"step,omitempty"`
	Queue  string    `json:"queue,omitempty"`
	RunID  string    `json:"run_id,omitempty"`
	Due    time.Time `json:"due,omitzero"`
	Limit  int       `json:"limit,omitempty"`
	Users  []string  `json:"users,omitempty"`
	Groups []string  `json:"groups,omitempty"`
	Prompt string    `json:"prompt,omitempty"`
	Events []string  `json:"events,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

func waitsJSON(ws []hephaestus.Wait) []Wait {
	out := make([]Wait, 0, len(ws))
	for _, w := range ws {
		out = append(out, Wait{Kind: string(w.Kind), Name: w.Name, Step: w.Step, Queue: w.Queue, RunID: w.RunID, Due: w.Due.UTC(),
			Limit: w.Limit, Users: w.Users, Groups: w.Groups, Prompt: w.Prompt, Events: w.Events, Since: w.Since.UTC()})
	}
	return out
}
