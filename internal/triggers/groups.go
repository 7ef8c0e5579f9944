package triggers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// groups is the store of the trigger groups.
func (s *Service) groups() store.TriggerGroups {
	if s.cfg.Groups != nil {
		return s.cfg.Groups
	}
	return s.cfg.Store
}

// join adds the event of a leased firing of a trigger that controls its
// flow to its key's group, ending the firing grouped (fenced by its
// token, in the same transaction).
func (s *Service) join(ctx context.Context, c *compiled, f *store.Firing, p *StartParams) error {
	err := s.groups().JoinGroup(ctx, &store.JoinGroupParams{Trigger: c.t, Key: p.Key, Token: f.Token, Now: s.cfg.Clock.Now(), EventAt: f.Event.At,
		Event: store.GroupEvent{EventID: f.EventID, Seq: f.Seq, Input: p.Input, BusinessKey: p.BusinessKey, ConcurrencyKey: p.ConcurrencyKey}})
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrFiringNotFound) {
		return nil // another claim ended it, or the event was pruned
	}
	if err != nil {
		return fmt.Errorf("trigger %q, event %s: join group: %w", f.Trigger, f.EventID, err)
	}
	return nil
}

// dispatchGroups claims one batch of the due groups of the triggers and
// starts the run of each; it returns how many it claimed.
func (s *Service) dispatchGroups(ctx context.Context, progs map[string]*compiled, names []string) (int, error) {
	grouped := names[:0:0]
	for _, n := range names {
		if progs[n].t.Grouped() {
			grouped = append(grouped, n)
		}
	}
	if len(grouped) == 0 {
		return 0, nil
	}
	ids := make([]string, claimBatch)
	for i := range ids {
		ids[i] = s.cfg.NewID()
	}
	gs, err := s.groups().ClaimGroups(ctx, &store.ClaimGroupsParams{Triggers: grouped, Owner: s.cfg.Owner,
		Now: s.cfg.Clock.Now(), LeaseFor: s.cfg.LeaseFor, RunIDs: ids, Limit: claimBatch})
	if err != nil {
		return 0, fmt.Errorf("claim groups: %w", err)
	}
	return len(gs), parallel(len(gs), func(i int) error { return s.startGroup(ctx, progs[gs[i].Trigger], gs[i]) })
}

// startGroup starts the run of a leased group (its input: the last
// event's, or a batch's list) and ends the group.
func (s *Service) startGroup(ctx context.Context, c *compiled, g *store.TriggerGroup) error {
	status, msg := store.GroupStarted, ""
	if len(g.Events) == 0 {
		status, msg = store.GroupFailed, "the group has no events"
	} else {
		last := g.Events[len(g.Events)-1]
		p := &StartParams{Input: store.GroupInput(c.t, g), RunID: g.RunID, EventID: last.EventID,
			BusinessKey: last.BusinessKey, ConcurrencyKey: last.ConcurrencyKey, Key: g.Key}
		if err := s.cfg.Start(ctx, c.t, p); errors.Is(err, ErrSkip) {
			status, msg = store.GroupSkipped, err.Error()
		} else if err != nil {
			if ctx.Err() != nil || !errors.Is(err, hephtype.ErrInvalidInput) && !isPermanent(err) {
				// Left open: the next claim after the lease tries again,
				// with the same run id.
				return fmt.Errorf("trigger %q, group %d: start: %w", g.Trigger, g.ID, err)
			}
			status, msg = store.GroupFailed, err.Error()
		}
	}
	err := s.groups().EndGroup(ctx, &store.EndGroupParams{ID: g.ID, Token: g.Token, Status: status, Error: msg, Now: s.cfg.Clock.Now()})
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrGroupNotFound) {
		return nil // another claim ended it
	}
	return err
}

// nextWake is how long the loop sleeps when nothing wakes it: the
// Interval, or less when a group of a trigger it carries out is due
// sooner (never less than a millisecond).
func (s *Service) nextWake(ctx context.Context) time.Duration {
	s.mu.Lock()
	var names []string
	for _, m := range []map[string]*compiled{s.progs, s.managed} {
		for n, c := range m {
			if c.t.Grouped() {
				names = append(names, n)
			}
		}
	}
	s.mu.Unlock()
	if len(names) == 0 {
		return s.cfg.Interval
	}
	at, ok, err := s.groups().NextGroupDue(ctx, names)
	if err != nil || !ok {
		return s.cfg.Interval
	}
	return min(s.cfg.Interval, max(at.Sub(s.cfg.Clock.Now()), time.Millisecond))
}
