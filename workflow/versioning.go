package workflow

import "fmt"

// Versioning says which build's workers decide the runs of a workflow
// when several builds of the code are deployed side by side
// (docs/deploying.md#rolling-deploys-of-workflows). Every worker process has a build id
// (hephaestus.Config.BuildID).
type Versioning int

const (
	// Pinned (the default): a run is decided only by workers of the build
	// that started it, so new code never replays an old run's history;
	// the build drains as its runs finish. A child run started by a
	// pinned run, and the run a pinned run continues as, are pinned to the
	// same build.
	Pinned Versioning = iota
	// AutoUpgrade: a run is decided by any worker that has the workflow,
	// so its runs move to the newest build at their next decision. Code
	// changes must keep old histories replaying: guard them with Patched.
	AutoUpgrade
)

func (v Versioning) String() string {
	switch v {
	case Pinned:
		return "pinned"
	case AutoUpgrade:
		return "auto_upgrade"
	}
	return fmt.Sprintf("Versioning(%d)", int(v))
}

// Versioning declares how the workflow's runs move between builds
// (Pinned, the default, or AutoUpgrade). It returns d, and panics on an
// unknown value: definitions are made at program start.
func (d *Definition[In, Out]) Versioning(v Versioning) *Definition[In, Out] {
	if v != Pinned && v != AutoUpgrade {
		panic(fmt.Sprintf("workflow.Versioning: unknown value %d", int(v)))
	}
	d.versioning = v
	return d
}

// VersioningBehavior returns the workflow's Versioning.
func (d *Definition[In, Out]) VersioningBehavior() Versioning { return d.versioning }
