package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Webhooks = (*Store)(nil)

// The statements of store.Webhooks (migration 0019_webhooks); § stands
// for the store's schema.
const (
	webhookCols  = "id, url, events, workflows, tags, format, enabled, key_id, nonce, secret, created_by, created_at"
	deliveryCols = "id, webhook_id, event, run_id, body, status, attempts, next_at, last_status, last_error, owner, token, lease_until, created_at, updated_at"

	qWebhookInsert = "INSERT INTO §webhooks (" + webhookCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) " +
		"ON CONFLICT (id) DO NOTHING"
	qWebhookGet    = "SELECT " + webhookCols + " FROM §webhooks WHERE id = $1"
	qWebhookList   = "SELECT " + webhookCols + " FROM §webhooks ORDER BY created_at, id"
	qWebhookDelete = "DELETE FROM §webhooks WHERE id = $1"
	qWebhookEvents = "SELECT e.id, e.run_id, e.seq, e.kind, e.step, e.idx, e.attempt, e.name, e.error, e.data, e.at, " +
		"COALESCE(r.workflow, ''), COALESCE(r.business_id, ''), COALESCE(r.tags, '{}') " +
		"FROM §webhook_events e LEFT JOIN §runs r ON r.id = e.run_id AND e.run_id <> '' ORDER BY e.id LIMIT $1"
	qDeliveryInsert = "INSERT INTO §webhook_deliveries (id, webhook_id, event, run_id, body, status, next_at, created_at, updated_at) " +
		"SELECT $1, $2, $3, $4, $5, 'pending', $6, $7, $7 WHERE EXISTS (SELECT 1 FROM §webhooks WHERE id = $2) " +
		"ON CONFLICT (id) DO NOTHING"
	qEventsDelete  = "DELETE FROM §webhook_events WHERE id = ANY($1)"
	qDeliveryClaim = "UPDATE §webhook_deliveries SET owner = $1, token = token + 1, lease_until = $2, updated_at = $3 " +
		"WHERE id IN (SELECT id FROM §webhook_deliveries WHERE status = 'pending' AND next_at <= $3 " +
		"AND (lease_until IS NULL OR lease_until <= $3) " +
		"AND (event = '" + store.WebhookTestEvent + "' OR webhook_id IN (SELECT id FROM §webhooks WHERE enabled)) ORDER BY next_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING " + deliveryCols
	qDeliveryRecord = "UPDATE §webhook_deliveries SET status = $4, attempts = $5, next_at = COALESCE($6, next_at), last_status = $7, " +
		"last_error = $8, owner = '', lease_until = NULL, updated_at = $9 WHERE id = $1 AND owner = $2 AND token = $3"
	qDeliveryExists = "SELECT EXISTS (SELECT 1 FROM §webhook_deliveries WHERE id = $1)"
	qAttemptInsert  = "INSERT INTO §webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, next_at) " +
		"VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"
	qDeliveryList = "SELECT " + deliveryCols + " FROM §webhook_deliveries WHERE webhook_id = $1 AND ($2 = '' OR status = $2) " +
		"ORDER BY created_at DESC, id DESC LIMIT $3"
	qAttemptList = "SELECT delivery_id, attempt, at, status_code, error, duration_us, next_at FROM §webhook_attempts " +
		"WHERE delivery_id = ANY($1) ORDER BY delivery_id, attempt"
	qDeliveryPrune = "DELETE FROM §webhook_deliveries WHERE status <> 'pending' AND updated_at < $1"
)

// webhookQ puts the store's schema into a statement of store.Webhooks.
func (s *Store) webhookQ(q string) string { return strings.ReplaceAll(q, "§", `"`+s.schema+`".`) }

func listArg(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// CreateWebhook stores a new webhook.
func (s *Store) CreateWebhook(ctx context.Context, w *store.Webhook) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	if err := w.Check(); err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	var tag pgconn.CommandTag
	err := s.once(ctx, func(ctx context.Context) error {
		return s.webhookTx(ctx, func(tx pgx.Tx) (bool, error) {
			var err error
			tag, err = tx.Exec(ctx, s.webhookQ(qWebhookInsert), w.ID, w.URL, listArg(w.Events), listArg(w.Workflows), listArg(w.Tags),
				w.Format, w.Enabled, w.KeyID, w.Nonce, w.Secret, w.CreatedBy, truncate(w.CreatedAt))
			return err == nil && tag.RowsAffected() > 0, err
		})
	})
	if err != nil {
		return s.fail("create webhook", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create webhook %q: %w", w.ID, store.ErrWebhookExists)
	}
	return nil
}

func scanWebhook(row pgx.Row) (*store.Webhook, error) {
	var w store.Webhook
	if err := row.Scan(&w.ID, &w.URL, &w.Events, &w.Workflows, &w.Tags, &w.Format, &w.Enabled, &w.KeyID, &w.Nonce, &w.Secret,
		&w.CreatedBy, &w.CreatedAt); err != nil {
		return nil, err
	}
	w.CreatedAt = w.CreatedAt.UTC()
	return &w, nil
}

// GetWebhook returns a webhook.
func (s *Store) GetWebhook(ctx context.Context, id string) (*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get webhook: %w", err)
	}
	var w *store.Webhook
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var err error
		w, err = scanWebhook(s.pool.QueryRow(ctx, s.webhookQ(qWebhookGet), id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get webhook %q: %w", id, store.ErrWebhookNotFound)
	}
	if err != nil {
		return nil, s.fail("get webhook", err)
	}
	return w, nil
}

// ListWebhooks returns every webhook.
func (s *Store) ListWebhooks(ctx context.Context) ([]*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	var out []*store.Webhook
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = []*store.Webhook{}
		rows, err := s.pool.Query(ctx, s.webhookQ(qWebhookList))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			w, err := scanWebhook(rows)
			if err != nil {
				return err
			}
			out = append(out, w)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("list webhooks", err)
	}
	return out, nil
}

// DeleteWebhook deletes a webhook; its deliveries go with it (ON DELETE
// CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	var tag pgconn.CommandTag
	err := s.once(ctx, func(ctx context.Context) error {
		return s.webhookTx(ctx, func(tx pgx.Tx) (bool, error) {
			var err error
			tag, err = tx.Exec(ctx, s.webhookQ(qWebhookDelete), id)
			return err == nil && tag.RowsAffected() > 0, err
		})
	})
	if err != nil {
		return s.fail("delete webhook", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete webhook %q: %w", id, store.ErrWebhookNotFound)
	}
	return nil
}

// WebhookEvents returns captured events, oldest first.
func (s *Store) WebhookEvents(ctx context.Context, limit int) ([]*store.WebhookEvent, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("webhook events: %w", err)
	}
	var out []*store.WebhookEvent
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = []*store.WebhookEvent{}
		rows, err := s.pool.Query(ctx, s.webhookQ(qWebhookEvents), store.AccessLimit(limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e store.WebhookEvent
			var data []byte
			if err := rows.Scan(&e.ID, &e.RunID, &e.Seq, &e.Kind, &e.Step, &e.Index, &e.Attempt, &e.Name, &e.Error, &data, &e.At,
				&e.Workflow, &e.BusinessID, &e.Tags); err != nil {
				return err
			}
			if len(data) > 0 {
				e.Data = json.RawMessage(data)
			}
			e.At = e.At.UTC()
			out = append(out, &e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("webhook events", err)
	}
	return out, nil
}

// EnqueueWebhookDeliveries inserts deliveries and deletes the events
// they came from, in one transaction; running it twice changes nothing
// more.
func (s *Store) EnqueueWebhookDeliveries(ctx context.Context, p *store.EnqueueDeliveriesParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	now := truncate(p.Now)
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			for _, d := range p.Deliveries {
				b.Queue(s.webhookQ(qDeliveryInsert), d.ID, d.WebhookID, d.Event, d.RunID, string(d.Body), truncate(d.NextAt), now)
			}
			if len(p.Consumed) > 0 {
				b.Queue(s.webhookQ(qEventsDelete), p.Consumed)
			}
			return tx.SendBatch(ctx, b).Close()
		})
	})
	if err != nil {
		return s.fail("enqueue webhook deliveries", err)
	}
	return nil
}

func scanDelivery(row pgx.Row) (*store.WebhookDelivery, error) {
	var d store.WebhookDelivery
	var body string
	var lease *time.Time
	if err := row.Scan(&d.ID, &d.WebhookID, &d.Event, &d.RunID, &body, &d.Status, &d.Attempts, &d.NextAt, &d.LastStatus, &d.LastError,
		&d.Owner, &d.Token, &lease, &d.CreatedAt, &d.UpdatedAt); err != nil {
		return nil, err
	}
	d.Body = json.RawMessage(body)
	if lease != nil {
		d.LeaseUntil = lease.UTC()
	}
	d.NextAt, d.CreatedAt, d.UpdatedAt = d.NextAt.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return &d, nil
}

func collectDeliveries(rows pgx.Rows) ([]*store.WebhookDelivery, error) {
	defer rows.Close()
	out := []*store.WebhookDelivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// ClaimWebhookDeliveries leases due deliveries (FOR UPDATE SKIP LOCKED:
// concurrent claims never get the same one).
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, p *store.ClaimDeliveriesParams) ([]*store.WebhookDelivery, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	now := truncate(p.Now)
	var out []*store.WebhookDelivery
	err := s.once(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.webhookQ(qDeliveryClaim), p.Owner, now.Add(p.LeaseFor), now, p.Limit)
		if err != nil {
			return err
		}
		out, err = collectDeliveries(rows)
		return err
	})
	if err != nil {
		return nil, s.fail("claim webhook deliveries", err)
	}
	return out, nil
}

// RecordWebhookAttempt records an attempt, fenced by the lease.
func (s *Store) RecordWebhookAttempt(ctx context.Context, p *store.RecordAttemptParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("record webhook attempt: %w", err)
	}
	a := p.Attempt
	msg := store.CutError(a.Error)
	var next *time.Time
	if !a.NextAt.IsZero() {
		t := truncate(a.NextAt)
		next = &t
	}
	var refusal error
	err := s.once(ctx, func(ctx context.Context) error {
		refusal = nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, s.webhookQ(qDeliveryRecord), p.ID, p.Owner, p.Token, p.Status, a.Attempt, next, a.StatusCode, msg,
				truncate(a.At))
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				var found bool
				if err := tx.QueryRow(ctx, s.webhookQ(qDeliveryExists), p.ID).Scan(&found); err != nil {
					return err
				}
				refusal = store.ErrWebhookNotFound
				if found {
					refusal = store.ErrLeaseLost
				}
				return nil
			}
			_, err = tx.Exec(ctx, s.webhookQ(qAttemptInsert), p.ID, a.Attempt, truncate(a.At), a.StatusCode, msg, a.Duration.Microseconds(), next)
			return err
		})
	})
	if err != nil {
		return s.fail("record webhook attempt", err)
	}
	if refusal != nil {
		return fmt.Errorf("record webhook attempt %q (owner %q, token %d): %w", p.ID, p.Owner, p.Token, refusal)
	}
	return nil
}

// ListWebhookDeliveries returns a webhook's deliveries with their
// attempts.
func (s *Store) ListWebhookDeliveries(ctx context.Context, p *store.ListDeliveriesParams) ([]*store.WebhookDelivery, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	var out []*store.WebhookDelivery
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.webhookQ(qDeliveryList), p.WebhookID, p.Status, store.AccessLimit(p.Limit))
		if err != nil {
			return err
		}
		if out, err = collectDeliveries(rows); err != nil || len(out) == 0 {
			return err
		}
		ids := make([]string, len(out))
		byID := map[string]*store.WebhookDelivery{}
		for i, d := range out {
			ids[i], byID[d.ID] = d.ID, d
		}
		rows, err = s.pool.Query(ctx, s.webhookQ(qAttemptList), ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var a store.WebhookAttempt
			var us int64
			var next *time.Time
			if err := rows.Scan(&id, &a.Attempt, &a.At, &a.StatusCode, &a.Error, &us, &next); err != nil {
				return err
			}
			a.At, a.Duration = a.At.UTC(), time.Duration(us)*time.Microsecond
			if next != nil {
				a.NextAt = next.UTC()
			}
			byID[id].Log = append(byID[id].Log, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("list webhook deliveries", err)
	}
	return out, nil
}

// PruneWebhookDeliveries deletes finished deliveries by age.
func (s *Store) PruneWebhookDeliveries(ctx context.Context, p *store.PruneDeliveriesParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	var n int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.webhookQ(qDeliveryPrune), truncate(p.Before))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.fail("prune webhook deliveries", err)
	}
	return int(n), nil
}
