package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// deleteFilterFlags are the flags that make heph delete a bulk delete.
var deleteFilterFlags = []string{"status", "workflow", "queue", "tag", "meta", "since", "until", "before", "search", "version", "parent", "build"}

func newDelete(g *globals) *cobra.Command {
	var (
		ff                 filterFlags
		before             string
		force, yes, noWait bool
	)
	cmd := &cobra.Command{
		Use:   "delete [run]",
		Short: "Delete a run with its history, or every finished run that matches filters",
		Long: "delete deletes a run for good: its history, tasks, requests and step logs. An active\n" +
			"run (pending, running, waiting), or a finished one with work left, is refused unless\n" +
			"--force: a forced delete takes its tasks too, so that no worker can commit for it.\n" +
			"Its child runs are kept.\n\n" +
			"With filters instead of a run, it starts a bulk operation on the server that deletes\n" +
			"every matching finished run and keeps the active ones (a bulk delete never forces),\n" +
			"after a confirmation (--yes skips it; required without a terminal), and shows its\n" +
			"progress until it is done (--no-wait: print its id; heph operations ID shows it).",
		Example: `  heph delete order::42
  heph delete 0190a1b2-... --force
  heph delete --status failed --before 2026-11-01 --yes
  heph delete --workflow report --status completed --before 720h -o json --yes`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			filterSet := false
			for _, f := range deleteFilterFlags {
				filterSet = filterSet || cmd.Flags().Changed(f)
			}
			switch {
			case len(args) == 1 && filterSet:
				return usagef("name a run, or filter runs, not both")
			case len(args) == 1:
				if noWait {
					return usagef("--no-wait is for a bulk delete (filters instead of a run)")
				}
				return deleteOne(cmd, g, args[0], force)
			case !filterSet:
				return usagef("name a run, or filter the runs to delete (--status, --before, --workflow …)")
			case force:
				return usagef("a bulk delete never forces: it keeps active runs; delete one run with --force")
			}
			if before != "" {
				if ff.until != "" {
					return usagef("--before and --until say the same: give one")
				}
				ff.until = before
			}
			return deleteMany(cmd, g, &ff, yes, noWait)
		},
	}
	ff.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&before, "before", "", "runs created before: RFC 3339, a date, or a duration ago (as --until)")
	fl.BoolVar(&force, "force", false, "delete the run even when it is active or has work left")
	fl.BoolVarP(&yes, "yes", "y", false, "delete the matching runs without asking")
	fl.BoolVar(&noWait, "no-wait", false, "with filters: print the operation's id and do not wait for it")
	return cmd
}

func deleteOne(cmd *cobra.Command, g *globals, run string, force bool) error {
	return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.DeletedRun, *apiclient.Response, error) {
		return api.DeleteRun(ctx, run, force)
	}, func(w io.Writer, d *apiclient.DeletedRun) error {
		how := "deleted"
		if d.Forced {
			how = "deleted by force"
		}
		_, err := fmt.Fprintf(w, "run %s (%s %s, %s) %s with its history; %d task(s) of work dropped\n", d.ID, d.Kind, d.Workflow, d.Status, how, d.Tasks)
		return err
	})
}

func deleteMany(cmd *cobra.Command, g *globals, ff *filterFlags, yes, noWait bool) error {
	f, err := ff.filter(time.Now())
	if err != nil {
		return err
	}
	api, err := g.api()
	if err != nil {
		return err
	}
	if !yes {
		ctx, cancel := g.reqCtx(cmd.Context(), 0)
		list, _, err := api.ListRuns(ctx, f, 1000, "")
		cancel()
		if err != nil {
			return err
		}
		n := fmt.Sprint(len(list.Runs))
		if list.Next != "" {
			n = "more than " + n
		}
		sel, err := json.Marshal(f)
		if err != nil {
			return err
		}
		ok, err := confirm(g.env, fmt.Sprintf("Delete the finished runs among the %s runs that match %s, with their history? Active runs are kept. [y/N] ", n, sel))
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(g.env.Stderr, "heph: nothing deleted")
			return exitWith(ExitFailure)
		}
	}
	ctx, cancel := g.reqCtx(cmd.Context(), 0)
	op, resp, err := api.StartOperation(ctx, &apiclient.OperationRequest{Action: "delete", Filter: *f})
	cancel()
	if err != nil {
		return err
	}
	if noWait {
		return g.emit(resp, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "operation %s: delete of the matching runs started; heph operations %s\n", op.ID, op.ID)
			return err
		})
	}
	return awaitOperation(cmd.Context(), g, api, op)
}
