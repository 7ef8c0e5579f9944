package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newLogs(g *globals) *cobra.Command {
	var (
		f      apiclient.LogFilter
		index  int
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs <run>",
		Short: "Print what a run's steps logged; --follow waits for new records",
		Long: "logs prints the records that a run's steps, activities and document actions logged\n" +
			"(flow.Logger, workflow.ActivityLogger, a remote worker's \"logs\"), per attempt, in order.\n" +
			"Each attempt keeps 64 KiB and the run 1 MiB; beyond, the oldest records are dropped and a\n" +
			"marker says how many. With --follow it keeps waiting for new records (long-polling the\n" +
			"server) until the run ends; with -o json it prints one JSON record per line then.",
		Example: `  heph logs 0192…
  heph logs 0192… --step charge --attempt 2
  heph logs 0192… --level warn -o json
  heph logs 0192… --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.After < 0 || f.Attempt < 0 || f.Limit < 0 || f.Limit > 1000 {
				return usagef("--after and --attempt must not be negative, and --limit is 0 to 1000")
			}
			if cmd.Flags().Changed("index") {
				if index < 0 {
					return usagef("--index must not be negative, got %d", index)
				}
				f.Index = &index
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			if follow {
				return followLogs(cmd.Context(), g, api, args[0], f)
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			page, resp, err := api.Logs(ctx, args[0], &f)
			cancel()
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error {
				tw := newTable(w, logHeader...)
				for i := range page.Records {
					logRow(tw, &page.Records[i])
				}
				return tw.Flush()
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Step, "step", "", "only the records of this step or activity")
	fl.IntVar(&index, "index", 0, "only the records of this map element (or activity sequence number)")
	fl.IntVar(&f.Attempt, "attempt", 0, "only the records of this attempt")
	fl.StringVar(&f.Level, "level", "", "only the records at this level and above: debug, info, warn, error")
	fl.Int64Var(&f.After, "after", 0, "only the records after this sequence number")
	fl.IntVar(&f.Limit, "limit", 0, "at most this many records (default and maximum 1000)")
	fl.BoolVarP(&follow, "follow", "f", false, "wait for new records until the run ends")
	return cmd
}

var logHeader = []string{"SEQ", "TIME", "STEP", "ATTEMPT", "LEVEL", "MESSAGE", "ATTRS"}

func logRow(w io.Writer, r *apiclient.LogRecord) {
	step := r.Step
	if r.Index > 0 {
		step = fmt.Sprintf("%s[%d]", step, r.Index)
	}
	row(w, r.Seq, r.Time, step, r.Attempt, r.Level, r.Message, truncate(compactJSON(r.Attrs), 120))
}

// followLogs prints records as they come until the run ends: a long poll
// for the next records, and when one ends empty, a look at the run; once
// it has ended, the records written before its end are read to the last.
func followLogs(ctx context.Context, g *globals, api *apiclient.Client, id string, f apiclient.LogFilter) error {
	w := g.env.Stdout
	if !g.json() {
		fmt.Fprintln(w, strings.Join(logHeader, "  "))
	}
	ended := false
	for {
		rctx, cancel := g.reqCtx(ctx, longPoll)
		f.Wait = longPoll
		if ended {
			f.Wait = 0
		}
		page, _, err := api.Logs(rctx, id, &f)
		cancel()
		if err != nil {
			return err
		}
		for i := range page.Records {
			r := &page.Records[i]
			if g.json() {
				b, err := json.Marshal(r)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%s\n", b)
			} else {
				tw := newTable(w)
				logRow(tw, r)
				if err := tw.Flush(); err != nil {
					return err
				}
			}
		}
		f.After = max(f.After, page.Next)
		if len(page.Records) > 0 {
			continue
		}
		if ended {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Logs are stored before the outcome that ends a run commits: once
		// the run has ended, one more read gets the last of them.
		rctx, cancel = g.reqCtx(ctx, 0)
		run, _, err := api.GetRun(rctx, id)
		cancel()
		if err != nil {
			return err
		}
		ended = apiclient.Terminal(run.Status)
	}
}
