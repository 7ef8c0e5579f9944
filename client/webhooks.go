package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

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

// EditWebhook changes the fields of a webhook that patch names (a JSON
// merge patch: url, events, workflows, tags, format, enabled; null
// removes the workflows or tags filter).
func (c *Client) EditWebhook(ctx context.Context, id string, patch map[string]any) (*Webhook, *Response, error) {
	return call[Webhook](ctx, c, &request{method: http.MethodPatch, path: "/webhooks/" + seg(id), body: patch})
}

// EnableWebhook enables a webhook.
func (c *Client) EnableWebhook(ctx context.Context, id string) (*Webhook, *Response, error) {
	return call[Webhook](ctx, c, &request{method: http.MethodPost, path: "/webhooks/" + seg(id) + "/enable"})
}

// DisableWebhook disables a webhook: it receives nothing new and its
// pending deliveries wait until it is enabled again.
func (c *Client) DisableWebhook(ctx context.Context, id string) (*Webhook, *Response, error) {
	return call[Webhook](ctx, c, &request{method: http.MethodPost, path: "/webhooks/" + seg(id) + "/disable"})
}

// RotateWebhookSecret replaces a webhook's signing secret; the answer
// holds the new secret, which no later answer does.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (*CreatedWebhook, *Response, error) {
	return call[CreatedWebhook](ctx, c, &request{method: http.MethodPost, path: "/webhooks/" + seg(id) + "/rotate-secret"})
}
