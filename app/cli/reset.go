package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newReset(g *globals) *cobra.Command {
	var (
		b    bulkFlags
		step string
		key  string
	)
	cmd := &cobra.Command{
		Use:   "reset [run] --step STEP",
		Short: "Run a flow, document or job run again from a step, or every run that matches filters",
		Long: "reset runs a flow, document or job run again from --step: that step and every step after it\n" +
			"run again (those running or waiting are stopped, their outputs cleared), the other steps\n" +
			"keep their outputs. It works on running, waiting, completed and failed runs; a completed or\n" +
			"failed run is reopened. A job has one step: --step may be left out. The history records\n" +
			"run_reset with who reset the run. --key makes the call idempotent: repeated with the same\n" +
			"key, it resets once. With --all-matching and filters instead of a run, it resets every\n" +
			"matching run to the step as a bulk operation on the server.",
		Example: `  heph reset order::42 --step charge
  heph reset 0197a3c2-... --step charge --key retry-after-incident-7
  heph reset --workflow order --status failed --step charge --all-matching`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			single, err := b.bulk(cmd, g, args, "reset", step)
			if !single {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Run, *apiclient.Response, error) {
				return api.Reset(ctx, args[0], step, key)
			}, func(w io.Writer, run *apiclient.Run) error {
				to := ""
				if step != "" {
					to = " to step " + step
				}
				_, err := fmt.Fprintf(w, "run %s reset%s (%s)\n", run.ID, to, run.Status)
				return err
			})
		},
	}
	b.register(cmd)
	cmd.Flags().StringVar(&step, "step", "", "the step to run again from (may be left out for a job)")
	cmd.Flags().StringVar(&key, "key", "", "an idempotency key: a reset repeated with it resets once")
	return cmd
}
