package replay

import (
	"slices"
	"time"
)

// The kinds of Wait.
const (
	WaitSignal   = "signal"
	WaitUpdate   = "update"
	WaitTimer    = "timer"
	WaitActivity = "activity"
	WaitChild    = "child"
)

// Wait is one thing a blocked unit of the workflow waits for: what the
// run's snapshot records at each decision, so that readers learn what the
// run is blocked on without replaying it.
type Wait struct {
	// Kind is one of the Wait* constants.
	Kind string `json:"kind"`
	// Name: the signal's or update's name, the activity's name, the
	// child's workflow; empty for a timer.
	Name string `json:"name,omitempty"`
	// Seq is the command's sequence number (activity, timer, child).
	Seq int `json:"seq,omitempty"`
	// Due is when a timer fires.
	Due time.Time `json:"due,omitzero"`
}

// blockFor blocks like block, recording what the unit waits for.
func (co *coroutine) blockFor(waits []Wait, wait string, cond func() bool) {
	co.waits = waits
	co.block(wait, cond)
	co.waits = nil
}

// Waits returns what the units of the workflow wait for after the last
// activation: for each unit blocked, in creation order, its waits; the
// same signal or update name once. Empty when the run has finished.
func (in *Instance) Waits() []Wait {
	if in.finished {
		return nil
	}
	var out []Wait
	for _, co := range in.cos {
		if co.done || co.cond == nil {
			continue
		}
		for _, w := range co.waits {
			if (w.Kind == WaitSignal || w.Kind == WaitUpdate) && slices.ContainsFunc(out, func(o Wait) bool { return o.Kind == w.Kind && o.Name == w.Name }) {
				continue
			}
			out = append(out, w)
		}
	}
	return out
}

// phaseWaits lists what a phase waits for: its signals and updates, by
// name, and its timeout timer.
func (p *phase) waits(due time.Time) []Wait {
	var out []Wait
	for _, name := range sortedNames(p.signals) {
		out = append(out, Wait{Kind: WaitSignal, Name: name})
	}
	for _, name := range sortedNames(p.updates) {
		out = append(out, Wait{Kind: WaitUpdate, Name: name})
	}
	if p.timer != nil && !p.timer.done {
		out = append(out, Wait{Kind: WaitTimer, Seq: p.timer.seq, Due: due})
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
