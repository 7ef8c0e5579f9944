package flowdoc

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
)

// GatesKey is the flow metadata key under which Compile records the
// approval gates of a document, a JSON object of step name to Gate; the
// client reads it back (Gates) to check who may decide a gate and to list
// the pending ones. A document may not use the key in its own metadata.
const GatesKey = "flowdoc.approvals"

// Gate is an approval gate of a compiled document.
type Gate struct {
	Step   string   `json:"step"`
	Prompt string   `json:"prompt,omitempty"`
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Deadline is how long the gate waits before its event expired; zero
	// means no deadline.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// Open reports whether the gate declares no assignees, so that anyone
// may decide it.
func (g *Gate) Open() bool { return len(g.Users) == 0 && len(g.Groups) == 0 }

// Allows reports whether an actor, member of groups, may decide the gate:
// the gate is open, names the actor among its users, or names one of the
// actor's groups.
func (g *Gate) Allows(actor string, groups []string) bool {
	if g.Open() || slices.Contains(g.Users, actor) {
		return true
	}
	for _, gr := range groups {
		if slices.Contains(g.Groups, gr) {
			return true
		}
	}
	return false
}

// Gates returns the approval gates a compiled document recorded in the
// flow's metadata, by step name; nil when the flow has none (a Go flow, or
// a document without gates).
func Gates(f *flow.Flow) (map[string]*Gate, error) {
	raw, ok := f.Metadata()[GatesKey]
	if !ok {
		return nil, nil
	}
	var out map[string]*Gate
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("flow %q: metadata %q does not hold approval gates: %w", f.Name(), GatesKey, err)
	}
	return out, nil
}

func gatesOf(d *Document) map[string]*Gate {
	var out map[string]*Gate
	for _, s := range d.steps {
		if a := s.approval; a != nil {
			if out == nil {
				out = map[string]*Gate{}
			}
			out[s.name] = &Gate{Step: s.name, Prompt: a.prompt, Users: a.users, Groups: a.groups, Deadline: a.deadline}
		}
	}
	return out
}

// checkGate reports an approval gate whose decisions (or deadline) lead
// nowhere.
func checkGate(c *errs, s *stepDoc) {
	routed := func(ev string) bool {
		return slices.ContainsFunc(s.on, func(r route) bool { return r.event == ev })
	}
	for _, ev := range []string{EventApproved, EventRejected} {
		if !routed(ev) {
			c.add(s.key, join(s.path, "on"), fmt.Sprintf("add on: {%s: <step or done>}", ev), "the approval gate does not route its event %q", ev)
		}
	}
	if s.approval.deadline > 0 && !routed(EventExpired) {
		c.add(s.approval.n, join(s.path, "on"), "add on: {expired: <step or done>}, or remove the deadline", "the gate has a deadline, but nothing routes its event \"expired\"")
	}
}
