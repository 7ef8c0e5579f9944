package flowrt

import (
	"maps"
	"slices"

	"github.com/hephaestus-go/hephaestus/flow"
)

// FlowsOnQueue returns the names of the registered flows (documents and
// job kinds included) with a step, in any registered version, on queue.
func (r *Runtime) FlowsOnQueue(queue string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for name, vs := range r.flows {
		if slices.ContainsFunc(slices.Collect(maps.Values(vs)), func(f *flow.Flow) bool {
			return slices.ContainsFunc(f.Steps(), func(s flow.StepSpec) bool { return s.Queue == queue })
		}) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
