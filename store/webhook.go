package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Errors of webhooks.
var (
	// ErrWebhookNotFound: no webhook subscription has the given id.
	ErrWebhookNotFound = errors.New("webhook not found")
	// ErrWebhookExists: a create names a webhook id that is stored.
	ErrWebhookExists = errors.New("a webhook with this id exists")
)

// Webhook delivery statuses.
const (
	// DeliveryPending: not yet delivered; due at NextAt.
	DeliveryPending = "pending"
	// DeliveryDelivered: the receiver answered 2xx.
	DeliveryDelivered = "delivered"
	// DeliveryDead: every attempt failed (dead letter); no more attempts.
	DeliveryDead = "dead"
)

// Limits of webhooks.
const (
	// MaxWebhookURL bounds a webhook's URL, in bytes.
	MaxWebhookURL = 2048
	// MaxWebhookBody bounds a delivery's body, in bytes.
	MaxWebhookBody = 256 << 10
	// MaxWebhookError bounds the error recorded for an attempt, in bytes.
	MaxWebhookError = 1024
)

// Webhooks keeps webhook subscriptions, the events captured for them and
// their deliveries (the tables of SQLite migration 0017_webhooks and
// PostgreSQL 0019_webhooks).
//
// Events are captured by the database itself, in the transaction that
// appends them: a trigger on the history (and on the schedule tick log)
// copies the entries of the kinds webhooks report into webhook_events.
// The triggers exist only while at least one webhook is enabled (SQLite
// 0020_webhook_capture, PostgreSQL 0022_webhook_capture): the webhook
// change that makes the number of enabled webhooks go from 0 to 1
// creates them, the one that makes it go from 1 to 0 drops them, in its
// own transaction, so a store without an enabled webhook pays nothing per
// history insert. Entries committed before then are not captured. A dispatcher then reads them
// (WebhookEvents), turns each into one delivery per matching webhook
// and deletes it (EnqueueWebhookDeliveries, idempotent: a delivery's ID is
// derived from its webhook and event). Deliveries are leased to a sender
// (ClaimWebhookDeliveries) and each attempt is recorded under that lease
// (RecordWebhookAttempt). PruneRuns touches none of these tables.
type Webhooks interface {
	// CreateWebhook stores a new webhook, or returns ErrWebhookExists.
	CreateWebhook(ctx context.Context, w *Webhook) error
	// GetWebhook returns a webhook, or ErrWebhookNotFound.
	GetWebhook(ctx context.Context, id string) (*Webhook, error)
	// ListWebhooks returns every webhook, by CreatedAt then ID.
	ListWebhooks(ctx context.Context) ([]*Webhook, error)
	// UpdateWebhook changes the fields of a webhook that p sets and
	// returns the webhook as stored, or ErrWebhookNotFound.
	UpdateWebhook(ctx context.Context, p *WebhookUpdate) (*Webhook, error)
	// DeleteWebhook deletes a webhook with its deliveries and their
	// attempts, or returns ErrWebhookNotFound.
	DeleteWebhook(ctx context.Context, id string) error

	// WebhookEvents returns up to limit captured events, oldest (lowest
	// ID) first, with the workflow, business id and tags of their run
	// (empty when the run is gone).
	WebhookEvents(ctx context.Context, limit int) ([]*WebhookEvent, error)
	// EnqueueWebhookDeliveries, in one transaction, inserts the
	// deliveries (Status pending, no attempts; one whose ID is stored, or
	// whose webhook is gone, is left out) and deletes the captured events
	// p.Consumed (those gone already are ignored).
	EnqueueWebhookDeliveries(ctx context.Context, p *EnqueueDeliveriesParams) error
	// ClaimWebhookDeliveries leases up to p.Limit pending deliveries due
	// at p.Now (NextAt at or before it) whose lease is free or expired,
	// oldest NextAt first: it sets Owner, Token (one more than before:
	// tokens never repeat for a delivery) and LeaseUntil. Deliveries of
	// a disabled webhook wait (are not claimed) until it is enabled again,
	// except those of Event WebhookTestEvent.
	ClaimWebhookDeliveries(ctx context.Context, p *ClaimDeliveriesParams) ([]*WebhookDelivery, error)
	// RecordWebhookAttempt records an attempt of a leased delivery and
	// its new state (delivered, pending again at NextAt, or dead), and
	// frees the lease; ErrLeaseLost when p.Owner and p.Token no longer
	// hold it, ErrWebhookNotFound when the delivery is gone.
	RecordWebhookAttempt(ctx context.Context, p *RecordAttemptParams) error
	// ListWebhookDeliveries returns a webhook's deliveries, newest
	// (CreatedAt, then ID) first, each with its attempts (oldest first).
	// A webhook that does not exist has none.
	ListWebhookDeliveries(ctx context.Context, p *ListDeliveriesParams) ([]*WebhookDelivery, error)
	// PruneWebhookDeliveries deletes the delivered and dead deliveries
	// last updated before p.Before, with their attempts, and returns how
	// many it deleted.
	PruneWebhookDeliveries(ctx context.Context, p *PruneDeliveriesParams) (int, error)
}

// Webhook is a webhook subscription.
type Webhook struct {
	ID  string
	URL string
	// Events are the event types it receives (opaque to the store).
	Events []string
	// Workflows and Tags filter the runs (opaque to the store); empty:
	// any.
	Workflows []string
	Tags      []string
	// Format is the body's format (opaque to the store).
	Format  string
	Enabled bool
	// KeyID is the key Secret is sealed with, with Nonce; "" when Secret
	// is stored in clear (no key ring is configured).
	KeyID  string
	Nonce  []byte
	Secret []byte
	// CreatedBy names who created it.
	CreatedBy string
	CreatedAt time.Time
}

// Check validates a webhook to create (errors wrap
// hephtype.ErrInvalidInput).
func (w *Webhook) Check() error {
	switch {
	case w.ID == "" || len(w.ID) > maxAccessIDLength:
		return fmt.Errorf("%w: webhook id must be 1 to %d bytes long", hephtype.ErrInvalidInput, maxAccessIDLength)
	case w.URL == "" || len(w.URL) > MaxWebhookURL:
		return fmt.Errorf("%w: webhook %q: url must be 1 to %d bytes long", hephtype.ErrInvalidInput, w.ID, MaxWebhookURL)
	case len(w.Events) == 0:
		return fmt.Errorf("%w: webhook %q: events is empty", hephtype.ErrInvalidInput, w.ID)
	case len(w.Secret) == 0:
		return fmt.Errorf("%w: webhook %q: secret is empty", hephtype.ErrInvalidInput, w.ID)
	case w.KeyID != "" && len(w.Nonce) == 0:
		return fmt.Errorf("%w: webhook %q: a sealed secret needs its nonce", hephtype.ErrInvalidInput, w.ID)
	case w.CreatedAt.IsZero():
		return fmt.Errorf("%w: webhook %q: CreatedAt is zero", hephtype.ErrInvalidInput, w.ID)
	}
	return nil
}

// WebhookUpdate names the fields of a webhook to change: nil ones keep
// their value.
type WebhookUpdate struct {
	ID        string
	URL       *string
	Events    *[]string
	Workflows *[]string
	Tags      *[]string
	Format    *string
	Enabled   *bool
	// Secret replaces the secret (KeyID, Nonce and Secret of the
	// webhook, as in Webhook).
	Secret *WebhookSecret
}

// WebhookSecret is a webhook's signing secret as stored: sealed with the
// key KeyID and Nonce, or in clear when KeyID is "".
type WebhookSecret struct {
	KeyID  string
	Nonce  []byte
	Secret []byte
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *WebhookUpdate) Check() error {
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: webhook id is empty", hephtype.ErrInvalidInput)
	case p.URL != nil && (*p.URL == "" || len(*p.URL) > MaxWebhookURL):
		return fmt.Errorf("%w: webhook %q: url must be 1 to %d bytes long", hephtype.ErrInvalidInput, p.ID, MaxWebhookURL)
	case p.Events != nil && len(*p.Events) == 0:
		return fmt.Errorf("%w: webhook %q: events is empty", hephtype.ErrInvalidInput, p.ID)
	case p.Format != nil && *p.Format == "":
		return fmt.Errorf("%w: webhook %q: format is empty", hephtype.ErrInvalidInput, p.ID)
	case p.Secret != nil && len(p.Secret.Secret) == 0:
		return fmt.Errorf("%w: webhook %q: secret is empty", hephtype.ErrInvalidInput, p.ID)
	case p.Secret != nil && p.Secret.KeyID != "" && len(p.Secret.Nonce) == 0:
		return fmt.Errorf("%w: webhook %q: a sealed secret needs its nonce", hephtype.ErrInvalidInput, p.ID)
	}
	return nil
}

// WebhookTestEvent is the Event of the test deliveries a client queues
// to a webhook: they are sent even while the webhook is disabled.
const WebhookTestEvent = "webhook.test"

// The kinds of captured events that are not history entries.
const (
	// EventScheduleTickFailed: a schedule's tick could not start its run
	// (RunID is empty, Step the schedule id, Error why).
	EventScheduleTickFailed = "schedule_tick_failed"
)

// WebhookEvent is an event captured for webhooks: a history entry (of a
// kind webhooks report) or a failed schedule tick.
type WebhookEvent struct {
	ID int64
	// RunID and Seq name the history entry (RunID "" for a tick).
	RunID string
	Seq   int64
	// Kind is the history entry's kind, or EventScheduleTickFailed.
	Kind    string
	Step    string
	Index   int
	Attempt int
	Name    string
	Error   string
	Data    json.RawMessage
	At      time.Time
	// Workflow, BusinessID and Tags are the run's, when it exists.
	Workflow   string
	BusinessID string
	Tags       []string
}

// WebhookDelivery is the delivery of one event to one webhook.
type WebhookDelivery struct {
	// ID is stable for the (webhook, event): the idempotency key the
	// receiver sees.
	ID        string
	WebhookID string
	// Event is the event type (e.g. "run.failed"); RunID its run or "".
	Event string
	RunID string
	// Body is what is sent (JSON).
	Body   json.RawMessage
	Status string
	// Attempts counts the attempts made; NextAt is when the next is due
	// (pending only).
	Attempts int
	NextAt   time.Time
	// LastStatus and LastError are those of the last attempt (0 and ""
	// before the first).
	LastStatus int
	LastError  string
	// Owner, Token and LeaseUntil are the lease, set by a claim.
	Owner      string
	Token      int64
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Log holds the attempts (ListWebhookDeliveries only).
	Log []WebhookAttempt
}

// WebhookAttempt is one attempt of a delivery.
type WebhookAttempt struct {
	Attempt int
	At      time.Time
	// StatusCode is the receiver's HTTP status, 0 when none came.
	StatusCode int
	Error      string
	Duration   time.Duration
	// NextAt is when the next attempt is due; zero when none is.
	NextAt time.Time
}

// EnqueueDeliveriesParams are the parameters of EnqueueWebhookDeliveries.
type EnqueueDeliveriesParams struct {
	// Deliveries to insert; the store reads ID, WebhookID, Event, RunID,
	// Body and NextAt, and sets the rest.
	Deliveries []*WebhookDelivery
	// Consumed are the ids of captured events to delete.
	Consumed []int64
	// Now is the current time (CreatedAt). Required.
	Now time.Time
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *EnqueueDeliveriesParams) Check() error {
	if p.Now.IsZero() {
		return fmt.Errorf("%w: Now is zero", hephtype.ErrInvalidInput)
	}
	for _, d := range p.Deliveries {
		switch {
		case d.ID == "" || d.WebhookID == "" || d.Event == "":
			return fmt.Errorf("%w: a delivery needs an id, a webhook id and an event", hephtype.ErrInvalidInput)
		case len(d.Body) > MaxWebhookBody:
			return fmt.Errorf("%w: delivery %q: body is %d bytes long, more than %d", hephtype.ErrInvalidInput, d.ID, len(d.Body), MaxWebhookBody)
		case !json.Valid(d.Body):
			return fmt.Errorf("%w: delivery %q: body is not JSON", hephtype.ErrInvalidInput, d.ID)
		case d.NextAt.IsZero():
			return fmt.Errorf("%w: delivery %q: NextAt is zero", hephtype.ErrInvalidInput, d.ID)
		}
	}
	return nil
}

// ClaimDeliveriesParams are the parameters of ClaimWebhookDeliveries.
type ClaimDeliveriesParams struct {
	Owner    string
	Limit    int
	LeaseFor time.Duration
	Now      time.Time
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *ClaimDeliveriesParams) Check() error {
	switch {
	case p.Owner == "":
		return fmt.Errorf("%w: Owner is empty", hephtype.ErrInvalidInput)
	case p.Limit <= 0:
		return fmt.Errorf("%w: Limit must be positive, got %d", hephtype.ErrInvalidInput, p.Limit)
	case p.LeaseFor <= 0:
		return fmt.Errorf("%w: LeaseFor must be positive, got %v", hephtype.ErrInvalidInput, p.LeaseFor)
	case p.Now.IsZero():
		return fmt.Errorf("%w: Now is zero", hephtype.ErrInvalidInput)
	}
	return nil
}

// RecordAttemptParams are the parameters of RecordWebhookAttempt.
type RecordAttemptParams struct {
	ID string
	// Owner and Token are the lease, as the claim returned it.
	Owner string
	Token int64
	// Status is the delivery's new status.
	Status string
	// Attempt is the attempt made (its NextAt is the delivery's next
	// attempt, when Status is pending). Attempt.Error is cut to
	// MaxWebhookError bytes.
	Attempt WebhookAttempt
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *RecordAttemptParams) Check() error {
	switch {
	case p.ID == "" || p.Owner == "":
		return fmt.Errorf("%w: a delivery id and an owner are required", hephtype.ErrInvalidInput)
	case p.Attempt.At.IsZero() || p.Attempt.Attempt <= 0:
		return fmt.Errorf("%w: delivery %q: the attempt needs its time and a positive number", hephtype.ErrInvalidInput, p.ID)
	}
	switch p.Status {
	case DeliveryDelivered, DeliveryDead:
	case DeliveryPending:
		if p.Attempt.NextAt.IsZero() {
			return fmt.Errorf("%w: delivery %q: a pending delivery needs the next attempt's time", hephtype.ErrInvalidInput, p.ID)
		}
	default:
		return fmt.Errorf("%w: delivery %q: status %q is not pending, delivered or dead", hephtype.ErrInvalidInput, p.ID, p.Status)
	}
	return nil
}

// CutError returns s cut to MaxWebhookError bytes.
func CutError(s string) string {
	if len(s) <= MaxWebhookError {
		return s
	}
	return s[:MaxWebhookError]
}

// ListDeliveriesParams select a page of a webhook's deliveries.
type ListDeliveriesParams struct {
	WebhookID string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Status keeps the deliveries with this status; "": all.
	Status string
}

// PruneDeliveriesParams are the parameters of PruneWebhookDeliveries.
type PruneDeliveriesParams struct {
	Before time.Time
}
