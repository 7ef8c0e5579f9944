package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hephaestus-go/hephaestus"
	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newWebhooks(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhooks",
		Aliases: []string{"webhook"},
		Short:   "Create, list, show, edit, enable, disable, test and delete webhook subscriptions and read their delivery log",
		Long: "webhooks manages the server's webhook subscriptions: URLs that receive run, step, gate and\n" +
			"schedule events as signed HTTP POSTs, at least once, with retries (docs/notifications.md).\n" +
			"Event types: " + strings.Join(hephaestus.WebhookEventTypes(), ", ") + ".",
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the webhooks",
		Example: `  heph webhooks ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Webhook, *apiclient.Response, error) {
				return api.Webhooks(ctx)
			}, func(w io.Writer, list []apiclient.Webhook) error {
				tw := newTable(w, "ID", "URL", "EVENTS", "FORMAT", "ENABLED", "CREATED")
				for _, h := range list {
					row(tw, h.ID, h.URL, strings.Join(h.Events, ","), h.Format, h.Enabled, h.CreatedAt)
				}
				return tw.Flush()
			})
		},
	}
	show := &cobra.Command{
		Use:     "show <id>",
		Short:   "Show a webhook (never its secret)",
		Example: `  heph webhooks show wh_01a2...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Webhook, *apiclient.Response, error) {
				return api.Webhook(ctx, args[0])
			}, printWebhook)
		},
	}
	rm := &cobra.Command{
		Use:     "rm <id>",
		Aliases: []string{"delete"},
		Short:   "Delete a webhook and its delivery log (pending deliveries are not sent)",
		Example: `  heph webhooks rm wh_01a2...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.DeleteWebhook(ctx, args[0])
			}, "webhook %s deleted", args[0])
		},
	}
	test := &cobra.Command{
		Use:     "test <id>",
		Short:   "Send a test delivery (type webhook.test) now, whatever the webhook's filters",
		Example: `  heph webhooks test wh_01a2...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.WebhookDelivery, *apiclient.Response, error) {
				return api.TestWebhook(ctx, args[0])
			}, func(w io.Writer, d *apiclient.WebhookDelivery) error {
				_, err := fmt.Fprintf(w, "test delivery %s queued; see heph webhooks deliveries %s\n", d.ID, args[0])
				return err
			})
		},
	}
	cmd.AddCommand(webhooksCreate(g), ls, show, rm, webhooksDeliveries(g), test)
	cmd.AddCommand(webhooksEdit(g)...)
	return cmd
}

func printWebhook(w io.Writer, h *apiclient.Webhook) error {
	tw := newTable(w)
	for _, kv := range [][2]any{{"ID", h.ID}, {"URL", h.URL}, {"EVENTS", strings.Join(h.Events, ", ")},
		{"WORKFLOWS", strings.Join(h.Workflows, ", ")}, {"TAGS", strings.Join(h.Tags, ", ")}, {"FORMAT", h.Format},
		{"ENABLED", h.Enabled}, {"SECRET SEALED", h.Sealed}, {"CREATED BY", h.CreatedBy}, {"CREATED", h.CreatedAt}} {
		row(tw, kv[0], kv[1])
	}
	return tw.Flush()
}

func webhooksCreate(g *globals) *cobra.Command {
	var (
		events, workflows, tags []string
		format                  string
		disabled                bool
	)
	cmd := &cobra.Command{
		Use:   "create <url>",
		Short: "Create a webhook; prints its signing secret, this once",
		Long: "create subscribes a URL to events. The server generates the signing secret and shows it\n" +
			"this once: keep it where the receiver verifies the Heph-Signature header\n" +
			"(docs/notifications.md). --workflow and --tag keep only the runs of those workflows and\n" +
			"with one of those tags; --format slack sends Slack-compatible {\"text\": ...} bodies.",
		Example: `  heph webhooks create https://ops.example.com/hooks/heph --event run.failed --event step.failed
  heph webhooks create https://hooks.slack.com/services/T0/B0/XX --format slack --event gate.opened --workflow orders`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(events) == 0 {
				return usagef("name the events with --event (%s)", strings.Join(hephaestus.WebhookEventTypes(), ", "))
			}
			enabled := !disabled
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.CreatedWebhook, *apiclient.Response, error) {
				return api.CreateWebhook(ctx, &apiclient.NewWebhook{URL: args[0], Events: events, Workflows: workflows, Tags: tags,
					Format: format, Enabled: &enabled})
			}, func(w io.Writer, h *apiclient.CreatedWebhook) error {
				if err := printWebhook(w, &h.Webhook); err != nil {
					return err
				}
				_, err := fmt.Fprintf(w, "\nsecret: %s\nKeep it now: it is not shown again.\n", h.Secret)
				return err
			})
		},
	}
	cmd.Flags().StringSliceVar(&events, "event", nil, "an event type to receive (repeat, or separate with commas)")
	cmd.Flags().StringSliceVar(&workflows, "workflow", nil, "only runs of this workflow (repeat for several)")
	cmd.Flags().StringSliceVar(&tags, "tag", nil, "only runs with this tag (repeat: any of them)")
	cmd.Flags().StringVar(&format, "format", "json", "the body: json or slack")
	cmd.Flags().BoolVar(&disabled, "disabled", false, "create it disabled (it receives only test deliveries)")
	return cmd
}

func webhooksDeliveries(g *globals) *cobra.Command {
	var (
		status string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "deliveries <id>",
		Short: "Show a webhook's delivery log: each delivery's status, attempts, last answer and next attempt",
		Example: `  heph webhooks deliveries wh_01a2...
  heph webhooks deliveries wh_01a2... --status dead -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch status {
			case "", "pending", "delivered", "dead":
			default:
				return usagef("--status %q: use pending, delivered or dead", status)
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.WebhookDelivery, *apiclient.Response, error) {
				return api.WebhookDeliveries(ctx, args[0], status, limit)
			}, func(w io.Writer, list []apiclient.WebhookDelivery) error {
				tw := newTable(w, "DELIVERY", "EVENT", "RUN", "STATUS", "ATTEMPTS", "LAST", "NEXT", "ERROR")
				for _, d := range list {
					last := "-"
					if d.LastStatus != 0 {
						last = fmt.Sprint(d.LastStatus)
					}
					row(tw, d.ID, d.Event, d.RunID, d.Status, d.Attempts, last, d.NextAttempt, d.LastError)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only deliveries with this status: pending, delivered or dead")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (default 100, at most 1000)")
	return cmd
}
