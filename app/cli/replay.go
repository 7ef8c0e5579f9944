package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// ReplayCommand returns the replay command (heph replay) over the
// workflows ws: a worker program mounts it (root.AddCommand) so that the
// replay check before a deploy runs the code being deployed, which the heph
// binary does not have (its own replay command knows only the example
// workflows of heph server --examples). It writes to the command's
// streams (cmd.OutOrStdout, SetOut), reads the process's environment
// ($HEPH_ADDR, $HEPH_TOKEN, $HEPH_OUTPUT) and has the --addr, --token, -o
// and --timeout flags of heph. When a history diverges or cannot be
// replayed it prints why and returns an error whose ExitCode is 1:
//
//	if err := cmd.Execute(); err != nil {
//		os.Exit(cli.ExitCode(err))
//	}
func ReplayCommand(ws ...hephaestus.Workflow) *cobra.Command {
	env := OSEnv()
	g := &globals{env: env}
	cmd := newReplayWith(g, ws)
	env.Stdin, env.Stdout, env.Stderr = cmdStream{in: cmd.InOrStdin}, cmdStream{out: cmd.OutOrStdout}, cmdStream{out: cmd.ErrOrStderr}
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	g.register(cmd)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err.Error()} })
	usageArgs(cmd)
	return cmd
}

// cmdStream reads or writes a command's stream as it is when used.
type cmdStream struct {
	in  func() io.Reader
	out func() io.Writer
}

func (s cmdStream) Read(p []byte) (int, error)  { return s.in().Read(p) }
func (s cmdStream) Write(p []byte) (int, error) { return s.out().Write(p) }

// newReplay is heph replay, over the example workflows.
func newReplay(g *globals) *cobra.Command {
	return newReplayWith(g, []hephaestus.Workflow{demo.OnboardingWorkflow, demo.WorkspaceWorkflow})
}

func newReplayWith(g *globals, ws []hephaestus.Workflow) *cobra.Command {
	var (
		histories []string
		query     string
	)
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.Name()
	}
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Replay recorded workflow histories against this code; fail if any diverges",
		Long: "replay replays exported workflow histories against the workflow code compiled into this\n" +
			"program and fails (exit 1) if the code would not issue the commands a history recorded:\n" +
			"the check to run before deploying a change while runs are in flight. Each divergence is\n" +
			"printed with the source line that issued the recorded command and the line of the new code.\n\n" +
			"--histories reads files, directories (their *.json files) or - (standard input) written\n" +
			"by heph history export; --query exports the histories of the server's workflow runs that\n" +
			"match a filter (the filters of heph ls, as key=value words: workflow, status, queue, tag,\n" +
			"meta, since, until, search, version, parent; without status, the runs in flight: pending,\n" +
			"running and waiting).\n\n" +
			"heph's own replay knows the example workflows (" + strings.Join(names, ", ") + "); to check\n" +
			"your workflows, mount cli.ReplayCommand(workflows...) in your worker program, or use\n" +
			"hephtest.ReplayHistories in a Go test.",
		Example: `  heph replay --histories ./histories
  heph history export --query 'workflow=example.onboarding' > inflight.json && heph replay --histories inflight.json
  heph replay --query 'workflow=example.onboarding since=24h' -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(histories) == 0 && query == "" {
				return usagef("give --histories or --query")
			}
			check := hephaestus.NewReplayCheck(ws...)
			for _, h := range histories {
				if h == "-" {
					check.Read("stdin", cmd.InOrStdin())
				} else {
					check.Path(h)
				}
			}
			if query != "" {
				err := eachExport(cmd.Context(), g, query, func(id string, b []byte) {
					check.Read("run "+id, strings.NewReader(string(b)))
				})
				if err != nil {
					return err
				}
			}
			rep := check.Report()
			if err := g.emitValue(rep, func(w io.Writer) error { return replayTable(w, rep) }); err != nil {
				return err
			}
			if !rep.OK() {
				return exitWith(ExitFailure)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&histories, "histories", nil, "a history export file, a directory of them (*.json), or - for standard input (repeatable)")
	fl.StringVar(&query, "query", "", "replay the server's workflow runs that match this filter: key=value words, as heph ls's flags")
	return cmd
}

// replayTable prints a replay report: a row per history, the error of
// each that diverged or failed with both source lines, and the counts.
func replayTable(w io.Writer, rep *hephaestus.ReplayReport) error {
	tw := newTable(w, "SOURCE", "WORKFLOW", "RUN", "OUTCOME")
	for _, r := range rep.Results {
		row(tw, r.Source, r.Workflow, r.RunID, string(r.Outcome))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Outcome == hephaestus.ReplayOK {
			continue
		}
		fmt.Fprintf(w, "\n%s: %s\n", r.Source, r.Error)
		if r.RecordedAt != "" {
			fmt.Fprintf(w, "  recorded at: %s\n", r.RecordedAt)
		}
		if r.CommandAt != "" {
			fmt.Fprintf(w, "  new code at: %s\n", r.CommandAt)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d replayed, %d diverged, %d failed\n", rep.Replayed, rep.Diverged, rep.Failed)
	return err
}

// queryKeys are the filters --query takes: the names of heph ls's
// filter flags.
var queryKeys = []string{"status", "workflow", "queue", "tag", "meta", "since", "until", "search", "version", "parent"}

// parseQuery reads a --query: key=value words naming heph ls's filters.
// Without a status it keeps the runs in flight.
func parseQuery(query string, now time.Time) (*apiclient.RunFilter, error) {
	var ff filterFlags
	c := &cobra.Command{}
	ff.register(c)
	fs := pflag.NewFlagSet("query", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Flags().VisitAll(func(f *pflag.Flag) {
		for _, k := range queryKeys {
			if f.Name == k {
				fs.AddFlag(f)
			}
		}
	})
	var args []string
	for _, word := range strings.Fields(query) {
		k, v, ok := strings.Cut(word, "=")
		if !ok || k == "" {
			return nil, usagef("--query: %q is not key=value (keys: %s)", word, strings.Join(queryKeys, ", "))
		}
		if fs.Lookup(k) == nil {
			return nil, usagef("--query: %q is not a filter (keys: %s)", k, strings.Join(queryKeys, ", "))
		}
		args = append(args, "--"+k+"="+v)
	}
	if err := fs.Parse(args); err != nil {
		return nil, usagef("--query: %v", err)
	}
	if len(ff.statuses) == 0 {
		ff.statuses = []string{"pending", "running", "waiting"}
	}
	f, err := ff.filter(now)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, usagef("--query: %s", strings.ReplaceAll(ue.msg, "--", ""))
		}
		return nil, err
	}
	return f, nil
}

// eachExport lists the workflow runs that match query and calls fn with
// the history export of each, in the list's order.
func eachExport(ctx context.Context, g *globals, query string, fn func(id string, export []byte)) error {
	f, err := parseQuery(query, time.Now())
	if err != nil {
		return err
	}
	api, err := g.api()
	if err != nil {
		return err
	}
	runs, _, _, err := allPages(ctx, g, func(ctx context.Context, cursor string) ([]apiclient.Run, string, *apiclient.Response, error) {
		page, r, err := api.ListRuns(ctx, f, 0, cursor)
		if err != nil {
			return nil, "", nil, err
		}
		return page.Runs, page.Next, r, nil
	})
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Kind != string(hephaestus.KindWorkflow) {
			continue // only workflow runs have a history to replay
		}
		rctx, cancel := g.reqCtx(ctx, 0)
		b, _, err := api.ExportHistory(rctx, r.ID)
		cancel()
		if err != nil {
			return fmt.Errorf("export the history of run %s: %w", r.ID, err)
		}
		fn(r.ID, b)
	}
	return nil
}

// newHistoryExport is heph history export.
func newHistoryExport(g *globals) *cobra.Command {
	var query, dir string
	cmd := &cobra.Command{
		Use:   "export [<run>...]",
		Short: "Export workflow runs' histories for heph replay",
		Long: "history export writes the histories of workflow runs, as Client.ExportHistory does: the\n" +
			"input of heph replay and hephtest.ReplayHistories. Name the runs, or select them with\n" +
			"--query (as heph replay's: key=value words naming heph ls's filters; without status,\n" +
			"the runs in flight). It writes them one after the other to standard output, or with\n" +
			"--dir one file per run, <dir>/<run>.json (-o json then prints the files written).",
		Example: `  heph history export 0190a1b2-... > run.json
  heph history export --query 'workflow=example.onboarding' --dir ./histories`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 0) == (query == "") {
				return usagef("name runs or give --query, not both")
			}
			if dir != "" {
				if err := os.MkdirAll(dir, 0o750); err != nil {
					return fmt.Errorf("--dir: %w", err)
				}
			}
			var files []string
			write := func(id string, b []byte) error {
				if dir == "" {
					return writeJSON(g.env.Stdout, b)
				}
				var buf bytes.Buffer
				if err := writeJSON(&buf, b); err != nil {
					return err
				}
				name := filepath.Join(dir, fileSafe.ReplaceAllString(id, "_")+".json")
				files = append(files, name)
				return os.WriteFile(name, buf.Bytes(), 0o600)
			}
			var werr error
			if query != "" {
				if err := eachExport(cmd.Context(), g, query, func(id string, b []byte) {
					if werr == nil {
						werr = write(id, b)
					}
				}); err != nil {
					return err
				}
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			for _, id := range args {
				ctx, cancel := g.reqCtx(cmd.Context(), 0)
				b, _, err := api.ExportHistory(ctx, id)
				cancel()
				if err != nil {
					return err
				}
				if werr = write(id, b); werr != nil {
					break
				}
			}
			if werr != nil || dir == "" {
				return werr
			}
			return g.emitValue(map[string]any{"files": append([]string{}, files...)}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "wrote %d histories to %s\n", len(files), dir)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&query, "query", "", "export the workflow runs that match this filter: key=value words, as heph ls's flags")
	cmd.Flags().StringVar(&dir, "dir", "", "write one file per run, <dir>/<run>.json, instead of standard output")
	return cmd
}

// fileSafe matches what a file name should not hold.
var fileSafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)
