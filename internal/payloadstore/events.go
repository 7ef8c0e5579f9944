package payloadstore

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// decEvent returns a copy of e with its data decoded.
func (s *Store) decEvent(e *store.EventRecord) (*store.EventRecord, error) {
	if e == nil {
		return nil, nil
	}
	c := *e
	if err := s.decAll(field{&c.Data, "data"}); err != nil {
		return nil, fmt.Errorf("event %s: %w", e.ID, err)
	}
	return &c, nil
}

// SendEvent encodes the event's data.
func (s *Store) SendEvent(ctx context.Context, p *store.SendEventParams) (*store.EventRecord, bool, error) {
	// What the store refuses, it refuses with its own words.
	if err := store.CheckEvent(p.Event); err != nil {
		return nil, false, err
	}
	c := *p.Event
	// Encoded, never offloaded: an event is at most
	// store.MaxEventDataBytes, and its data stays searchable without a
	// codec.
	if s.chain != nil && len(c.Data) > 0 {
		v, err := s.chain.EncodeJSON(c.Data)
		if err != nil {
			return nil, false, fmt.Errorf("event %s: data: %w", c.ID, err)
		}
		c.Data = v
	}
	e, existed, err := s.Store.SendEvent(ctx, &store.SendEventParams{Event: &c})
	if err != nil {
		return nil, false, err
	}
	e, err = s.decEvent(e)
	return e, existed, err
}

// ClaimFirings decodes the data of the firings' events.
func (s *Store) ClaimFirings(ctx context.Context, p *store.ClaimFiringsParams) ([]*store.Firing, error) {
	fs, err := s.Store.ClaimFirings(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.Event, err = s.decEvent(f.Event); err != nil {
			return fs, err
		}
	}
	return fs, nil
}

// GetEvent decodes the event's data.
func (s *Store) GetEvent(ctx context.Context, id string) (*store.EventRecord, error) {
	e, err := s.Store.GetEvent(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.decEvent(e)
}

// ListEvents decodes the events' data. A filter on a field of the data
// is refused with a codec: the database holds envelopes, not the values.
func (s *Store) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*store.EventRecord, error) {
	if p.Field != "" && s.chain != nil {
		return nil, fmt.Errorf("%w: events filter: field %q: event data is encoded (Config.PayloadCodec), so the database cannot compare it; filter by name and time", hephtype.ErrInvalidInput, p.Field)
	}
	return s.decEvents(s.Store.ListEvents(ctx, p))
}

// decEvents decodes the data of es, in place.
func (s *Store) decEvents(es []*store.EventRecord, err error) ([]*store.EventRecord, error) {
	if err != nil {
		return nil, err
	}
	for i, e := range es {
		if es[i], err = s.decEvent(e); err != nil {
			return nil, err
		}
	}
	return es, nil
}
