package payloadstore

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

// encSchedule returns a copy of sc with its input encoded.
func (s *Store) encSchedule(sc *store.Schedule) (*store.Schedule, error) {
	if sc == nil {
		return nil, nil
	}
	// What the store refuses, it refuses with its own words.
	if err := sc.Check(); err != nil {
		return nil, err
	}
	c := *sc
	if err := s.encAll(field{&c.Input, "input"}); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", sc.ID, err)
	}
	return &c, nil
}

// decSchedule returns a copy of sc with its input decoded.
func (s *Store) decSchedule(sc *store.Schedule) (*store.Schedule, error) {
	if sc == nil {
		return nil, nil
	}
	c := *sc
	if err := s.decAll(field{&c.Input, "input"}); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", sc.ID, err)
	}
	return &c, nil
}

func (s *Store) decSchedules(scs []*store.Schedule, err error) ([]*store.Schedule, error) {
	if err != nil {
		return scs, err
	}
	for i, sc := range scs {
		if scs[i], err = s.decSchedule(sc); err != nil {
			return nil, err
		}
	}
	return scs, nil
}

func (s *Store) decOneSchedule(sc *store.Schedule, err error) (*store.Schedule, error) {
	if err != nil {
		return sc, err
	}
	return s.decSchedule(sc)
}

// CreateSchedule encodes the input.
func (s *Store) CreateSchedule(ctx context.Context, p *store.CreateScheduleParams) (*store.Schedule, error) {
	q := *p
	var err error
	if q.Schedule, err = s.encSchedule(p.Schedule); err != nil {
		return nil, err
	}
	return s.decOneSchedule(s.Store.CreateSchedule(ctx, &q))
}

// UpdateSchedule encodes the input.
func (s *Store) UpdateSchedule(ctx context.Context, p *store.UpdateScheduleParams) (*store.Schedule, error) {
	q := *p
	var err error
	if q.Schedule, err = s.encSchedule(p.Schedule); err != nil {
		return nil, err
	}
	return s.decOneSchedule(s.Store.UpdateSchedule(ctx, &q))
}

// GetSchedule decodes the input.
func (s *Store) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	return s.decOneSchedule(s.Store.GetSchedule(ctx, id))
}

// ListSchedules decodes the inputs.
func (s *Store) ListSchedules(ctx context.Context, p *store.ListSchedulesParams) ([]*store.Schedule, error) {
	return s.decSchedules(s.Store.ListSchedules(ctx, p))
}

// DueSchedules decodes the inputs.
func (s *Store) DueSchedules(ctx context.Context, p *store.DueSchedulesParams) ([]*store.Schedule, error) {
	return s.decSchedules(s.Store.DueSchedules(ctx, p))
}

// RunStats decodes the runs of the samples.
func (s *Store) RunStats(ctx context.Context, p *store.RunStatsParams) (*store.RunStats, error) {
	st, err := s.Store.RunStats(ctx, p)
	if err != nil || st == nil {
		return st, err
	}
	for _, sample := range []*store.RunSample{&st.Blocked, &st.Stale} {
		for i, r := range sample.Runs {
			if sample.Runs[i], err = s.decRun(r); err != nil {
				return nil, err
			}
		}
	}
	return st, nil
}

// InsertInTx encodes the runs, as Apply does creates, when the wrapped
// store inserts in transactions; it fails with store.ErrTxType otherwise
// (no transaction is of the right kind).
func (s *Store) InsertInTx(ctx context.Context, tx any, p *store.InsertParams) ([]store.ChangeResult, error) {
	ti, ok := s.Store.(store.TxInserter)
	if !ok {
		return nil, fmt.Errorf("%w: the store does not insert in a caller's transaction", store.ErrTxType)
	}
	q := *p
	q.Runs = make([]*store.NewRun, len(p.Runs))
	for i, r := range p.Runs {
		nr, err := s.encNewRun(r)
		if err != nil {
			return nil, err
		}
		q.Runs[i] = nr
	}
	res, err := ti.InsertInTx(ctx, tx, &q)
	if err != nil {
		return res, err
	}
	s.decResults(res)
	return res, nil
}

// ApplyConcurrency is the wrapped store's, or 1.
func (s *Store) ApplyConcurrency() int {
	if ca, ok := s.Store.(store.ConcurrentApplier); ok {
		return ca.ApplyConcurrency()
	}
	return 1
}

// adminStore is a wrapped store that is also a store.Admin: webhook
// events and deliveries carry payloads.
type adminStore struct {
	*Store
	// admin is the wrapped store: the methods of store.Admin without
	// payloads go to it.
	admin
}

type admin = store.Admin

// WebhookEvents decodes the events' data.
func (a *adminStore) WebhookEvents(ctx context.Context, limit int) ([]*store.WebhookEvent, error) {
	evs, err := a.admin.WebhookEvents(ctx, limit)
	if err != nil {
		return evs, err
	}
	for i, e := range evs {
		c := *e
		if c.Data, err = a.dec(e.Data, "data", false); err != nil {
			return nil, fmt.Errorf("webhook event %d: %w", e.ID, err)
		}
		evs[i] = &c
	}
	return evs, nil
}

// EnqueueWebhookDeliveries encodes the bodies.
func (a *adminStore) EnqueueWebhookDeliveries(ctx context.Context, p *store.EnqueueDeliveriesParams) error {
	q := *p
	q.Deliveries = make([]*store.WebhookDelivery, len(p.Deliveries))
	for i, d := range p.Deliveries {
		c := *d
		var err error
		if c.Body, err = a.enc(d.Body, "body"); err != nil {
			return fmt.Errorf("webhook delivery %s: %w", d.ID, err)
		}
		q.Deliveries[i] = &c
	}
	return a.admin.EnqueueWebhookDeliveries(ctx, &q)
}

func (a *adminStore) decDeliveries(ds []*store.WebhookDelivery, err error) ([]*store.WebhookDelivery, error) {
	if err != nil {
		return ds, err
	}
	for i, d := range ds {
		c := *d
		if c.Body, err = a.dec(d.Body, "body", false); err != nil {
			return nil, fmt.Errorf("webhook delivery %s: %w", d.ID, err)
		}
		ds[i] = &c
	}
	return ds, nil
}

// ClaimWebhookDeliveries decodes the bodies.
func (a *adminStore) ClaimWebhookDeliveries(ctx context.Context, p *store.ClaimDeliveriesParams) ([]*store.WebhookDelivery, error) {
	return a.decDeliveries(a.admin.ClaimWebhookDeliveries(ctx, p))
}

// ListWebhookDeliveries decodes the bodies.
func (a *adminStore) ListWebhookDeliveries(ctx context.Context, p *store.ListDeliveriesParams) ([]*store.WebhookDelivery, error) {
	return a.decDeliveries(a.admin.ListWebhookDeliveries(ctx, p))
}
