package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newTriggers(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "triggers",
		Aliases: []string{"trigger"},
		Short:   "List, show, put and delete the triggers that start runs on events, and list their groups (no subcommand: list them)",
	}
	ls := triggersList(g)
	cmd.RunE = ls.RunE
	cmd.AddCommand(ls, triggersShow(g), triggersGroups(g), triggersPut(g), triggersDelete(g))
	return cmd
}

func triggersList(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the triggers, declared in code and managed",
		Example: `  heph triggers ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.TriggerList, *apiclient.Response, error) {
				return api.Triggers(ctx)
			}, func(w io.Writer, l *apiclient.TriggerList) error {
				tw := newTable(w, "NAME", "EVENT", "TARGET", "FILTER", "DECLARED")
				for _, t := range l.Triggers {
					row(tw, t.Name, t.Event, t.TargetKind+" "+t.TargetName, truncate(t.Filter, 60), t.Declared)
				}
				return tw.Flush()
			})
		},
	}
}

func triggersShow(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show <name>",
		Short:   "Show a trigger",
		Example: `  heph triggers show welcome`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Trigger, *apiclient.Response, error) {
				return api.GetTrigger(ctx, args[0])
			}, printTrigger)
		},
	}
}

func triggersGroups(g *globals) *cobra.Command {
	var p apiclient.ListTriggerGroupsParams
	cmd := &cobra.Command{
		Use:   "groups <name>",
		Short: "List the groups of a trigger that debounces, throttles or batches: what waits, and the run each group started",
		Example: `  heph triggers groups reindex --status open
  heph triggers groups reindex --after 42 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.TriggerGroupPage, *apiclient.Response, error) {
				return api.TriggerGroups(ctx, args[0], &p)
			}, func(w io.Writer, l *apiclient.TriggerGroupPage) error {
				tw := newTable(w, "ID", "KEY", "STATUS", "DUE", "EVENTS", "RUN", "ERROR")
				for _, gr := range l.Groups {
					row(tw, gr.ID, gr.Key, gr.Status, gr.DueAt, len(gr.Events), gr.RunID, truncate(gr.Error, 60))
				}
				if err := tw.Flush(); err != nil || l.Next == 0 {
					return err
				}
				_, err := fmt.Fprintf(w, "more: --after %d\n", l.Next)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&p.Status, "status", "", "only groups of this status: open, started, failed or skipped")
	fl.Int64Var(&p.After, "after", 0, "the page after: groups with ids above this one")
	fl.IntVar(&p.Limit, "limit", 100, "at most this many groups (at most 1000)")
	return cmd
}

func printTrigger(w io.Writer, t *apiclient.Trigger) error {
	return kv(w, "name", t.Name, "event", t.Event, "target", t.TargetKind+" "+t.TargetName, "filter", t.Filter,
		"input", t.Input, "business key", t.BusinessKey, "concurrency key", t.ConcurrencyKey, "key", t.Key, "flow control", flowControl(t),
		"declared", t.Declared, "created", t.CreatedAt, "updated", t.UpdatedAt)
}

// flowControl says how a trigger debounces, throttles or batches.
func flowControl(t *apiclient.Trigger) string {
	switch {
	case t.Debounce != "":
		return "debounce " + t.Debounce
	case t.Throttle != nil:
		return fmt.Sprintf("throttle %d/%s", t.Throttle.Limit, t.Throttle.Period)
	case t.Batch != nil:
		return fmt.Sprintf("batch %d/%s", t.Batch.Size, t.Batch.Window)
	}
	return ""
}

// countPer parses a flag's N/duration ("10/1m").
func countPer(flag, s string) (int, string, error) {
	n, d, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	if !ok || err != nil {
		return 0, "", usagef("--%s %q: want N/duration, such as 10/1m", flag, s)
	}
	if _, err := time.ParseDuration(d); err != nil {
		return 0, "", usagef("--%s %q: %q is not a duration such as 30s or 1m", flag, s, d)
	}
	return count, d, nil
}

// flowFlags sets the flow control of a put from its flags.
func flowFlags(in *apiclient.TriggerInput, debounce, throttle, batch string) error {
	if debounce != "" {
		if _, err := time.ParseDuration(debounce); err != nil {
			return usagef("--debounce %q is not a duration such as 30s or 1m", debounce)
		}
		in.Debounce = debounce
	}
	if throttle != "" {
		n, d, err := countPer("throttle", throttle)
		if err != nil {
			return err
		}
		in.Throttle = &apiclient.TriggerThrottle{Limit: n, Period: d}
	}
	if batch != "" {
		n, d, err := countPer("batch", batch)
		if err != nil {
			return err
		}
		in.Batch = &apiclient.TriggerBatch{Size: n, Window: d}
	}
	return nil
}

func triggersPut(g *globals) *cobra.Command {
	var in apiclient.TriggerInput
	var debounce, throttle, batch string
	cmd := &cobra.Command{
		Use:   "put <name> --event E --target-name N",
		Short: "Create or replace a trigger managed at run time (every started process carries it out)",
		Example: `  heph triggers put welcome --event user.joined --target flow --target-name onboard \
    --filter 'event.data.plan == "pro"' --input '{"user": event.data.user}'
  heph triggers put reindex --event doc.changed --target-name reindex --key 'event.data.tenant' --throttle 1/10m
  heph triggers put digest --event comment.added --target-name digest --key 'event.data.thread' --batch 50/5m
  heph triggers put autosave --event doc.typed --target-name save --key 'event.data.doc' --debounce 30s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in.Event == "" || in.TargetName == "" {
				return usagef("--event and --target-name are required")
			}
			if err := flowFlags(&in, debounce, throttle, batch); err != nil {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Trigger, *apiclient.Response, error) {
				return api.PutTrigger(ctx, args[0], &in)
			}, printTrigger)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&in.Event, "event", "", "the name of the events that fire it")
	fl.StringVar(&in.TargetKind, "target", "flow", "what it starts: flow, workflow, document or job")
	fl.StringVar(&in.TargetName, "target-name", "", "the name of the flow, workflow, document or job kind")
	fl.StringVar(&in.Filter, "filter", "", "a CEL expression over event that must be true for a run to start")
	fl.StringVar(&in.Input, "input", "", "a CEL expression whose value is the run's input (default: the event's data)")
	fl.StringVar(&in.BusinessKey, "business-key", "", "a CEL expression whose value is the run's business key: one active run per key")
	fl.StringVar(&in.ConcurrencyKey, "concurrency-key", "", "a CEL expression whose value is the run's concurrency key")
	fl.StringVar(&in.Key, "key", "", "a CEL expression that groups the events for --debounce, --throttle and --batch (default: one group)")
	fl.StringVar(&debounce, "debounce", "", "start one run after this long without an event of the key, with the last event's input (30s)")
	fl.StringVar(&throttle, "throttle", "", "start at most N runs per period per key, deferring the rest (N/period: 10/1m)")
	fl.StringVar(&batch, "batch", "", "collect up to N events of a key, or those within the window of the first, into one run whose input is their list (N/window: 50/5m)")
	return cmd
}

func triggersDelete(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "rm <name>",
		Aliases: []string{"delete"},
		Short:   "Delete a trigger and its pending firings (a declared one returns when its program declares it again)",
		Example: `  heph triggers rm welcome`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, *apiclient.Response, error) {
				resp, err := api.DeleteTrigger(ctx, args[0])
				return resp, resp, err
			}, func(w io.Writer, _ *apiclient.Response) error { return kv(w, "deleted", args[0]) })
		},
	}
}
