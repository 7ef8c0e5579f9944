package cli

import (
	"context"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// newBuilds is `heph builds [WORKFLOW]` and `heph builds retire`: the
// builds of code-first workflows (docs/deploying.md#rolling-deploys-of-workflows).
func newBuilds(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "builds [workflow]",
		Short: "List the builds of a workflow (open runs, live workers, draining), or the live builds",
		Long: "With a workflow, list its builds: the open runs pinned to each, its live workers, the newest build\n" +
			"(where runs started by a process without the workflow go) and the draining ones (runs left, not the\n" +
			"newest). Without one, list the builds of the live workers and the workflows they serve.",
		Example: "  heph builds\n  heph builds orders\n  heph builds retire orders 3f2a9c1e77b0",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			if len(args) == 0 {
				ws, resp, err := api.Workers(ctx)
				if err != nil {
					return err
				}
				if g.json() {
					return g.emitValue(liveBuilds(ws), nil)
				}
				return g.emit(resp, func(w io.Writer) error { return printLiveBuilds(w, liveBuilds(ws)) })
			}
			bs, resp, err := api.WorkflowBuilds(ctx, args[0])
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error { return printBuilds(w, bs) })
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "retire <workflow> <build>",
		Short:   "Retire a build of a workflow once no open run is left on it",
		Example: "  heph builds retire orders 3f2a9c1e77b0",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.WorkflowBuild, *apiclient.Response, error) {
				return api.RetireBuild(ctx, args[0], args[1])
			}, printBuilds)
		},
	})
	return cmd
}

func printBuilds(w io.Writer, bs []apiclient.WorkflowBuild) error {
	tw := newTable(w, "BUILD", "OPEN RUNS", "LIVE WORKERS", "STATE", "RETIRED")
	for _, b := range bs {
		id := b.BuildID
		if id == "" {
			id = "(none)"
		}
		var state []string
		if b.Newest {
			state = append(state, "newest")
		}
		if b.Draining {
			state = append(state, "draining")
		}
		if b.Retired {
			state = append(state, "retired")
		}
		row(tw, id, b.OpenRuns, b.LiveWorkers, strings.Join(state, ","), b.RetiredAt)
	}
	return tw.Flush()
}

// LiveBuild is a build of live workers, as `heph builds` lists them.
type LiveBuild struct {
	BuildID   string   `json:"build_id"`
	Workers   int      `json:"workers"`
	Workflows []string `json:"workflows"`
}

// liveBuilds groups the live workers by build, with the workflows they
// have.
func liveBuilds(ws []apiclient.Worker) []LiveBuild {
	var out []LiveBuild
	for _, wk := range ws {
		i := slices.IndexFunc(out, func(b LiveBuild) bool { return b.BuildID == wk.BuildID })
		if i < 0 {
			out = append(out, LiveBuild{BuildID: wk.BuildID, Workflows: []string{}})
			i = len(out) - 1
		}
		out[i].Workers++
		for _, h := range wk.Handlers {
			name, ok := strings.CutPrefix(h, "workflow:")
			if !ok || strings.HasSuffix(name, "@"+wk.BuildID) && wk.BuildID != "" {
				continue
			}
			if !slices.Contains(out[i].Workflows, name) {
				out[i].Workflows = append(out[i].Workflows, name)
			}
		}
	}
	for i := range out {
		slices.Sort(out[i].Workflows)
	}
	slices.SortFunc(out, func(a, b LiveBuild) int { return strings.Compare(a.BuildID, b.BuildID) })
	return out
}

func printLiveBuilds(w io.Writer, bs []LiveBuild) error {
	tw := newTable(w, "BUILD", "WORKERS", "WORKFLOWS")
	for _, b := range bs {
		row(tw, b.BuildID, b.Workers, strings.Join(b.Workflows, ","))
	}
	return tw.Flush()
}
