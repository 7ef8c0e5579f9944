package flowrt

import (
	"maps"
	"slices"
)

// Versions returns the registered versions of a flow, ascending (none
// when it is not registered).
func (r *Runtime) Versions(name string) []int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.flows[name]))
}
