package payloadstore

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

// JoinGroup encodes the input the trigger mapped from the event. As an
// event's data, it is encoded, never offloaded (it is bounded by the
// event's size).
func (s *Store) JoinGroup(ctx context.Context, p *store.JoinGroupParams) error {
	if s.chain == nil || len(p.Event.Input) == 0 {
		return s.Store.JoinGroup(ctx, p)
	}
	c := *p
	v, err := s.chain.EncodeJSON(c.Event.Input)
	if err != nil {
		return fmt.Errorf("event %s: group input: %w", c.Event.EventID, err)
	}
	c.Event.Input = v
	return s.Store.JoinGroup(ctx, &c)
}

// ClaimGroups decodes the inputs of the groups' events.
func (s *Store) ClaimGroups(ctx context.Context, p *store.ClaimGroupsParams) ([]*store.TriggerGroup, error) {
	gs, err := s.Store.ClaimGroups(ctx, p)
	if err != nil {
		return nil, err
	}
	return gs, s.decGroups(gs)
}

// ListTriggerGroups decodes the inputs of the groups' events.
func (s *Store) ListTriggerGroups(ctx context.Context, p *store.ListTriggerGroupsParams) ([]*store.TriggerGroup, error) {
	gs, err := s.Store.ListTriggerGroups(ctx, p)
	if err != nil {
		return nil, err
	}
	return gs, s.decGroups(gs)
}

func (s *Store) decGroups(gs []*store.TriggerGroup) error {
	for _, g := range gs {
		for _, e := range g.Events {
			if err := s.decAll(field{&e.Input, "input"}); err != nil {
				return fmt.Errorf("trigger group %d, event %s: %w", g.ID, e.EventID, err)
			}
		}
	}
	return nil
}
