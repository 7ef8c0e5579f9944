package hephaestus

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/notify"
	"github.com/hephaestus-go/hephaestus/store"
)

// Webhook notifications (docs/notifications.md): subscriptions that
// receive run, step, gate and schedule events as signed HTTP POSTs,
// delivered at least once with retries and exponential backoff.

var (
	// ErrWebhookNotFound: no webhook has the id.
	ErrWebhookNotFound = store.ErrWebhookNotFound
	// ErrWebhooksUnavailable: the store keeps no webhooks.
	ErrWebhooksUnavailable = errors.New("webhooks are unavailable")
)

// The webhook event types (Webhook.Events); internal/notify uses the
// same values (webhooks_internal_test.go checks them).
const (
	WebhookRunStarted         = "run.started"
	WebhookRunCompleted       = "run.completed"
	WebhookRunFailed          = "run.failed"
	WebhookRunCancelled       = "run.cancelled"
	WebhookStepCompleted      = "step.completed"
	WebhookStepFailed         = "step.failed"
	WebhookGateOpened         = "gate.opened"
	WebhookGateDecided        = "gate.decided"
	WebhookScheduleTickFailed = "schedule.tick_failed"
	// WebhookTest is the type of the deliveries TestWebhook sends.
	WebhookTest = "webhook.test"
)

// WebhookEventTypes lists the event types a webhook can subscribe to.
func WebhookEventTypes() []string { return slices.Clone(notify.Types) }

// The headers of a webhook delivery.
const (
	// WebhookIDHeader carries the delivery's id: the same on every retry
	// of the delivery, so receivers de-duplicate with it.
	WebhookIDHeader = "Heph-Delivery-Id"
	// WebhookEventHeader carries the event type.
	WebhookEventHeader = "Heph-Event"
	// WebhookTimestampHeader carries the time of the attempt, in Unix
	// seconds.
	WebhookTimestampHeader = "Heph-Timestamp"
	// WebhookSignatureHeader carries "v1=" and the hex HMAC-SHA256 of
	// "<timestamp>.<body>", keyed with the webhook's secret.
	WebhookSignatureHeader = "Heph-Signature"
)

// The webhook body formats.
const (
	// WebhookFormatJSON: the event as JSON (WebhookPayload).
	WebhookFormatJSON = "json"
	// WebhookFormatSlack: a Slack-compatible message, {"text": "..."}.
	WebhookFormatSlack = "slack"
)

// VerifyWebhook checks a webhook delivery as a receiver should before it
// trusts it: the timestamp header is within tolerance of now (5 minutes
// is usual; it bounds replays) and the signature header holds the
// HMAC-SHA256 of "<timestamp>.<body>" keyed with secret, the webhook's
// secret as CreateWebhook returned it. body is the request body as
// received, unparsed.
func VerifyWebhook(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	return notify.Verify(secret, h.Get(WebhookTimestampHeader), h.Get(WebhookSignatureHeader), body, now, tolerance)
}

// WebhookConfig configures the delivery of webhook notifications by a
// started Client. Every process that starts a Client on the database
// delivers (leases keep two from sending the same delivery at once).
type WebhookConfig struct {
	// Disabled keeps this Client from delivering.
	Disabled bool
	// MaxAttempts is how many attempts a delivery gets before it is
	// dead (a dead letter, kept in the delivery log). Defaults to 10.
	MaxAttempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each further one up to MaxBackoff. Defaults to 2 minutes and 4
	// hours: 10 attempts span about 17 hours.
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt. Defaults to 10 seconds.
	Timeout time.Duration
	// PollInterval is how often the Client looks for new events and due
	// deliveries. Defaults to 1 second.
	PollInterval time.Duration
	// Retention is how long delivered and dead deliveries stay in the
	// delivery log. Defaults to 7 days.
	Retention time.Duration
	// HTTPClient sends the deliveries. Defaults to a client with Timeout
	// that follows no redirect (a 3xx answer is a failed attempt).
	HTTPClient *http.Client
}

// Webhook is a webhook subscription. Its secret is returned once, by
// CreateWebhook, and never again.
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are the event types it receives.
	Events []string `json:"events"`
	// Workflows and Tags filter the runs: when set, a run event is sent
	// only for a run of one of the workflows that has one of the tags.
	// Events of no run (schedule.tick_failed) go only to webhooks
	// without them.
	Workflows []string `json:"workflows,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	// Format is WebhookFormatJSON or WebhookFormatSlack.
	Format  string `json:"format"`
	Enabled bool   `json:"enabled"`
	// Sealed tells whether the secret is stored encrypted with
	// Config.SecretKeys (false: stored as is).
	Sealed    bool      `json:"sealed"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// NewWebhook describes a webhook to create.
type NewWebhook struct {
	// URL receives the deliveries: http or https, with a host, without
	// credentials. Required.
	URL string
	// Events are event types of WebhookEventTypes. Required.
	Events    []string
	Workflows []string
	Tags      []string
	// Format defaults to WebhookFormatJSON.
	Format string
	// Disabled creates it disabled: it receives nothing.
	Disabled bool
	// CreatedBy names its creator (the server sets the caller).
	CreatedBy string
}

// WebhookInputError is invalid input to CreateWebhook or EditWebhook: it
// names the field at fault. It wraps ErrInvalidInput.
type WebhookInputError struct {
	// Field is "url", "events", "workflows", "tags" or "format" ("body"
	// for an EditWebhook that changes nothing).
	Field   string
	Message string
}

func (e *WebhookInputError) Error() string { return "webhook " + e.Field + ": " + e.Message }

// Unwrap makes errors.Is(err, ErrInvalidInput) true.
func (e *WebhookInputError) Unwrap() error { return ErrInvalidInput }

func inputErr(field, format string, args ...any) error {
	return &WebhookInputError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// check validates and normalizes w.
func (w *NewWebhook) check() error {
	if err := checkWebhookURL(w.URL); err != nil {
		return err
	}
	if err := checkWebhookEvents(w.Events); err != nil {
		return err
	}
	if err := checkWebhookFilter("workflows", w.Workflows); err != nil {
		return err
	}
	if err := checkWebhookFilter("tags", w.Tags); err != nil {
		return err
	}
	if w.Format == "" {
		w.Format = WebhookFormatJSON
	}
	return checkWebhookFormat(w.Format)
}

func checkWebhookEvents(events []string) error {
	if len(events) == 0 {
		return inputErr("events", "name at least one of %s", strings.Join(notify.Types, ", "))
	}
	for _, e := range events {
		if !slices.Contains(notify.Types, e) {
			return inputErr("events", "unknown event type %q: use %s", e, strings.Join(notify.Types, ", "))
		}
	}
	return nil
}

func checkWebhookFilter(field string, list []string) error {
	for _, v := range list {
		if strings.TrimSpace(v) == "" || len(v) > 200 {
			return inputErr(field, "entries must be 1 to 200 bytes, not blank")
		}
	}
	return nil
}

func checkWebhookFormat(f string) error {
	switch f {
	case WebhookFormatJSON, WebhookFormatSlack:
		return nil
	}
	return inputErr("format", "%q is not %q or %q", f, WebhookFormatJSON, WebhookFormatSlack)
}

func checkWebhookURL(raw string) error {
	if raw == "" {
		return inputErr("url", "is required")
	}
	if len(raw) > store.MaxWebhookURL {
		return inputErr("url", "is %d bytes long, more than %d", len(raw), store.MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return inputErr("url", "%q is not a URL: %v", raw, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return inputErr("url", "the scheme must be http or https, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return inputErr("url", "%q has no host", raw)
	case u.User != nil:
		return inputErr("url", "must not hold credentials (they would be shown with the webhook); the signature authenticates deliveries")
	case u.Fragment != "":
		return inputErr("url", "must not have a fragment")
	}
	return nil
}

func (c *Client) webhookStore() (store.Webhooks, error) {
	s, ok := c.cfg.Store.(store.Webhooks)
	if !ok {
		return nil, fmt.Errorf("%w: the store (%T) keeps no webhooks", ErrWebhooksUnavailable, c.cfg.Store)
	}
	return s, nil
}

func webhookOf(w *store.Webhook) *Webhook {
	return &Webhook{ID: w.ID, URL: w.URL, Events: w.Events, Workflows: w.Workflows, Tags: w.Tags, Format: w.Format, Enabled: w.Enabled,
		Sealed: w.KeyID != "", CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt.UTC()}
}

// webhookSecretName is the name a webhook's secret is sealed under (the
// additional data of its encryption: a sealed secret cannot be moved to
// another webhook).
func webhookSecretName(id string) string { return "webhook:" + id }

// CreateWebhook creates a webhook and returns it with its signing
// secret: 256 random bits, "whsec_" and base64url. The secret is returned
// this once: keep it where the receiver verifies deliveries
// (VerifyWebhook). It is stored sealed with Config.SecretKeys when one
// is set, else as is (whoever reads the database can then sign as the
// server; set a key ring in production). Invalid input fails with a
// *WebhookInputError naming the field.
func (c *Client) CreateWebhook(ctx context.Context, nw *NewWebhook) (*Webhook, string, error) {
	if nw == nil {
		return nil, "", inputErr("url", "is required")
	}
	w := *nw
	w.Events, w.Workflows, w.Tags = slices.Compact(slices.Sorted(slices.Values(w.Events))), slices.Clone(w.Workflows), slices.Clone(w.Tags)
	if err := w.check(); err != nil {
		return nil, "", err
	}
	ws, err := c.webhookStore()
	if err != nil {
		return nil, "", err
	}
	sw := &store.Webhook{ID: "wh_" + newID()[:20], URL: w.URL, Events: w.Events, Workflows: w.Workflows, Tags: w.Tags, Format: w.Format,
		Enabled: !w.Disabled, CreatedBy: w.CreatedBy, CreatedAt: c.cfg.Clock.Now().UTC().Truncate(time.Microsecond)}
	secret, sealed, err := c.newWebhookSecret(sw.ID)
	if err != nil {
		return nil, "", fmt.Errorf("create webhook: %w", err)
	}
	sw.KeyID, sw.Nonce, sw.Secret = sealed.KeyID, sealed.Nonce, sealed.Secret
	if err := ws.CreateWebhook(ctx, sw); err != nil {
		return nil, "", fmt.Errorf("create webhook: %w", err)
	}
	if sw.KeyID == "" {
		c.cfg.Logger.Warn("webhook secret stored unsealed: set Config.SecretKeys (heph server: HEPH_SECRET_KEYS) to encrypt it", "webhook", sw.ID)
	}
	return webhookOf(sw), secret, nil
}

// newWebhookSecret draws a webhook's signing secret, 256 random bits,
// "whsec_" and base64url, and returns it with what the store keeps of
// it: sealed with Config.SecretKeys when one is set, else as is.
func (c *Client) newWebhookSecret(id string) (string, *store.WebhookSecret, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, err
	}
	secret := "whsec_" + base64.RawURLEncoding.EncodeToString(raw)
	out := &store.WebhookSecret{Secret: []byte(secret)}
	if c.cfg.SecretKeys != nil && c.cfg.SecretKeys.k != nil {
		var err error
		if out.KeyID, out.Nonce, out.Secret, err = c.cfg.SecretKeys.k.Seal(webhookSecretName(id), []byte(secret)); err != nil {
			return "", nil, err
		}
	}
	return secret, out, nil
}

// webhookSecret opens a webhook's secret, for signing.
func (c *Client) webhookSecret(w *store.Webhook) (string, error) {
	if w.KeyID == "" {
		return string(w.Secret), nil
	}
	keys, err := c.secretKeys()
	if err != nil {
		return "", err
	}
	v, err := keys.Open(webhookSecretName(w.ID), w.KeyID, w.Nonce, w.Secret)
	return string(v), err
}

// storedWebhook returns the store and a webhook it keeps, or
// ErrWebhookNotFound.
func (c *Client) storedWebhook(ctx context.Context, id string) (store.Webhooks, *store.Webhook, error) {
	ws, err := c.webhookStore()
	if err != nil {
		return nil, nil, err
	}
	w, err := ws.GetWebhook(ctx, id)
	return ws, w, err
}

// Webhook returns a webhook, or ErrWebhookNotFound.
func (c *Client) Webhook(ctx context.Context, id string) (*Webhook, error) {
	_, w, err := c.storedWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	return webhookOf(w), nil
}

// Webhooks returns every webhook, oldest first.
func (c *Client) Webhooks(ctx context.Context) ([]*Webhook, error) {
	ws, err := c.webhookStore()
	if err != nil {
		return nil, err
	}
	list, err := ws.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Webhook, len(list))
	for i, w := range list {
		out[i] = webhookOf(w)
	}
	return out, nil
}

// DeleteWebhook deletes a webhook with its delivery log (pending
// deliveries are not sent), or returns ErrWebhookNotFound.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	ws, err := c.webhookStore()
	if err != nil {
		return err
	}
	return ws.DeleteWebhook(ctx, id)
}

// WebhookDelivery is a delivery of an event to a webhook, with its
// attempts: its log entry.
type WebhookDelivery struct {
	// ID is the idempotency key the receiver sees (WebhookIDHeader).
	ID        string `json:"id"`
	WebhookID string `json:"webhook_id"`
	Event     string `json:"event"`
	RunID     string `json:"run_id,omitempty"`
	// Status is "pending", "delivered" or "dead" (every attempt failed).
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// NextAttempt is when a pending delivery is due.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// LastStatus and LastError are those of the last attempt.
	LastStatus int    `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	// Body is what is sent. It holds the run's payloads: the server
	// shows it as a payload (tag payload, docs/payloads.md).
	Body      json.RawMessage          `json:"body" payload:""`
	CreatedAt time.Time                `json:"created_at"`
	UpdatedAt time.Time                `json:"updated_at"`
	Log       []WebhookDeliveryAttempt `json:"log"`
}

// WebhookDeliveryAttempt is one attempt of a delivery.
type WebhookDeliveryAttempt struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	// StatusCode is the receiver's HTTP status; 0 when none came.
	StatusCode int           `json:"status_code"`
	Error      string        `json:"error,omitempty"`
	Duration   time.Duration `json:"duration_ns"`
	// NextAttempt is when the next attempt was due; zero after the last.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// WebhookDeliveryFilter selects deliveries of a webhook.
type WebhookDeliveryFilter struct {
	// Status keeps those with this status ("pending", "delivered",
	// "dead"); "": all.
	Status string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
}

func deliveryOf(d *store.WebhookDelivery) *WebhookDelivery {
	out := &WebhookDelivery{ID: d.ID, WebhookID: d.WebhookID, Event: d.Event, RunID: d.RunID, Status: d.Status, Attempts: d.Attempts,
		LastStatus: d.LastStatus, LastError: d.LastError, Body: d.Body, CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		Log: []WebhookDeliveryAttempt{}}
	if d.Status == store.DeliveryPending {
		out.NextAttempt = d.NextAt.UTC()
	}
	for _, a := range d.Log {
		out.Log = append(out.Log, WebhookDeliveryAttempt{Attempt: a.Attempt, At: a.At.UTC(), StatusCode: a.StatusCode, Error: a.Error,
			Duration: a.Duration, NextAttempt: a.NextAt.UTC()})
	}
	return out
}

// WebhookDeliveries returns a webhook's deliveries, newest first, with
// their attempts, or ErrWebhookNotFound.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, f *WebhookDeliveryFilter) ([]*WebhookDelivery, error) {
	if f == nil {
		f = &WebhookDeliveryFilter{}
	}
	switch f.Status {
	case "", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryDead:
	default:
		return nil, inputErr("status", "%q is not pending, delivered or dead", f.Status)
	}
	if f.Limit < 0 {
		return nil, inputErr("limit", "must not be negative")
	}
	ws, _, err := c.storedWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	list, err := ws.ListWebhookDeliveries(ctx, &store.ListDeliveriesParams{WebhookID: id, Status: f.Status, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]*WebhookDelivery, len(list))
	for i, d := range list {
		out[i] = deliveryOf(d)
	}
	return out, nil
}

// TestWebhook queues a test delivery (type webhook.test) to a webhook,
// whatever its filters and even when it is disabled, and returns it; a
// started Client sends it at once, with the usual retries. Each call
// queues a new delivery.
func (c *Client) TestWebhook(ctx context.Context, id string) (*WebhookDelivery, error) {
	ws, w, err := c.storedWebhook(ctx, id)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
	did := notify.DeliveryID(w.ID, "test:"+newID())
	b, err := notify.TestPayload(w.Format, did, now)
	if err != nil {
		return nil, err
	}
	d := &store.WebhookDelivery{ID: did, WebhookID: w.ID, Event: WebhookTest, Body: b, NextAt: now, Status: store.DeliveryPending,
		CreatedAt: now, UpdatedAt: now}
	if err := ws.EnqueueWebhookDeliveries(ctx, &store.EnqueueDeliveriesParams{Deliveries: []*store.WebhookDelivery{d}, Now: now}); err != nil {
		return nil, err
	}
	if c.notify != nil {
		c.notify.Wake()
	}
	return deliveryOf(d), nil
}

// newNotifier returns the webhook sender of a Client, or nil when the
// store keeps no webhooks or Config.Webhooks.Disabled.
func (c *Client) newNotifier() *notify.Service {
	ws, ok := c.cfg.Store.(store.Webhooks)
	if !ok || c.cfg.Webhooks.Disabled {
		return nil
	}
	wc := c.cfg.Webhooks
	return notify.New(&notify.Config{
		Store: ws, History: c.cfg.Store.History, Secret: c.webhookSecret, Clock: c.cfg.Clock, Logger: c.cfg.Logger,
		Owner: c.cfg.WorkerID, HTTPClient: wc.HTTPClient, Timeout: wc.Timeout, MaxAttempts: wc.MaxAttempts,
		Backoff: wc.Backoff, MaxBackoff: wc.MaxBackoff, PollInterval: wc.PollInterval, Retention: wc.Retention,
	})
}

// WebhookChange names the fields of a webhook to change (EditWebhook):
// nil ones keep their value. An empty (non-nil) Workflows or Tags
// removes that filter.
type WebhookChange struct {
	URL       *string
	Events    *[]string
	Workflows *[]string
	Tags      *[]string
	// Format is WebhookFormatJSON or WebhookFormatSlack.
	Format *string
	// Enabled enables or disables the webhook (as EnableWebhook and
	// DisableWebhook).
	Enabled *bool
}

// EditWebhook changes the fields of a webhook that ch sets and returns
// the webhook, or ErrWebhookNotFound. Invalid input fails with a
// *WebhookInputError naming the field; a change that sets nothing fails
// too. The change applies to the events captured from then on and to
// the deliveries sent from then on (a pending delivery keeps the body it
// was queued with and goes to the new URL).
func (c *Client) EditWebhook(ctx context.Context, id string, ch *WebhookChange) (*Webhook, error) {
	if ch == nil || *ch == (WebhookChange{}) {
		return nil, inputErr("body", "name at least one of url, events, workflows, tags, format or enabled to change")
	}
	u := &store.WebhookUpdate{ID: id, URL: ch.URL, Format: ch.Format, Enabled: ch.Enabled}
	if ch.URL != nil {
		if err := checkWebhookURL(*ch.URL); err != nil {
			return nil, err
		}
	}
	if ch.Events != nil {
		ev := slices.Compact(slices.Sorted(slices.Values(*ch.Events)))
		if err := checkWebhookEvents(ev); err != nil {
			return nil, err
		}
		u.Events = &ev
	}
	for _, f := range []struct {
		field string
		in    *[]string
		out   **[]string
	}{{"workflows", ch.Workflows, &u.Workflows}, {"tags", ch.Tags, &u.Tags}} {
		if f.in == nil {
			continue
		}
		l := slices.Clone(*f.in)
		if err := checkWebhookFilter(f.field, l); err != nil {
			return nil, err
		}
		*f.out = &l
	}
	if ch.Format != nil {
		if err := checkWebhookFormat(*ch.Format); err != nil {
			return nil, err
		}
	}
	return c.updateWebhook(ctx, u)
}

func (c *Client) updateWebhook(ctx context.Context, u *store.WebhookUpdate) (*Webhook, error) {
	ws, err := c.webhookStore()
	if err != nil {
		return nil, err
	}
	w, err := ws.UpdateWebhook(ctx, u)
	if err != nil {
		return nil, err
	}
	if c.notify != nil {
		c.notify.Wake()
	}
	return webhookOf(w), nil
}

// EnableWebhook enables a webhook and returns it, or ErrWebhookNotFound:
// it receives the events that happen from then on, and its deliveries
// that were pending are sent again. Enabling an enabled webhook changes
// nothing.
func (c *Client) EnableWebhook(ctx context.Context, id string) (*Webhook, error) {
	on := true
	return c.updateWebhook(ctx, &store.WebhookUpdate{ID: id, Enabled: &on})
}

// DisableWebhook disables a webhook and returns it, or
// ErrWebhookNotFound: it receives no event that happens while it is
// disabled, and its pending deliveries wait (they are kept, not sent,
// until it is enabled again; TestWebhook still sends). While no webhook
// is enabled the store captures no events at all.
func (c *Client) DisableWebhook(ctx context.Context, id string) (*Webhook, error) {
	off := false
	return c.updateWebhook(ctx, &store.WebhookUpdate{ID: id, Enabled: &off})
}

// RotateWebhookSecret replaces a webhook's signing secret with a new one
// (256 random bits, as CreateWebhook) and returns the webhook and the new
// secret, this once; or ErrWebhookNotFound. Every attempt from then on,
// retries of earlier deliveries included, is signed with the new secret.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (*Webhook, string, error) {
	secret, sealed, err := c.newWebhookSecret(id)
	if err != nil {
		return nil, "", fmt.Errorf("rotate webhook secret: %w", err)
	}
	w, err := c.updateWebhook(ctx, &store.WebhookUpdate{ID: id, Secret: sealed})
	if err != nil {
		return nil, "", err
	}
	if sealed.KeyID == "" {
		c.cfg.Logger.Warn("webhook secret stored unsealed: set Config.SecretKeys (heph server: HEPH_SECRET_KEYS) to encrypt it", "webhook", id)
	}
	return w, secret, nil
}
