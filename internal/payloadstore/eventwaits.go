package payloadstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// PutEventWait encodes the input the wait's match reads. As an event's
// data, it is encoded, never offloaded (store.MaxEventWaitInputBytes
// bounds it).
func (s *Store) PutEventWait(ctx context.Context, w *store.EventWait) (*store.EventWait, error) {
	// What the store refuses, it refuses with its own words.
	if err := store.CheckEventWait(w); err != nil {
		return nil, err
	}
	c := *w
	if s.chain != nil && len(c.Input) > 0 {
		v, err := s.chain.EncodeJSON(c.Input)
		if err != nil {
			return nil, fmt.Errorf("event wait %s: input: %w", c.ID, err)
		}
		c.Input = v
	}
	got, err := s.Store.PutEventWait(ctx, &c)
	if err != nil {
		return nil, err
	}
	return s.decWait(got)
}

// decWait returns a copy of w with its input decoded.
func (s *Store) decWait(w *store.EventWait) (*store.EventWait, error) {
	if w == nil {
		return nil, nil
	}
	c := *w
	if err := s.decAll(field{&c.Input, "input"}); err != nil {
		return nil, fmt.Errorf("event wait %s: %w", w.ID, err)
	}
	return &c, nil
}

// decWaits decodes the inputs of ws, in place.
func (s *Store) decWaits(ws []*store.EventWait, err error) ([]*store.EventWait, error) {
	if err != nil {
		return nil, err
	}
	for i, w := range ws {
		if ws[i], err = s.decWait(w); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// OpenEventWaits decodes the waits' inputs.
func (s *Store) OpenEventWaits(ctx context.Context, limit int) ([]*store.EventWait, error) {
	return s.decWaits(s.Store.OpenEventWaits(ctx, limit))
}

// EventWaitsOf decodes the waits' inputs.
func (s *Store) EventWaitsOf(ctx context.Context, runID string) ([]*store.EventWait, error) {
	return s.decWaits(s.Store.EventWaitsOf(ctx, runID))
}

// EventWaitsMatched decodes the waits' inputs.
func (s *Store) EventWaitsMatched(ctx context.Context, eventID string) ([]*store.EventWait, error) {
	return s.decWaits(s.Store.EventWaitsMatched(ctx, eventID))
}

// MatchEventWait decodes the wait's input.
func (s *Store) MatchEventWait(ctx context.Context, id, eventID string, now time.Time) (*store.EventWait, error) {
	w, err := s.Store.MatchEventWait(ctx, id, eventID, now)
	if err != nil {
		return nil, err
	}
	return s.decWait(w)
}

// WaitCandidates decodes the events' data, which the wait's match reads.
// The wait's input is passed on as the store keeps it: the candidates
// are chosen by name and time alone.
func (s *Store) WaitCandidates(ctx context.Context, w *store.EventWait) ([]*store.EventRecord, error) {
	return s.decEvents(s.Store.WaitCandidates(ctx, w))
}
