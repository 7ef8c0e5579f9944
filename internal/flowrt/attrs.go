package flowrt

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
)

// SearchAttributes returns the search attributes that the flows known
// here (registered, and stubs from the catalog) declare, by name, or the
// flow's own when name is not empty: what a filter of a list may name
// (attrfilter.Parse). A name that two flows declare with different types
// is an error that names both.
func (r *Runtime) SearchAttributes(name string) (map[string]store.AttrType, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]store.AttrType{}
	by := map[string]string{}
	for _, group := range []map[string]map[int]*flow.Flow{r.flows, r.stubs} {
		for _, fname := range slices.Sorted(maps.Keys(group)) {
			if name != "" && fname != name {
				continue
			}
			for _, v := range slices.Sorted(maps.Keys(group[fname])) {
				for a, t := range group[fname][v].SearchAttributes() {
					if old, ok := out[a]; ok && old != t {
						return nil, fmt.Errorf("search attribute %s is a %s in flow %s and a %s in flow %s version %d: filter one flow", a, old, by[a], t, fname, v)
					}
					out[a], by[a] = t, fname
				}
			}
		}
	}
	return out, nil
}
