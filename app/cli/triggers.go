package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/hephaestus-go/hephaestus/app/apiclient"
)

func newTriggers(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "triggers",
		Aliases: []string{"trigger"},
		Short:   "List, show, put and delete the triggers that start runs on events (no subcommand: list them)",
	}
	ls := triggersList(g)
	cmd.RunE = ls.RunE
	cmd.AddCommand(ls, triggersShow(g), triggersPut(g), triggersDelete(g))
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
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			l, resp, err := api.Triggers(ctx)
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error {
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
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			t, resp, err := api.GetTrigger(ctx, args[0])
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error { return printTrigger(w, t) })
		},
	}
}

func printTrigger(w io.Writer, t *apiclient.Trigger) error {
	return kv(w, "name", t.Name, "event", t.Event, "target", t.TargetKind+" "+t.TargetName, "filter", t.Filter,
		"input", t.Input, "business key", t.BusinessKey, "concurrency key", t.ConcurrencyKey, "declared", t.Declared, "created", t.CreatedAt, "updated", t.UpdatedAt)
}

func triggersPut(g *globals) *cobra.Command {
	var in apiclient.TriggerInput
	cmd := &cobra.Command{
		Use:   "put <name> --event E --target-name N",
		Short: "Create or replace a trigger managed at run time (every started process carries it out)",
		Example: `  heph triggers put welcome --event user.joined --target flow --target-name onboard \
    --filter 'event.data.plan == "pro"' --input '{"user": event.data.user}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if in.Event == "" || in.TargetName == "" {
				return usagef("--event and --target-name are required")
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			t, resp, err := api.PutTrigger(ctx, args[0], &in)
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error { return printTrigger(w, t) })
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
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			resp, err := api.DeleteTrigger(ctx, args[0])
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error { return kv(w, "deleted", args[0]) })
		},
	}
}
