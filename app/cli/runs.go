package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
)

// longPoll is how long one long-poll request asks the server to wait; the
// server caps its waits at a minute.
const longPoll = 30 * time.Second

var startKinds = []string{"flow", "workflow", "job", "document"}

func newStart(g *globals) *cobra.Command {
	var (
		req        apiclient.StartRequest
		input      string
		meta, tags []string
		attrs      []string
		idem       string
		wait       bool
		timeout    time.Duration
		msg        *messageFlags
	)
	cmd := &cobra.Command{
		Use:   "start <name>",
		Short: "Start a run of a flow, workflow, job kind or document",
		Example: `  heph start order --input '{"id": 42}'
  heph start order --input @order.json --business-value order-42 --tag web --meta tenant=acme
  heph start digest --kind document --idempotency-key digest-2025-01-01 --wait
  heph start report --timeout 1h
  heph start order --attr amount=150 --attr region='["eu","us"]' --attr updated=2026-11-01
  heph start cart --kind workflow --workflow-id cart-7 --signal add --signal-input '"apple"' --idempotency-key add-1
  heph start cart --kind workflow --workflow-id cart-7 --update checkout --update-input '{}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(startKinds, req.Kind) {
				return usagef("--kind must be one of %s, got %q", strings.Join(startKinds, ", "), req.Kind)
			}
			if req.Version < 0 {
				return usagef("--version must not be negative, got %d", req.Version)
			}
			if err := msg.check(&req, wait); err != nil {
				return err
			}
			req.Name = args[0]
			var err error
			if req.Input, err = readPayload(g.env, "--input", input); err != nil {
				return err
			}
			if req.Metadata, err = parseKV("--meta", meta); err != nil {
				return err
			}
			req.Tags = tags
			if req.SearchAttributes, err = parseAttrs(attrs); err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout must not be negative, got %v", timeout)
			}
			if timeout > 0 {
				req.ExecutionTimeout = timeout.String()
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			if msg.set() {
				return startWithMessage(cmd.Context(), g, api, &req, idem, msg, wait)
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			run, created, resp, err := api.StartRun(ctx, &req, idem)
			cancel()
			if err != nil {
				return startError(cmd.Context(), g, api, &req, err)
			}
			if wait {
				return awaitResult(cmd.Context(), g, api, run.ID, 0)
			}
			return g.emit(resp, func(w io.Writer) error {
				verb := "started"
				if !created {
					verb = "exists (same idempotency key)"
				}
				fmt.Fprintf(w, "run %s %s: %s %s v%d, %s\n", run.ID, verb, kindOf(run), run.Workflow, run.Version, run.Status)
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Kind, "kind", "flow", "what to start: flow, workflow, job or document")
	fl.StringVar(&input, "input", "", "the run's input: JSON text, @file or - for standard input")
	fl.IntVar(&req.Version, "version", 0, "the definition's version (default the latest)")
	fl.StringVar(&req.BusinessValue, "business-value", "", "the value of the flow's business key (the run id is key::value)")
	fl.StringVar(&req.WorkflowID, "workflow-id", "", "the run id of a code-first workflow")
	fl.StringArrayVar(&tags, "tag", nil, "a tag of the run (repeatable)")
	fl.StringArrayVar(&meta, "meta", nil, "metadata key=value of the run (repeatable)")
	fl.StringArrayVar(&attrs, "attr", nil, "a search attribute name=value of the run, which its flow declares; the value is read as JSON when it is JSON (500, true, [\"eu\"]), else as text (repeatable)")
	fl.StringVar(&req.ConcurrencyKey, "concurrency-key", "", "the run's concurrency key for flow control")
	fl.StringVar(&idem, "idempotency-key", "", "a key that makes a repeated start return the same run")
	fl.DurationVar(&timeout, "timeout", 0, "the run's execution timeout (such as 1h): it fails as timed out if not finished by then")
	fl.BoolVar(&wait, "wait", false, "wait for the run to end and print its result (exit 7 when it failed or was cancelled)")
	msg = addMessageFlags(fl)
	return cmd
}

// kindOf is a run's kind as the server names it (hephtype.KindOf).
func kindOf(r *apiclient.Run) string {
	if r.Kind == "" {
		return "flow"
	}
	return r.Kind
}

func newResult(g *globals) *cobra.Command {
	var wait time.Duration
	var forever bool
	cmd := &cobra.Command{
		Use:   "result <run>",
		Short: "Print a run's result, waiting for its end if asked",
		Long: "result prints a run's status and output. With --wait it waits up to that long for the\n" +
			"run to end (--wait 0 with --forever: until it ends). Exit 7 when the run failed or was\n" +
			"cancelled, 8 when it had not ended by the end of the wait.",
		Example: `  heph result order::42
  heph result order::42 --wait 5m
  heph result order::42 --forever -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait < 0 {
				return usagef("--wait must not be negative, got %v", wait)
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			if forever {
				return awaitResult(cmd.Context(), g, api, args[0], 0)
			}
			if wait == 0 {
				ctx, cancel := g.reqCtx(cmd.Context(), 0)
				run, done, resp, err := api.Result(ctx, args[0], 0)
				cancel()
				if err != nil {
					return err
				}
				return printResult(g, run, done, resp)
			}
			return awaitResult(cmd.Context(), g, api, args[0], wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait for the run to end (0: answer at once)")
	cmd.Flags().BoolVar(&forever, "forever", false, "wait until the run ends, however long")
	return cmd
}

// awaitResult long-polls the run's result until it ends, or until limit
// passes (0: no limit), and prints it.
func awaitResult(ctx context.Context, g *globals, api *apiclient.Client, id string, limit time.Duration) error {
	var deadline time.Time
	if limit > 0 {
		deadline = time.Now().Add(limit)
	}
	for {
		poll := longPoll
		if !deadline.IsZero() {
			poll = min(poll, time.Until(deadline))
		}
		rctx, cancel := g.reqCtx(ctx, max(poll, 0))
		run, done, resp, err := api.Result(rctx, id, max(poll, time.Millisecond))
		cancel()
		if err != nil {
			return err
		}
		if done || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return printResult(g, run, done, resp)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// printResult prints a run's result and returns the exit it calls for.
func printResult(g *globals, run *apiclient.Run, done bool, resp *apiclient.Response) error {
	status := runStatus(run, time.Now())
	err := g.emit(resp, func(w io.Writer) error {
		fmt.Fprintf(w, "run %s %s\n", run.ID, status)
		if run.Error != "" {
			fmt.Fprintf(w, "error: %s\n", run.Error)
		}
		if out := compactJSON(run.Output); out != "" {
			return writeJSON(w, run.Output)
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case !done:
		if !g.json() {
			fmt.Fprintln(g.env.Stderr, notFinished(run.ID, status))
		}
		return exitWith(ExitNotFinished)
	case run.Status == apiclient.StatusFailed || run.Status == apiclient.StatusCancelled:
		return exitWith(ExitRunFailed)
	}
	return nil
}

// filterFlags are the run filters of ls and of the bulk cancel and retry.
type filterFlags struct {
	statuses, tags, meta, ids            []string
	workflow, queue, since, until, query string
	parent, build, where                 string
	version                              int
	// scheduled lets --status take scheduled (ls: the API lists those
	// runs; a bulk operation's filter has no such status).
	scheduled bool
}

func (f *filterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	help := "runs of these statuses (comma-separated or repeated): pending, running, waiting, completed, failed, cancelled, continued"
	if f.scheduled {
		help += "; or scheduled alone: the runs whose every task is due later"
	}
	fl.StringSliceVar(&f.statuses, "status", nil, help)
	fl.StringVar(&f.workflow, "workflow", "", "runs of this flow, workflow, document or job kind")
	fl.StringVar(&f.queue, "queue", "", "runs with work on this queue")
	fl.StringArrayVar(&f.tags, "tag", nil, "runs with this tag (repeatable: every tag)")
	fl.StringArrayVar(&f.meta, "meta", nil, "runs whose metadata has key=value (repeatable)")
	fl.StringVar(&f.since, "since", "", "runs created at or after: RFC 3339, a date, or a duration ago (24h)")
	fl.StringVar(&f.until, "until", "", "runs created before: RFC 3339, a date, or a duration ago")
	fl.StringVar(&f.query, "search", "", "runs whose id, business id or error holds this text")
	fl.IntVar(&f.version, "version", 0, "runs of this flow or document version")
	fl.StringVar(&f.where, "where", "", "runs whose search attributes meet a filter, such as 'amount > 100 and region in [eu, us]'")
	fl.StringVar(&f.parent, "parent", "", "runs whose parent is this run (a workflow's children)")
	fl.StringVar(&f.build, "build", "", "workflow runs of this build (those it started; for a workflow that auto-upgrades, those it decided last)")
}

func (f *filterFlags) filter(now time.Time) (*apiclient.RunFilter, error) {
	out := &apiclient.RunFilter{Workflow: f.workflow, Queue: f.queue, Tags: f.tags, Text: f.query, Version: f.version, Parent: f.parent, Build: f.build, Where: f.where}
	if f.version < 0 {
		return nil, usagef("--version must not be negative, got %d", f.version)
	}
	for _, id := range f.ids {
		if id = strings.TrimSpace(id); id != "" {
			out.IDs = append(out.IDs, id)
		}
	}
	if len(out.IDs) > 1000 {
		return nil, usagef("--id: %d run ids, more than 1000", len(out.IDs))
	}
	statuses := []string{"pending", "running", "waiting", "completed", "failed", "cancelled", "continued"}
	for _, s := range f.statuses {
		switch {
		case s == statusScheduled && !f.scheduled:
			return nil, usagef("--status scheduled: this command takes stored statuses only (%s)", strings.Join(statuses, ", "))
		case s == statusScheduled && len(f.statuses) > 1:
			return nil, usagef("--status scheduled: pass it alone, not with other statuses")
		case s != statusScheduled && !slices.Contains(statuses, s):
			return nil, usagef("--status %q: not a run status%s", s, suggest.DidYouMean(s, append(statuses, statusScheduled), false))
		}
		out.Statuses = append(out.Statuses, s)
	}
	var err error
	if out.Metadata, err = parseKV("--meta", f.meta); err != nil {
		return nil, err
	}
	if out.CreatedAfter, err = parseTime("--since", f.since, now); err != nil {
		return nil, err
	}
	if out.CreatedBefore, err = parseTime("--until", f.until, now); err != nil {
		return nil, err
	}
	return out, nil
}

func newList(g *globals) *cobra.Command {
	var (
		ff     filterFlags
		limit  int
		cursor string
		all    bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List runs, newest first",
		Long: "ls lists runs that match the filters, newest first, a page at a time (--limit). When\n" +
			"there are more, the cursor of the next page is printed to standard error; --all\n" +
			"follows every page.",
		Example: `  heph ls --status failed --since 24h
  heph ls --workflow order --tag web --meta tenant=acme --limit 20
  heph ls --search timeout --all -o json
  heph ls --workflow order --where 'amount > 100 and updated < 2026-11-01'
  heph ls --parent 0190a1b2-... --version 2
  heph ls --id 0190a1b2-... --id 0190a1c3-...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must not be negative, got %d", limit)
			}
			f, err := ff.filter(time.Now())
			if err != nil {
				return err
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			var (
				runs []apiclient.Run
				resp *apiclient.Response
				next = cursor
			)
			for {
				ctx, cancel := g.reqCtx(cmd.Context(), 0)
				page, r, err := api.ListRuns(ctx, f, limit, next)
				cancel()
				if err != nil {
					return err
				}
				resp, next = r, page.Next
				runs = append(runs, page.Runs...)
				if !all || next == "" {
					break
				}
			}
			if all && g.json() {
				return g.emitValue(apiclient.RunList{Runs: nonNil(runs)}, nil)
			}
			err = g.emit(resp, func(w io.Writer) error {
				tw := newTable(w, "ID", "BUSINESS ID", "KIND", "WORKFLOW", "VERSION", "STATUS", "CREATED", "FINISHED", "ERROR")
				now := time.Now()
				for _, r := range runs {
					row(tw, r.ID, r.BusinessID, r.Kind, r.Workflow, r.Version, runStatus(&r, now), r.CreatedAt, r.FinishedAt, truncate(r.Error, 60))
				}
				return tw.Flush()
			})
			if err == nil && next != "" && !g.json() {
				fmt.Fprintf(g.env.Stderr, "more: heph ls --cursor %s (or --all)\n", next)
			}
			return err
		},
	}
	ff.scheduled = true
	ff.register(cmd)
	cmd.Flags().StringSliceVar(&ff.ids, "id", nil, "only these runs (comma-separated or repeated; at most 1000)")
	cmd.Flags().IntVar(&limit, "limit", 0, "runs per page (default the server's, 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	cmd.Flags().BoolVar(&all, "all", false, "follow every page")
	return cmd
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func newShow(g *globals) *cobra.Command {
	var attempts, follow bool
	cmd := &cobra.Command{
		Use:   "show <run>",
		Short: "Show a run: status, ids, steps and a picture of its DAG; --follow prints it again as it changes",
		Example: `  heph show order::42
  heph show order::42 --attempts
  heph show order::42 --follow
  heph show 0195f1c2-... -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := g.api()
			if err != nil {
				return err
			}
			if follow {
				return followShow(cmd.Context(), g, api, args[0], func(run *apiclient.Run, body []byte) error {
					if g.json() {
						_, err := fmt.Fprintf(g.env.Stdout, "%s\n", compactJSON(body))
						return err
					}
					return printRunSteps(g.env.Stdout, run, nil, attempts, time.Now())
				})
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			run, resp, err := api.GetRun(ctx, args[0])
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(g.env.Stdout, resp.Body)
			}
			// The DAG of a flow or document run; a code-first workflow
			// has none, and a server that cannot draw it is no failure.
			var graph *graphtext.Graph
			if run.Kind != "workflow" {
				name := run.Workflow
				if run.Document != nil {
					name = run.Document.Name
				}
				if _, gresp, err := api.GraphJSON(ctx, name, run.Version); err == nil {
					graph = new(graphtext.Graph)
					if json.Unmarshal(gresp.Body, graph) != nil {
						graph = nil
					}
				}
			}
			return printRunSteps(g.env.Stdout, run, graph, attempts, time.Now())
		},
	}
	cmd.Flags().BoolVar(&attempts, "attempts", false, "list each step's attempts: worker, times, outcome, error")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the run again each time its status or steps change, until it ends (without the DAG)")
	return cmd
}

// printRun prints a run for people; now is when a scheduled run is due
// from.
func printRun(w io.Writer, r *apiclient.Run, graph *graphtext.Graph, now time.Time) error {
	return printRunSteps(w, r, graph, false, now)
}

// printRunSteps is printRun, with each step's attempts when showAttempts
// is set (heph show --attempts).
func printRunSteps(w io.Writer, r *apiclient.Run, graph *graphtext.Graph, showAttempts bool, now time.Time) error {
	pairs := []any{"id", r.ID, "kind", kindOf(r), "workflow", fmt.Sprintf("%s v%d", r.Workflow, r.Version), "status", runStatus(r, now)}
	if r.ScheduledFor != nil {
		pairs = append(pairs, "due", *r.ScheduledFor)
	}
	if r.Deadline != nil {
		pairs = append(pairs, "deadline", *r.Deadline)
	}
	if r.Condition != nil && r.Condition.Kind != "" {
		pairs = append(pairs, "condition", strings.TrimSpace(r.Condition.Kind+" "+r.Condition.Reason))
	}
	if r.BusinessID != "" {
		pairs = append(pairs, "business id", r.BusinessID)
	}
	if r.Document != nil {
		pairs = append(pairs, "document", fmt.Sprintf("%s v%d (%s)", r.Document.Name, r.Document.Version, truncate(r.Document.Hash, 13)))
	}
	if len(r.Tags) > 0 {
		pairs = append(pairs, "tags", r.Tags)
	}
	if len(r.Metadata) > 0 {
		b, _ := json.Marshal(r.Metadata)
		pairs = append(pairs, "metadata", string(b))
	}
	if len(r.SearchAttributes) > 0 {
		b, _ := json.Marshal(r.SearchAttributes)
		pairs = append(pairs, "search attributes", string(b))
	}
	if r.ConcurrencyKey != "" {
		pairs = append(pairs, "concurrency key", r.ConcurrencyKey)
	}
	if r.BuildID != "" {
		pairs = append(pairs, "build", r.BuildID)
	}
	pairs = append(pairs, "created", r.CreatedAt, "updated", r.UpdatedAt, "finished", r.FinishedAt)
	if in := compactJSON(r.Input); in != "" {
		pairs = append(pairs, "input", truncate(in, 200))
	}
	if out := compactJSON(r.Output); out != "" {
		pairs = append(pairs, "output", truncate(out, 200))
	}
	if r.Error != "" {
		pairs = append(pairs, "error", r.Error)
	}
	if err := kv(w, pairs...); err != nil {
		return err
	}
	if err := printWaits(w, r, now); err != nil {
		return err
	}
	if err := printSteps(w, r.Steps, showAttempts, now); err != nil {
		return err
	}
	if graph != nil && len(graph.Nodes) > 0 {
		states := map[string]string{}
		for _, s := range r.Steps {
			states[s.Name] = s.Status
		}
		fmt.Fprintln(w)
		_, err := io.WriteString(w, graphtext.Text(graph.WithStates(states)))
		return err
	}
	return nil
}

func newHistory(g *globals) *cobra.Command {
	var (
		follow bool
		after  int64
	)
	cmd := &cobra.Command{
		Use:   "history <run>",
		Short: "Print a run's history; --follow waits for new events",
		Long: "history prints a run's history events in order. With --follow it keeps waiting for new\n" +
			"events (a stream of server-sent events, resumed after a dropped connection) until the\n" +
			"run ends; with -o json and --follow it\n" +
			"prints one JSON event per line.",
		Example: `  heph history order::42
  heph history order::42 --follow
  heph history order::42 --after 12 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usagef("--after must not be negative, got %d", after)
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			if !follow {
				ctx, cancel := g.reqCtx(cmd.Context(), 0)
				h, resp, err := api.History(ctx, args[0], after, 0)
				cancel()
				if err != nil {
					return err
				}
				return g.emit(resp, func(w io.Writer) error {
					tw := newTable(w, historyHeader...)
					for _, e := range h.Events {
						historyRow(tw, &e)
					}
					return tw.Flush()
				})
			}
			return followHistory(cmd.Context(), g, api, args[0], after)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "wait for new events until the run ends")
	cmd.Flags().Int64Var(&after, "after", 0, "only the events after this sequence number")
	cmd.AddCommand(newHistoryExport(g))
	return cmd
}

var historyHeader = []string{"SEQ", "AT", "KIND", "STEP", "ATTEMPT", "NAME", "DETAIL"}

func historyRow(w io.Writer, e *apiclient.HistoryEvent) {
	step := e.Step
	if step != "" && e.Index > 0 {
		step = fmt.Sprintf("%s[%d]", step, e.Index)
	}
	detail := compactJSON(e.Data)
	if e.Error != "" {
		detail = e.Error
	}
	attempt := any(e.Attempt)
	if e.Attempt == 0 {
		attempt = nil
	}
	row(w, e.Seq, e.At, e.Kind, step, attempt, e.Name, truncate(detail, 80))
}
