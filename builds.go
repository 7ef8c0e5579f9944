package hephaestus

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Builds of code-first workflows (docs/deploying.md#rolling-deploys-of-workflows). Every
// process has a build id (Config.BuildID). A run of a workflow records the
// build that started it (Run.BuildID); a run of a pinned workflow
// (workflow.Pinned, the default) is decided only by workers of that
// build, so a new build deployed beside an old one takes the new runs
// while the old build drains; a workflow that auto-upgrades
// (workflow.AutoUpgrade) moves its runs to whichever build decides them
// next. A start pins the run to this process's build when it has the
// workflow, else to the newest live build that serves it; with none, the
// run waits, marked ConditionUnserved, until a worker of its build is
// live.

var (
	// ErrBuildInUse: a build still has open runs of the workflow: it
	// cannot be retired yet. The error is a *BuildInUseError.
	ErrBuildInUse = store.ErrBuildInUse
)

// BuildInUseError refuses to retire a build that open runs still use;
// OpenRuns counts them.
type BuildInUseError = store.BuildInUseError

// WorkflowBuild is one build of a workflow, as WorkflowBuilds sees it.
type WorkflowBuild struct {
	// BuildID is the build; "" gathers the open runs that record none
	// (started before builds were recorded).
	BuildID string
	// OpenRuns counts the workflow's pending, running and waiting runs
	// on the build.
	OpenRuns int
	// LiveWorkers counts the live workers of the build that have the
	// workflow registered.
	LiveWorkers int
	// Newest: the newest build (by the start of its oldest live worker)
	// that serves the workflow and is not retired: the build new runs
	// pin to when started by a process without the workflow.
	Newest bool
	// Draining: the build has open runs and is not the newest.
	Draining bool
	// RetiredAt is when the build was retired (RetireBuild); zero if it
	// was not.
	RetiredAt time.Time
}

// WorkflowBuilds lists the builds of a workflow that have open runs, live
// workers or were retired: the newest first, then by build id.
func (c *Client) WorkflowBuilds(ctx context.Context, name string) ([]WorkflowBuild, error) {
	if name == "" {
		return nil, fmt.Errorf("workflow builds: %w: the workflow name is empty", ErrInvalidInput)
	}
	counts, err := c.cfg.Store.BuildRuns(ctx, &store.BuildRunsParams{Workflow: name})
	if err != nil {
		return nil, fmt.Errorf("workflow %q builds: %w", name, err)
	}
	live, err := c.liveBuilds(ctx, name, store.WorkflowHandler(name))
	if err != nil {
		return nil, fmt.Errorf("workflow %q builds: %w", name, err)
	}
	byID := map[string]*WorkflowBuild{}
	get := func(id string) *WorkflowBuild {
		if b, ok := byID[id]; ok {
			return b
		}
		b := &WorkflowBuild{BuildID: id}
		byID[id] = b
		return b
	}
	for _, n := range counts {
		get(n.BuildID).OpenRuns = n.OpenRuns
	}
	for _, l := range live.builds {
		get(l.id).LiveWorkers = l.workers
	}
	for id, at := range live.retired {
		get(id).RetiredAt = at
	}
	out := make([]WorkflowBuild, 0, len(byID))
	for _, b := range byID {
		b.Newest = b.BuildID != "" && b.BuildID == live.newest
		b.Draining = b.OpenRuns > 0 && !b.Newest
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b WorkflowBuild) int {
		if a.Newest != b.Newest {
			if a.Newest {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.BuildID, b.BuildID)
	})
	return out, nil
}

// RetireBuild retires a build of a workflow: it is listed as retired and
// no start pins a new run to it from a process without the workflow. It
// is refused with a *BuildInUseError (ErrBuildInUse) while the workflow has
// open runs on the build. Retiring a retired build again does nothing.
func (c *Client) RetireBuild(ctx context.Context, name, build string) error {
	switch {
	case name == "":
		return fmt.Errorf("retire build: %w: the workflow name is empty", ErrInvalidInput)
	case build == "":
		return fmt.Errorf("retire build of workflow %q: %w: the build id is empty", name, ErrInvalidInput)
	}
	if err := store.CheckBuildID(build); err != nil {
		return fmt.Errorf("retire build of workflow %q: %w: %w", name, ErrInvalidInput, err)
	}
	if err := c.cfg.Store.RetireBuild(ctx, &store.RetireBuildParams{Workflow: name, BuildID: build, At: c.cfg.Clock.Now()}); err != nil {
		return fmt.Errorf("workflow %q: %w", name, err)
	}
	return nil
}

// liveBuild is the newest live build that serves the pinned runs of a
// workflow, "" when none does (or the store cannot tell).
func (c *Client) liveBuild(ctx context.Context, name string) string {
	live, err := c.liveBuilds(ctx, name, "")
	if err != nil {
		return ""
	}
	return live.newest
}

// buildsLive are the live builds of a workflow.
type buildsLive struct {
	builds []liveBuildInfo
	// newest is the newest build that is not retired, "" for none.
	newest  string
	retired map[string]time.Time
}

type liveBuildInfo struct {
	id      string
	workers int
	// since is when its oldest live worker started.
	since time.Time
}

// liveBuilds gathers the builds of the live workers that have handler
// (the build's own pinned handler when handler is empty), and the retired
// builds of the workflow.
func (c *Client) liveBuilds(ctx context.Context, name, handler string) (*buildsLive, error) {
	ws, err := c.cfg.Store.ListWorkers(ctx, &store.ListWorkersParams{Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, err
	}
	rs, err := c.cfg.Store.RetiredBuilds(ctx, &store.RetiredBuildsParams{Workflow: name})
	if err != nil {
		return nil, err
	}
	out := &buildsLive{retired: map[string]time.Time{}}
	for _, r := range rs {
		out.retired[r.BuildID] = r.RetiredAt
	}
	idx := map[string]int{}
	for _, w := range ws {
		h := handler
		if h == "" {
			h = store.WorkflowBuildHandler(name, w.BuildID)
		}
		if w.BuildID == "" || !slices.Contains(w.Handlers, h) {
			continue
		}
		i, ok := idx[w.BuildID]
		if !ok {
			i = len(out.builds)
			idx[w.BuildID] = i
			out.builds = append(out.builds, liveBuildInfo{id: w.BuildID, since: w.StartedAt})
		}
		b := &out.builds[i]
		b.workers++
		if w.StartedAt.Before(b.since) {
			b.since = w.StartedAt
		}
	}
	var best *liveBuildInfo
	for i := range out.builds {
		b := &out.builds[i]
		if _, gone := out.retired[b.id]; gone {
			continue
		}
		if best == nil || b.since.After(best.since) || (b.since.Equal(best.since) && b.id > best.id) {
			best = b
		}
	}
	if best != nil {
		out.newest = best.id
	}
	return out, nil
}
