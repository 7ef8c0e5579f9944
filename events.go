package hephaestus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Limits of events, the same on every backend (docs/events.md).
const (
	// MaxEventNameBytes bounds an event's name.
	MaxEventNameBytes = store.MaxEventNameBytes
	// MaxEventIDBytes bounds an event's id.
	MaxEventIDBytes = store.MaxEventIDBytes
	// MaxEventDataBytes bounds an event's data (or Config.MaxPayloadSize
	// when that is lower).
	MaxEventDataBytes = store.MaxEventDataBytes
	// MaxEventsPage bounds ListEventsOptions.Limit.
	MaxEventsPage = store.MaxEventsPage
	// DefaultEventRetention is how long events are kept when
	// Config.EventRetention is 0.
	DefaultEventRetention = 30 * 24 * time.Hour
)

// ErrEventNotFound: no event has the given id.
var ErrEventNotFound = store.ErrEventNotFound

// EventRecord is an event sent to the engine: something that happened
// ("order.paid"), with a JSON payload.
type EventRecord struct {
	// ID identifies the event. Sending an event with an ID that is stored
	// already is a no-op that returns the first.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Data is the payload: a JSON value, or empty.
	Data json.RawMessage `json:"data,omitempty"`
	// At is when the event was stored.
	At time.Time `json:"at"`
	// Seq orders events as they were stored; it is the cursor of
	// ListEventsOptions.BeforeSeq.
	Seq int64 `json:"seq"`
	// Duplicate is true when SendEvent found an event with this ID
	// stored already and returned it (nothing was written).
	Duplicate bool `json:"duplicate,omitempty"`
}

// SendEventOptions are the options of SendEvent.
type SendEventOptions struct {
	// ID makes the send idempotent: a second send with the same ID (of
	// any name and data) stores nothing and returns the first event. When
	// empty, a new UUIDv7 is the id. 1 to MaxEventIDBytes bytes, no
	// control characters.
	ID string
}

// ListEventsOptions filter ListEvents; every set filter must hold.
type ListEventsOptions struct {
	// Name, when set, is the event name.
	Name string
	// After and Before, when set, bound At: After <= At < Before.
	After, Before time.Time
	// BeforeSeq, when positive, lists the events stored before the one
	// with this Seq: pass the Seq of the last event of a page to get the
	// next.
	BeforeSeq int64
	// Field and Value select events by their data: Field is a path of
	// member names separated by dots ("customer.id"), Value a JSON
	// scalar that the value at the path equals (numbers by value). Not
	// available when Config.PayloadCodec encodes payloads.
	Field string
	Value json.RawMessage
	// Limit bounds the events returned: default 100, at most
	// MaxEventsPage.
	Limit int
}

// SendEvent stores an event named name with data as its payload (any
// value encoding/json marshals; a json.RawMessage is taken as it is) and
// returns it. With opts.ID, a second send of the same ID returns the
// first event with Duplicate set and writes nothing. The payload is
// bounded by MaxEventDataBytes (1 MiB) and encoded by
// Config.PayloadCodec as every payload is, but never offloaded to
// Config.PayloadBlobs.
func (c *Client) SendEvent(ctx context.Context, name string, data any, opts *SendEventOptions) (*EventRecord, error) {
	raw, err := marshalEventData(data)
	if err != nil {
		return nil, fmt.Errorf("%w: event %q: data: %w", ErrInvalidInput, name, err)
	}
	if limit := min(c.cfg.MaxPayloadSize, store.MaxEventDataBytes); len(raw) > limit {
		return nil, fmt.Errorf("%w: %w: event %q: data is %d bytes, over the limit of %d (MaxEventDataBytes, or Config.MaxPayloadSize when lower)", ErrInvalidInput, ErrPayloadTooLarge, name, len(raw), limit)
	}
	id := newID()
	if opts != nil && opts.ID != "" {
		id = opts.ID
	}
	e, dup, err := c.cfg.Store.SendEvent(ctx, &store.SendEventParams{Event: &store.EventRecord{
		ID: id, Name: name, Data: raw, At: c.cfg.Clock.Now(),
	}})
	if err != nil {
		return nil, err
	}
	out := fromStoreEvent(e)
	out.Duplicate = dup
	if !dup {
		c.triggers.Wake()
	}
	return out, nil
}

func marshalEventData(data any) (json.RawMessage, error) {
	switch d := data.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(d) > 0 && !json.Valid(d) {
			return nil, fmt.Errorf("not valid JSON")
		}
		return d, nil
	}
	return json.Marshal(data)
}

// GetEvent returns an event by id, or ErrEventNotFound.
func (c *Client) GetEvent(ctx context.Context, id string) (*EventRecord, error) {
	e, err := c.cfg.Store.GetEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromStoreEvent(e), nil
}

// ListEvents returns events newest first, filtered. A bad filter fails
// with ErrInvalidInput, naming it.
func (c *Client) ListEvents(ctx context.Context, opts *ListEventsOptions) ([]*EventRecord, error) {
	var o ListEventsOptions
	if opts != nil {
		o = *opts
	}
	if o.Limit > MaxEventsPage || o.Limit < 0 {
		return nil, fmt.Errorf("%w: events filter: limit is %d; it must be 0 to %d", ErrInvalidInput, o.Limit, MaxEventsPage)
	}
	es, err := c.cfg.Store.ListEvents(ctx, &store.ListEventsParams{Name: o.Name, After: o.After, Before: o.Before,
		BeforeSeq: o.BeforeSeq, Field: o.Field, Value: o.Value, Limit: o.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]*EventRecord, len(es))
	for i, e := range es {
		out[i] = fromStoreEvent(e)
	}
	return out, nil
}

// PruneEvents deletes, now, the events older than Config.EventRetention
// (the sweep a started client runs every RetentionInterval) and returns
// how many it deleted.
func (c *Client) PruneEvents(ctx context.Context) (int, error) {
	return c.maint.PruneEvents(ctx)
}

func fromStoreEvent(e *store.EventRecord) *EventRecord {
	return &EventRecord{ID: e.ID, Name: e.Name, Data: e.Data, At: e.At, Seq: e.Seq}
}
