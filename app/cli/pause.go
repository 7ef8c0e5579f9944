package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// conditionPaused is the condition kind of a paused run.
const conditionPaused = "paused"

func newPause(g *globals) *cobra.Command {
	var (
		b             bulkFlags
		cancelRunning bool
	)
	cmd := &cobra.Command{
		Use:   "pause [run]",
		Short: "Pause a run, or every run that matches filters",
		Long: "pause pauses a run: none of its tasks is claimed until heph unpause. Running steps\n" +
			"finish and their results are kept (--cancel-running stops them; they run again after\n" +
			"unpause); timers that come due wait; signals and updates are recorded and handled after\n" +
			"unpause. Pausing a paused run changes nothing. With --all-matching and filters instead\n" +
			"of a run, it pauses every matching run as a bulk operation on the server.",
		Example: `  heph pause order::42
  heph pause order::42 --cancel-running
  heph pause --workflow order --status running --all-matching`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reason := ""
			if cancelRunning {
				reason = "cancel_running"
			}
			single, err := b.bulk(cmd, g, args, "pause", reason)
			if !single {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Run, *apiclient.Response, error) {
				return api.Pause(ctx, args[0], cancelRunning)
			}, func(w io.Writer, run *apiclient.Run) error {
				_, err := fmt.Fprintf(w, "run %s paused (%s)\n", run.ID, run.Status)
				return err
			})
		},
	}
	b.register(cmd)
	cmd.Flags().BoolVar(&cancelRunning, "cancel-running", false, "stop the run's running steps too (they run again after unpause)")
	return cmd
}

func newUnpause(g *globals) *cobra.Command {
	var b bulkFlags
	cmd := &cobra.Command{
		Use:   "unpause [run]",
		Short: "Unpause a paused run, or every run that matches filters",
		Long: "unpause lets a paused run go on: timers that came due fire, and the signals and updates\n" +
			"it received are handled. Unpausing a run that is not paused changes nothing. With\n" +
			"--all-matching and filters instead of a run, it unpauses every matching run as a bulk\n" +
			"operation on the server.",
		Example: `  heph unpause order::42
  heph unpause --workflow order --all-matching`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			single, err := b.bulk(cmd, g, args, "unpause", "")
			if !single {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Run, *apiclient.Response, error) {
				return api.Unpause(ctx, args[0])
			}, func(w io.Writer, run *apiclient.Run) error {
				_, err := fmt.Fprintf(w, "run %s unpaused (%s)\n", run.ID, run.Status)
				return err
			})
		},
	}
	b.register(cmd)
	return cmd
}
