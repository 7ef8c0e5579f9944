package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newResetWorkflow(g *globals) *cobra.Command {
	var opts apiclient.ResetWorkflowOptions
	cmd := &cobra.Command{
		Use:   "reset-workflow run",
		Short: "Reset a code-first workflow run to a point of its history, as a new run",
		Long: "reset-workflow starts a new run of a code-first workflow whose history is the run's,\n" +
			"copied up to a point, and continued by the workflow's current code: what the copy left\n" +
			"open (activities, timers, children) runs again, and the results before the point are\n" +
			"kept. --point is first (before the first decision), last_good (after the last decision\n" +
			"before the one that ended the run; the default) or a decision number N (right after the\n" +
			"N-th decision entry of heph history). The old run is marked reset (cancelled if it was\n" +
			"active). --reapply-signals appends the signals received after the point again. The same\n" +
			"reset again prints the same new run.",
		Example: `  heph reset-workflow 0197a3c2-...                         # to its last good point
  heph reset-workflow 0197a3c2-... --point 3 --reapply-signals
  heph reset-workflow order::42 --point first --reason "fixed the pricing bug"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Run, *apiclient.Response, error) {
				return api.ResetWorkflow(ctx, args[0], &opts)
			}, func(w io.Writer, run *apiclient.Run) error {
				_, err := fmt.Fprintf(w, "run %s reset: new run %s (%s)\n", run.ResetFrom, run.ID, run.Status)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&opts.Point, "point", "", `where to reset: first, last_good or a decision number (default last_good)`)
	cmd.Flags().BoolVar(&opts.ReapplySignals, "reapply-signals", false, "append the signals received after the point to the new run again")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why, for the history")
	return cmd
}
