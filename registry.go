package hephaestus

import (
	"fmt"
	"sync"

	"github.com/hephaestus-go/hephaestus/flow"
)

// registry holds the registered flows by name and version.
type registry struct {
	mu    sync.RWMutex
	flows map[string]map[int]*flow.Flow
}

func (r *registry) add(f *flow.Flow) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.flows == nil {
		r.flows = map[string]map[int]*flow.Flow{}
	}
	vs := r.flows[f.Name()]
	if vs == nil {
		vs = map[int]*flow.Flow{}
		r.flows[f.Name()] = vs
	}
	if old, ok := vs[f.Version()]; ok {
		if old.Shape() != f.Shape() {
			return fmt.Errorf("register flow %q version %d: %w; give the changed flow a new version", f.Name(), f.Version(), ErrFlowConflict)
		}
	}
	vs[f.Version()] = f
	return nil
}

// get returns a version of a flow; version 0 means the latest.
func (r *registry) get(name string, version int) (*flow.Flow, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.flows[name]
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %q is not registered", ErrFlowNotFound, name)
	}
	if version == 0 {
		for v := range vs {
			version = max(version, v)
		}
	}
	f, ok := vs[version]
	if !ok {
		return nil, fmt.Errorf("%w: %q has no version %d registered", ErrFlowNotFound, name, version)
	}
	return f, nil
}

// handlers returns the handler of every registered flow version.
func (r *registry) handlers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for name, vs := range r.flows {
		for v := range vs {
			out = append(out, flowHandler(name, v))
		}
	}
	return out
}
