package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newEvents(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event"},
		Short:   "Send, list and show events (no subcommand: list them)",
	}
	ls := eventsList(g)
	cmd.RunE = ls.RunE
	cmd.Flags().AddFlagSet(ls.Flags())
	cmd.AddCommand(ls, eventsSend(g), eventsShow(g))
	return cmd
}

func eventsSend(g *globals) *cobra.Command {
	var data, id string
	cmd := &cobra.Command{
		Use:   "send <name>",
		Short: "Send an event; with --id, sending it again stores nothing and shows the first",
		Example: `  heph events send order.paid --data '{"order": 42, "amount": 120}' --id pay-42
  heph events send invoice.paid --data @invoice.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readPayload(g.env, "--data", data)
			if err != nil {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Event, *apiclient.Response, error) {
				return api.SendEvent(ctx, args[0], body, id)
			}, printEvent)
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the event's payload: JSON text, @file or - for standard input")
	cmd.Flags().StringVar(&id, "id", "", "the event's id: a second send with it is a no-op (default: a new UUIDv7)")
	return cmd
}

func eventsShow(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show <id>",
		Short:   "Show an event",
		Example: `  heph events show pay-42`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Event, *apiclient.Response, error) {
				return api.GetEvent(ctx, args[0])
			}, printEvent)
		},
	}
}

func printEvent(w io.Writer, e *apiclient.Event) error {
	pairs := []any{"id", e.ID, "name", e.Name, "at", e.At, "seq", e.Seq, "duplicate", e.Duplicate, "data", compactJSON(e.Data)}
	for _, f := range e.Firings {
		v := f.Status
		if f.RunID != "" {
			v += " run " + f.RunID
		}
		if f.Error != "" {
			v += ": " + f.Error
		}
		pairs = append(pairs, "trigger "+f.Trigger, v)
	}
	for _, wt := range e.Waits {
		who := "run " + wt.RunID
		if wt.Step != "" {
			who += " step " + wt.Step
		}
		v := "matched"
		if !wt.DeliveredAt.IsZero() {
			v = "delivered"
		}
		pairs = append(pairs, "wait "+wt.ID, v+" to "+who)
	}
	return kv(w, pairs...)
}

func eventsList(g *globals) *cobra.Command {
	var p apiclient.ListEventsParams
	var after, before string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List events, newest first, by name, time or a field of their data",
		Example: `  heph events ls --name order.paid --after 2026-11-01T00:00:00Z
  heph events ls --field customer.id --value '"c-7"'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if p.After, err = parseTimeFlag("--after", after); err != nil {
				return err
			}
			if p.Before, err = parseTimeFlag("--before", before); err != nil {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.EventList, *apiclient.Response, error) {
				return api.Events(ctx, &p)
			}, func(w io.Writer, l *apiclient.EventList) error {
				tw := newTable(w, "SEQ", "ID", "NAME", "AT", "DATA")
				for _, e := range l.Events {
					row(tw, e.Seq, e.ID, e.Name, e.At, truncate(compactJSON(e.Data), 80))
				}
				return tw.Flush()
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&p.Name, "name", "", "only events of this name")
	fl.StringVar(&after, "after", "", "only events stored at or after this time (RFC 3339)")
	fl.StringVar(&before, "before", "", "only events stored before this time (RFC 3339)")
	fl.Int64Var(&p.BeforeSeq, "before-seq", 0, "the page after: events stored before the one with this seq")
	fl.StringVar(&p.Field, "field", "", "a path into the data (customer.id); with --value")
	fl.StringVar(&p.Value, "value", "", `the JSON scalar the value at --field equals: '"c-7"', 12, true`)
	fl.IntVar(&p.Limit, "limit", 100, "at most this many events (at most 1000)")
	return cmd
}

// parseTimeFlag reads an RFC 3339 time; "" is none.
func parseTimeFlag(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, usagef("%s %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", flag, v)
	}
	return t, nil
}
