package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/server"
)

// Webhook is a webhook subscription, without its secret.
type Webhook = hephaestus.Webhook

// CreatedWebhook is a webhook just created, with its signing secret.
type CreatedWebhook = server.CreatedWebhook

// NewWebhook is the body of a webhook's creation.
type NewWebhook = server.NewWebhook

// WebhookDelivery is a delivery of an event to a webhook, with its
// attempts.
type WebhookDelivery = hephaestus.WebhookDelivery

// CreateWebhook creates a webhook; the answer holds its secret, which no
// later answer does.
func (c *Client) CreateWebhook(ctx context.Context, w *NewWebhook) (*CreatedWebhook, *Response, error) {
	return call[CreatedWebhook](ctx, c, &request{method: http.MethodPost, path: "/webhooks", body: w})
}

// Webhooks lists the webhooks.
func (c *Client) Webhooks(ctx context.Context) ([]Webhook, *Response, error) {
	return list[Webhook](ctx, c, &request{method: http.MethodGet, path: "/webhooks"})
}

// Webhook returns a webhook.
func (c *Client) Webhook(ctx context.Context, id string) (*Webhook, *Response, error) {
	return call[Webhook](ctx, c, &request{method: http.MethodGet, path: "/webhooks/" + seg(id)})
}

// DeleteWebhook deletes a webhook and its delivery log.
func (c *Client) DeleteWebhook(ctx context.Context, id string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: "/webhooks/" + seg(id)})
}

// WebhookDeliveries lists a webhook's deliveries, newest first; status
// ("pending", "delivered", "dead") and limit filter when set.
func (c *Client) WebhookDeliveries(ctx context.Context, id, status string, limit int) ([]WebhookDelivery, *Response, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return list[WebhookDelivery](ctx, c, &request{method: http.MethodGet, path: "/webhooks/" + seg(id) + "/deliveries", query: q})
}

// TestWebhook queues a test delivery to a webhook.
func (c *Client) TestWebhook(ctx context.Context, id string) (*WebhookDelivery, *Response, error) {
	return call[WebhookDelivery](ctx, c, &request{method: http.MethodPost, path: "/webhooks/" + seg(id) + "/test"})
}
