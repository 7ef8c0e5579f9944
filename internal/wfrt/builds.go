package wfrt

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Builds (docs/deploying.md#rolling-deploys-of-workflows): every process has a build id
// (Config.BuildID). A run of a pinned workflow (workflow.Pinned, the
// default) records the build that started it in its state
// (wfState.Build) and in store.Run.BuildID; its decision tasks and its
// requests carry the handler store.WorkflowBuildHandler, which only
// workers of that build register, and a worker of another build that
// delivers an outcome to it (an activity's, a fired timer's, a child's)
// appends the outcome with a decision task instead of deciding. A run of a workflow
// that auto-upgrades (workflow.AutoUpgrade) has no pin: any worker with
// the workflow decides it, and the run records the build that decided it
// last.

// errWrongBuild refuses a decision of a run pinned to another build.
var errWrongBuild = errors.New("the run is pinned to another build")

// versioned is implemented by a *workflow.Definition.
type versioned interface {
	VersioningBehavior() workflow.Versioning
}

// autoUpgrades reports whether a registered definition auto-upgrades.
func autoUpgrades(def any) bool {
	v, ok := def.(versioned)
	return ok && v.VersioningBehavior() == workflow.AutoUpgrade
}

// autoUpgrade reports whether the workflow, registered here, auto-upgrades.
func (r *wfRegistry) autoUpgrade(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.auto[name]
}

// handler is the handler of the run's decision tasks and requests.
func (s *wfState) handler(workflow string) string {
	if s.Build != "" {
		return store.WorkflowBuildHandler(workflow, s.Build)
	}
	return store.WorkflowHandler(workflow)
}

// timerPayload is the Payload of the run's timer tasks: any worker fires
// them, and the one that does decides at once only if it is of the build
// the run is pinned to (nil when it is not pinned).
type timerPayload struct {
	Build string `json:"build,omitempty"`
}

func (s *wfState) timerPayload() json.RawMessage {
	if s.Build == "" {
		return nil
	}
	return mustJSON(timerPayload{Build: s.Build})
}

// timerPin returns the build a timer task's run is pinned to.
func timerPin(t *store.Task) string {
	var p timerPayload
	if len(t.Payload) > 0 && json.Unmarshal(t.Payload, &p) == nil {
		return p.Build
	}
	return ""
}

// mayDecide reports whether this process may decide a run pinned to pin.
func (c *Runtime) mayDecide(pin string) bool { return pin == "" || pin == c.cfg.BuildID }

// mayDecideRun is mayDecide for a stored run.
func (c *Runtime) mayDecideRun(r *store.Run) bool { return c.mayDecide(pinOf(r)) }

// pinOf returns the build a stored run is pinned to ("" when its state
// does not decode: the decision reports that).
func pinOf(r *store.Run) string {
	st, err := loadWfState(r)
	if err != nil {
		return ""
	}
	return st.Build
}

// startBuild decides the pin and the recorded build of a new run of a
// workflow: this process's build when it has the workflow (no pin when the
// workflow auto-upgrades); else the newest live build that serves the
// workflow's pinned runs; else none, and the run waits, marked unserved,
// for a worker that has the workflow.
func (c *Runtime) startBuild(ctx context.Context, name string) (pin, build string) {
	if _, ok := c.reg.workflow(name); ok {
		if c.reg.autoUpgrade(name) {
			return "", c.cfg.BuildID
		}
		return c.cfg.BuildID, c.cfg.BuildID
	}
	if c.cfg.LiveBuild != nil {
		if b := c.cfg.LiveBuild(ctx, name); b != "" {
			return b, b
		}
	}
	return "", ""
}

// childBuild decides the pin of a child run: the parent's pinned build
// (parentPin), unless this process knows the child's workflow to
// auto-upgrade; a child of a run that is not pinned starts as any run.
func (c *Runtime) childBuild(ctx context.Context, name, parentPin string) (pin, build string) {
	if parentPin == "" || c.reg.autoUpgrade(name) {
		return c.startBuild(ctx, name)
	}
	return parentPin, parentPin
}
