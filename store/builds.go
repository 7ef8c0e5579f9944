package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Builds: every worker process has a build id (its Config.BuildID); a
// code-first workflow run records the build that started it (Run.BuildID)
// and, when pinned, has its decisions run only by workers of that build
// (WorkflowBuildHandler). An operator retires a build of a workflow once
// no open run is left on it.
type Builds interface {
	// BuildRuns counts the open runs (pending, running or waiting) of a
	// workflow per build, by build id ("" for the runs that record none).
	BuildRuns(ctx context.Context, p *BuildRunsParams) ([]BuildRuns, error)
	// RetireBuild records that a build of a workflow is retired, at p.At.
	// It is refused with a *BuildInUseError while the workflow has open
	// runs of the build, counted in the same transaction. Retiring a
	// retired build again keeps the first time.
	RetireBuild(ctx context.Context, p *RetireBuildParams) error
	// RetiredBuilds returns the retired builds of a workflow (of every
	// workflow when p.Workflow is empty), by workflow then build id.
	RetiredBuilds(ctx context.Context, p *RetiredBuildsParams) ([]RetiredBuild, error)
}

// ErrBuildInUse: a build still has open runs; it cannot be retired.
var ErrBuildInUse = errors.New("build has open runs")

// BuildInUseError refuses to retire a build that open runs still use.
type BuildInUseError struct {
	Workflow, BuildID string
	// OpenRuns is the number of open runs of the workflow on the build.
	OpenRuns int
}

func (e *BuildInUseError) Error() string {
	return fmt.Sprintf("build %q of workflow %q has %d open run(s): retire it once they finish", e.BuildID, e.Workflow, e.OpenRuns)
}

// Is makes errors.Is(err, ErrBuildInUse) true.
func (e *BuildInUseError) Is(target error) bool { return target == ErrBuildInUse }

// BuildRunsParams selects the workflow whose open runs BuildRuns counts.
type BuildRunsParams struct {
	Workflow string
}

// BuildRuns is the number of open runs of a workflow on one build.
type BuildRuns struct {
	BuildID  string
	OpenRuns int
}

// RetireBuildParams names a build of a workflow to retire.
type RetireBuildParams struct {
	Workflow string
	BuildID  string
	At       time.Time
}

// Check reports what is wrong with p, naming the field.
func (p *RetireBuildParams) Check() error {
	switch {
	case p.Workflow == "":
		return errors.New("Workflow is empty")
	case p.BuildID == "":
		return errors.New("BuildID is empty")
	case p.At.IsZero():
		return errors.New("At is zero")
	}
	return CheckBuildID(p.BuildID)
}

// RetiredBuildsParams selects retired builds.
type RetiredBuildsParams struct {
	// Workflow: "" for every workflow.
	Workflow string
}

// RetiredBuild is a retired build of a workflow.
type RetiredBuild struct {
	Workflow  string
	BuildID   string
	RetiredAt time.Time
}

// MaxBuildID bounds a build id, in bytes.
const MaxBuildID = 64

// CheckBuildID reports a build id that is too long or holds other
// characters than letters, digits, '.', '_', '-' and '+'. The empty id
// passes (no build).
func CheckBuildID(id string) error {
	if len(id) > MaxBuildID {
		return fmt.Errorf("build id %.20q… is %d bytes long; the limit is %d", id, len(id), MaxBuildID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !buildIDByte(c) {
			return fmt.Errorf("build id %q holds %s at byte %d: use letters, digits, '.', '_', '-' and '+'", id, strconv.QuoteRune(rune(c)), i)
		}
	}
	return nil
}

// buildIDByte reports whether a build id may hold c.
func buildIDByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return c == '.' || c == '_' || c == '-' || c == '+'
}
