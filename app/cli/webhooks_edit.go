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

// webhooksEdit returns edit, enable, disable and rotate-secret.
func webhooksEdit(g *globals) []*cobra.Command {
	var (
		url, format             string
		events, workflows, tags []string
		anyWorkflow, anyTag     bool
	)
	edit := &cobra.Command{
		Use:   "edit <id>",
		Short: "Change a webhook's URL, events, workflow or tag filter, or format",
		Long: "edit changes the fields its flags name and keeps the others. --event, --workflow and --tag\n" +
			"replace the whole list; --any-workflow and --any-tag remove that filter. The change applies\n" +
			"to the events that happen and the deliveries sent from then on (docs/notifications.md).",
		Example: `  heph webhooks edit wh_01a2... --url https://ops.example.com/hooks/v2
  heph webhooks edit wh_01a2... --event run.failed --event gate.opened --any-workflow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			patch := map[string]any{}
			if f.Changed("url") {
				patch["url"] = url
			}
			if f.Changed("event") {
				patch["events"] = events
			}
			if f.Changed("format") {
				patch["format"] = format
			}
			for _, l := range []struct {
				field, flag, anyFlag string
				list                 []string
				any                  bool
			}{{"workflows", "workflow", "any-workflow", workflows, anyWorkflow}, {"tags", "tag", "any-tag", tags, anyTag}} {
				switch {
				case f.Changed(l.flag) && l.any:
					return usagef("--%s and --%s contradict each other: give one", l.flag, l.anyFlag)
				case f.Changed(l.flag):
					patch[l.field] = l.list
				case l.any:
					patch[l.field] = nil
				}
			}
			if len(patch) == 0 {
				return usagef("name what to change: --url, --event, --workflow, --any-workflow, --tag, --any-tag or --format")
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Webhook, *apiclient.Response, error) {
				return api.EditWebhook(ctx, args[0], patch)
			}, printWebhook)
		},
	}
	edit.Flags().StringVar(&url, "url", "", "the URL that receives the deliveries")
	edit.Flags().StringSliceVar(&events, "event", nil, "the event types to receive, replacing the list (repeat; "+
		strings.Join(hephaestus.WebhookEventTypes(), ", ")+")")
	edit.Flags().StringSliceVar(&workflows, "workflow", nil, "only runs of these workflows, replacing the list (repeat)")
	edit.Flags().StringSliceVar(&tags, "tag", nil, "only runs with one of these tags, replacing the list (repeat)")
	edit.Flags().BoolVar(&anyWorkflow, "any-workflow", false, "remove the workflow filter")
	edit.Flags().BoolVar(&anyTag, "any-tag", false, "remove the tag filter")
	edit.Flags().StringVar(&format, "format", "", "the body: json or slack")

	toggle := func(use, short, long string, fn func(*apiclient.Client, context.Context, string) (*apiclient.Webhook, *apiclient.Response, error)) *cobra.Command {
		return &cobra.Command{
			Use:     use + " <id>",
			Short:   short,
			Long:    long,
			Example: "  heph webhooks " + use + " wh_01a2...",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Webhook, *apiclient.Response, error) {
					return fn(api, ctx, args[0])
				}, func(w io.Writer, h *apiclient.Webhook) error {
					state := "disabled"
					if h.Enabled {
						state = "enabled"
					}
					_, err := fmt.Fprintf(w, "webhook %s %s\n", h.ID, state)
					return err
				})
			},
		}
	}
	enable := toggle("enable", "Enable a webhook: it receives the events from now on and its waiting deliveries are sent",
		"enable makes a disabled webhook receive the events that happen from now on; events of the time\n"+
			"it was disabled are not sent. Its pending deliveries, which waited, are sent again.",
		(*apiclient.Client).EnableWebhook)
	disable := toggle("disable", "Disable a webhook: it receives nothing new and its pending deliveries wait",
		"disable stops a webhook without deleting it: no event that happens while it is disabled is sent\n"+
			"to it, and its pending deliveries are kept, not sent, until it is enabled again. Test\n"+
			"deliveries (heph webhooks test) are still sent. While no webhook is enabled the server\n"+
			"captures no events at all.",
		(*apiclient.Client).DisableWebhook)
	rotate := &cobra.Command{
		Use:   "rotate-secret <id>",
		Short: "Replace a webhook's signing secret; prints the new one, this once",
		Long: "rotate-secret makes the server generate a new signing secret for the webhook and shows it\n" +
			"this once. Every attempt from now on, retries of earlier deliveries included, is signed\n" +
			"with it: update the receiver's secret right away (docs/notifications.md).",
		Example: `  heph webhooks rotate-secret wh_01a2...
  heph webhooks rotate-secret wh_01a2... -o json | jq -r .secret`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.CreatedWebhook, *apiclient.Response, error) {
				return api.RotateWebhookSecret(ctx, args[0])
			}, func(w io.Writer, h *apiclient.CreatedWebhook) error {
				_, err := fmt.Fprintf(w, "webhook %s has a new secret.\nsecret: %s\nKeep it now: it is not shown again.\n", h.ID, h.Secret)
				return err
			})
		},
	}
	return []*cobra.Command{edit, enable, disable, rotate}
}
