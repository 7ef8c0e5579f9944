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

// opPoll is how often a bulk operation's progress is read.
const opPoll = 500 * time.Millisecond

func newSignal(g *globals) *cobra.Command {
	var payload string
	cmd := &cobra.Command{
		Use:     "signal <run> <name>",
		Short:   "Send a signal to a workflow run",
		Example: `  heph signal order::42 cancel-requested --payload '{"by": "ops"}'`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := readPayload(g.env, "--payload", payload)
			if err != nil {
				return err
			}
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.Signal(ctx, args[0], args[1], p)
			}, "signal %s sent to run %s", args[1], args[0])
		},
	}
	cmd.Flags().StringVar(&payload, "payload", "", "the signal's payload: JSON text, @file or -")
	return cmd
}

// oneCall makes one call whose answer says nothing but that it worked,
// and prints msg (or the answer with -o json).
func oneCall(parent context.Context, g *globals, fn func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error), msg string, args ...any) error {
	return call(parent, g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, *apiclient.Response, error) {
		resp, err := fn(ctx, api)
		return resp, resp, err
	}, func(w io.Writer, _ *apiclient.Response) error {
		_, err := fmt.Fprintf(w, msg+"\n", args...)
		return err
	})
}

func newUpdate(g *globals) *cobra.Command {
	var (
		argsFlag, waitFor string
		timeout           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "update <run> <name>",
		Short: "Send an update to a workflow run and print its result",
		Example: `  heph update order::42 set-address --args '{"city": "Lyon"}'
  heph update order::42 approve --wait-for accepted`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if waitFor != "accepted" && waitFor != "completed" {
				return usagef("--wait-for must be accepted or completed, got %q", waitFor)
			}
			if timeout < 0 {
				return usagef("--update-timeout must not be negative, got %v", timeout)
			}
			a, err := readPayload(g.env, "--args", argsFlag)
			if err != nil {
				return err
			}
			wait := timeout
			if wait == 0 {
				wait = time.Minute // the server's longest wait
			}
			return call(cmd.Context(), g, wait, func(ctx context.Context, api *apiclient.Client) (*apiclient.UpdateResult, *apiclient.Response, error) {
				return api.Update(ctx, args[0], args[1], a, waitFor, timeout)
			}, func(w io.Writer, res *apiclient.UpdateResult) error {
				if res.Stage == "accepted" {
					_, err := fmt.Fprintf(w, "update %s accepted by run %s\n", args[1], args[0])
					return err
				}
				if compactJSON(res.Result) == "" {
					_, err := fmt.Fprintf(w, "update %s completed\n", args[1])
					return err
				}
				return writeJSON(w, res.Result)
			})
		},
	}
	cmd.Flags().StringVar(&argsFlag, "args", "", "the update's arguments: JSON text, @file or -")
	cmd.Flags().StringVar(&waitFor, "wait-for", "completed", "wait until the update is accepted or completed")
	cmd.Flags().DurationVar(&timeout, "update-timeout", 0, "how long the server waits for the update (default the server's)")
	return cmd
}

func newQuery(g *globals) *cobra.Command {
	var argsFlag string
	cmd := &cobra.Command{
		Use:   "query <run> [name]",
		Short: "Query a workflow run (without a name: its published state)",
		Example: `  heph query order::42
  heph query order::42 items --args '{"limit": 5}'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := readPayload(g.env, "--args", argsFlag)
			if err != nil {
				return err
			}
			if len(args) == 1 && a != nil {
				return usagef("--args needs a query name")
			}
			if len(args) == 1 {
				return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (json.RawMessage, *apiclient.Response, error) {
					return api.State(ctx, args[0])
				}, func(w io.Writer, state json.RawMessage) error { return writeJSON(w, orNull(state)) })
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.QueryResult, *apiclient.Response, error) {
				return api.Query(ctx, args[0], args[1], a)
			}, func(w io.Writer, res *apiclient.QueryResult) error { return writeJSON(w, orNull(res.Result)) })
		},
	}
	cmd.Flags().StringVar(&argsFlag, "args", "", "the query's arguments: JSON text, @file or -")
	return cmd
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

func newResume(g *globals) *cobra.Command {
	var step, payload string
	cmd := &cobra.Command{
		Use:   "resume <run> <event>",
		Short: "Resume a waiting step of a run with an event",
		Example: `  heph resume order::42 paid --payload '{"amount": 12}'
  heph resume order::42 ok --step confirm`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := readPayload(g.env, "--payload", payload)
			if err != nil {
				return err
			}
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.Resume(ctx, args[0], step, args[1], p)
			}, "run %s resumed with %s", args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&step, "step", "", "the waiting step (default the run's only waiting step)")
	cmd.Flags().StringVar(&payload, "payload", "", "the event's payload: JSON text, @file or -")
	return cmd
}

func newDecide(g *globals, approve bool) *cobra.Command {
	var comment string
	verb, past := "reject", "rejected"
	if approve {
		verb, past = "approve", "approved"
	}
	cmd := &cobra.Command{
		Use:     verb + " <run> <step>",
		Short:   fmt.Sprintf("%s an approval gate (as the token's user)", map[bool]string{true: "Approve", false: "Reject"}[approve]),
		Example: fmt.Sprintf("  heph %s order::42 review --comment 'looks right'", verb),
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Decision, *apiclient.Response, error) {
				return api.Decide(ctx, args[0], args[1], approve, comment)
			}, func(w io.Writer, d *apiclient.Decision) error {
				again := ""
				if d.Repeated {
					again = " (already decided so; nothing changed)"
				}
				_, err := fmt.Fprintf(w, "step %s of run %s %s by %s%s\n", args[1], args[0], past, d.Actor, again)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&comment, "comment", "", "a comment recorded with the decision")
	return cmd
}

func newApprovals(g *globals) *cobra.Command {
	var assignee string
	cmd := &cobra.Command{
		Use:     "approvals",
		Short:   "List the approval gates waiting for a decision",
		Example: `  heph approvals --assignee alice`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.PendingApproval, *apiclient.Response, error) {
				return api.PendingApprovals(ctx, assignee)
			}, func(w io.Writer, list []apiclient.PendingApproval) error {
				tw := newTable(w, "RUN", "STEP", "WORKFLOW", "WAITING SINCE", "DEADLINE", "USERS", "GROUPS", "PROMPT")
				for _, a := range list {
					row(tw, a.RunID, a.Step, a.Workflow, a.WaitingSince, a.Deadline, a.Users, a.Groups, truncate(a.Prompt, 50))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&assignee, "assignee", "", "only the gates this user may decide")
	return cmd
}

// bulkFlags select the runs of a bulk cancel or retry.
type bulkFlags struct {
	filterFlags
	allMatching, noWait bool
}

func (b *bulkFlags) register(cmd *cobra.Command) {
	b.filterFlags.register(cmd)
	cmd.Flags().BoolVar(&b.allMatching, "all-matching", false, "act on every run the filters match (a tracked bulk operation)")
	cmd.Flags().BoolVar(&b.noWait, "no-wait", false, "with --all-matching: print the operation's id and do not wait for it")
}

// bulk runs a bulk operation when the command got no run and
// --all-matching; single is false then.
func (b *bulkFlags) bulk(cmd *cobra.Command, g *globals, args []string, action, reason string) (single bool, err error) {
	filterSet := false
	for _, f := range []string{"status", "workflow", "queue", "tag", "meta", "since", "until", "search"} {
		filterSet = filterSet || cmd.Flags().Changed(f)
	}
	switch {
	case len(args) == 1 && (filterSet || b.allMatching):
		return false, usagef("name a run, or filter runs with --all-matching, not both")
	case len(args) == 1:
		return true, nil
	case !b.allMatching:
		return false, usagef("name a run, or add --all-matching to %s every run the filters match", action)
	}
	f, err := b.filter(time.Now())
	if err != nil {
		return false, err
	}
	api, err := g.api()
	if err != nil {
		return false, err
	}
	ctx, cancel := g.reqCtx(cmd.Context(), 0)
	op, resp, err := api.StartOperation(ctx, &apiclient.OperationRequest{Action: action, Filter: *f, Reason: reason})
	cancel()
	if err != nil {
		return false, err
	}
	if b.noWait {
		return false, g.emit(resp, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "operation %s: %s of the matching runs started; heph operations %s\n", op.ID, action, op.ID)
			return err
		})
	}
	return false, awaitOperation(cmd.Context(), g, api, op)
}

// awaitOperation reads a bulk operation's progress until it ends, with a
// progress bar, and prints how it ended. It fails when the operation
// failed or some runs could not be handled.
func awaitOperation(ctx context.Context, g *globals, api *apiclient.Client, op *apiclient.Operation) error {
	bar := g.newProgress(ctx, op.Action)
	var resp *apiclient.Response
	for !op.Finished() {
		bar.Set(op.Done+op.Failed, op.Total)
		select {
		case <-ctx.Done():
			bar.Finish(false)
			return ctx.Err()
		case <-time.After(opPoll):
		}
		rctx, cancel := g.reqCtx(ctx, 0)
		next, r, err := api.GetOperation(rctx, op.ID)
		cancel()
		if err != nil {
			bar.Finish(false)
			return err
		}
		op, resp = next, r
	}
	bar.Set(op.Done+op.Failed, op.Total)
	bar.Finish(op.Status == "completed")
	if resp == nil { // finished at once
		rctx, cancel := g.reqCtx(ctx, 0)
		_, r, err := api.GetOperation(rctx, op.ID)
		cancel()
		if err != nil {
			return err
		}
		resp = r
	}
	if err := g.emit(resp, func(w io.Writer) error { return printOperation(w, op) }); err != nil {
		return err
	}
	if op.Status != "completed" || op.Failed > 0 {
		return &exitError{code: ExitFailure, msg: fmt.Sprintf("operation %s %s: %d of %d runs failed", op.ID, op.Status, op.Failed, op.Total)}
	}
	return nil
}

func printOperation(w io.Writer, op *apiclient.Operation) error {
	if err := kv(w, "operation", op.ID, "action", op.Action, "status", op.Status,
		"runs", fmt.Sprintf("%d matched, %d done, %d failed", op.Total, op.Done, op.Failed),
		"filter", compactJSON(op.Filter), "reason", op.Reason, "created by", op.CreatedBy,
		"created", op.CreatedAt, "updated", op.UpdatedAt); err != nil {
		return err
	}
	for _, e := range op.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	return nil
}

func newCancel(g *globals) *cobra.Command {
	var (
		b      bulkFlags
		reason string
	)
	cmd := &cobra.Command{
		Use:   "cancel [run]",
		Short: "Cancel a run, or every run that matches filters",
		Long: "cancel cancels a run. With --all-matching and filters instead of a run, it starts a\n" +
			"bulk operation on the server that cancels every matching run, and shows its progress\n" +
			"until it is done (--no-wait: print its id; heph operations ID shows it).",
		Example: `  heph cancel order::42 --reason "customer asked"
  heph cancel --workflow order --status waiting --since 24h --all-matching`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			single, err := b.bulk(cmd, g, args, "cancel", reason)
			if !single {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Run, *apiclient.Response, error) {
				return api.Cancel(ctx, args[0], reason)
			}, func(w io.Writer, run *apiclient.Run) error {
				_, err := fmt.Fprintf(w, "run %s %s\n", run.ID, cancelState(run))
				return err
			})
		},
	}
	b.register(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why the run is cancelled (recorded with it)")
	return cmd
}

func cancelState(r *apiclient.Run) string {
	if r.Status == apiclient.StatusCancelled {
		return "cancelled"
	}
	return "cancelling (" + r.Status + ")"
}

func newRetry(g *globals) *cobra.Command {
	var b bulkFlags
	cmd := &cobra.Command{
		Use:   "retry [run]",
		Short: "Retry a failed run from its failed steps, or every run that matches filters",
		Long: "retry runs a failed run's failed steps again, keeping the outputs of the steps that\n" +
			"completed. A failed code-first workflow run is reset to its last good point instead (as\n" +
			"heph reset-workflow, with its signals re-applied): the new run is printed. With\n" +
			"--all-matching and filters instead of a run, it retries every matching run as a bulk\n" +
			"operation on the server and shows its progress.",
		Example: `  heph retry order::42
  heph retry --status failed --workflow order --since 2h --all-matching`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			single, err := b.bulk(cmd, g, args, "retry", "")
			if !single {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Run, *apiclient.Response, error) {
				return api.Retry(ctx, args[0])
			}, func(w io.Writer, run *apiclient.Run) error {
				if run.ResetFrom != "" && run.ResetFrom != run.ID {
					_, err := fmt.Fprintf(w, "run %s retried: new run %s (%s)\n", run.ResetFrom, run.ID, run.Status)
					return err
				}
				_, err := fmt.Fprintf(w, "run %s retried: %s\n", run.ID, run.Status)
				return err
			})
		},
	}
	b.register(cmd)
	return cmd
}

func newOperations(g *globals) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:     "operations [id]",
		Aliases: []string{"ops"},
		Short:   "List the bulk operations, or show one",
		Example: `  heph operations
  heph operations 0195f1c2-... --wait`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			if len(args) == 0 {
				if wait {
					return usagef("--wait needs an operation id")
				}
				ops, resp, err := api.ListOperations(ctx)
				if err != nil {
					return err
				}
				return g.emit(resp, func(w io.Writer) error {
					tw := newTable(w, "ID", "ACTION", "STATUS", "TOTAL", "DONE", "FAILED", "CREATED BY", "CREATED")
					for _, o := range ops {
						row(tw, o.ID, o.Action, o.Status, o.Total, o.Done, o.Failed, o.CreatedBy, o.CreatedAt)
					}
					return tw.Flush()
				})
			}
			op, resp, err := api.GetOperation(ctx, args[0])
			if err != nil {
				return err
			}
			if wait {
				return awaitOperation(cmd.Context(), g, api, op)
			}
			return g.emit(resp, func(w io.Writer) error { return printOperation(w, op) })
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the operation to end, with a progress bar")
	return cmd
}
