package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Webhooks = (*Store)(nil)

// The statements of store.Webhooks (migration 0017_webhooks).
const (
	webhookCols  = "id, url, events, workflows, tags, format, enabled, key_id, nonce, secret, created_by, created_at"
	deliveryCols = "id, webhook_id, event, run_id, body, status, attempts, next_at, last_status, last_error, owner, token, lease_until, created_at, updated_at"

	qWebhookInsert = "INSERT INTO webhooks (" + webhookCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
	qWebhookEvents = "SELECT e.id, e.run_id, e.seq, e.kind, e.step, e.idx, e.attempt, e.name, e.error, e.data, e.at, " +
		"COALESCE(r.workflow, ''), COALESCE(r.business_id, ''), COALESCE(r.tags, '[]') " +
		"FROM webhook_events e LEFT JOIN runs r ON r.id = e.run_id AND e.run_id <> '' ORDER BY e.id LIMIT ?"
	qDeliveryInsert = "INSERT INTO webhook_deliveries (id, webhook_id, event, run_id, body, status, next_at, created_at, updated_at) " +
		"SELECT ?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?7 WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?2) " +
		"ON CONFLICT (id) DO NOTHING"
	qEventsDelete  = "DELETE FROM webhook_events WHERE id IN (SELECT value FROM json_each(?))"
	qDeliveryClaim = "UPDATE webhook_deliveries SET owner = ?1, token = token + 1, lease_until = ?2, updated_at = ?3 " +
		"WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_at <= ?3 " +
		"AND (lease_until IS NULL OR lease_until <= ?3) " +
		"AND (event = '" + store.WebhookTestEvent + "' OR webhook_id IN (SELECT id FROM webhooks WHERE enabled = 1)) ORDER BY next_at, id LIMIT ?4) RETURNING " + deliveryCols
	qDeliveryRecord = "UPDATE webhook_deliveries SET status = ?4, attempts = ?5, next_at = COALESCE(?6, next_at), last_status = ?7, " +
		"last_error = ?8, owner = '', lease_until = NULL, updated_at = ?9 WHERE id = ?1 AND owner = ?2 AND token = ?3"
	qDeliveryExists = "SELECT 1 FROM webhook_deliveries WHERE id = ?"
	qAttemptInsert  = "INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, error, duration_us, next_at) " +
		"VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
	qDeliveryList = "SELECT " + deliveryCols + " FROM webhook_deliveries WHERE webhook_id = ?1 AND (?2 = '' OR status = ?2) " +
		"ORDER BY created_at DESC, id DESC LIMIT ?3"
	qAttemptList = "SELECT delivery_id, attempt, at, status_code, error, duration_us, next_at FROM webhook_attempts " +
		"WHERE delivery_id IN (SELECT value FROM json_each(?)) ORDER BY delivery_id, attempt"
)

// CreateWebhook stores a new webhook.
func (s *Store) CreateWebhook(ctx context.Context, wh *store.Webhook) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	if err := wh.Check(); err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	lists := make([]driver.Value, 3)
	for i, l := range [][]string{wh.Events, wh.Workflows, wh.Tags} {
		lists[i] = listText(l)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range []driver.Value{wh.ID, wh.URL, lists[0], lists[1], lists[2], wh.Format, boolInt(wh.Enabled), wh.KeyID,
				wh.Nonce, wh.Secret, wh.CreatedBy, micros(wh.CreatedAt)} {
				w.arg(a)
			}
			var err error
			if n, err = w.adhocExecN(qWebhookInsert); err != nil || n == 0 {
				return err
			}
			return w.syncWebhookCapture()
		})
	})
	if err != nil {
		return s.fail("create webhook", err)
	}
	if n == 0 {
		return fmt.Errorf("create webhook %q: %w", wh.ID, store.ErrWebhookExists)
	}
	return nil
}

func scanWebhook(sc scanner) (*store.Webhook, error) {
	var w store.Webhook
	var events, workflows, tags string
	var enabled, created int64
	if err := sc.Scan(&w.ID, &w.URL, &events, &workflows, &tags, &w.Format, &enabled, &w.KeyID, &w.Nonce, &w.Secret, &w.CreatedBy, &created); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		text string
		to   *[]string
	}{{events, &w.Events}, {workflows, &w.Workflows}, {tags, &w.Tags}} {
		if err := json.Unmarshal([]byte(x.text), x.to); err != nil {
			return nil, fmt.Errorf("webhook %q: %w", w.ID, err)
		}
	}
	w.Enabled, w.CreatedAt = enabled != 0, fromMicros(created)
	return &w, nil
}

// GetWebhook returns a webhook.
func (s *Store) GetWebhook(ctx context.Context, id string) (*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get webhook: %w", err)
	}
	w, err := scanWebhook(s.reader.QueryRowContext(ctx, "SELECT "+webhookCols+" FROM webhooks WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := s.reader.QueryContext(ctx, "SELECT "+webhookCols+" FROM webhooks ORDER BY created_at, id")
	if err != nil {
		return nil, s.fail("list webhooks", err)
	}
	defer rows.Close()
	out := []*store.Webhook{}
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, s.fail("list webhooks", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list webhooks", err)
	}
	return out, nil
}

// writeN runs one statement with args in a write transaction and returns
// the number of rows it changed.
func (s *Store) writeN(ctx context.Context, q string, args ...driver.Value) (int64, error) {
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range args {
				w.arg(a)
			}
			var err error
			n, err = w.adhocExecN(q)
			return err
		})
	})
	return n, err
}

// DeleteWebhook deletes a webhook; its deliveries go with it (ON DELETE
// CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(id)
			var err error
			if n, err = w.adhocExecN("DELETE FROM webhooks WHERE id = ?"); err != nil || n == 0 {
				return err
			}
			return w.syncWebhookCapture()
		})
	})
	if err != nil {
		return s.fail("delete webhook", err)
	}
	if n == 0 {
		return fmt.Errorf("delete webhook %q: %w", id, store.ErrWebhookNotFound)
	}
	return nil
}

// WebhookEvents returns captured events, oldest first.
func (s *Store) WebhookEvents(ctx context.Context, limit int) ([]*store.WebhookEvent, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("webhook events: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, qWebhookEvents, store.AccessLimit(limit))
	if err != nil {
		return nil, s.fail("webhook events", err)
	}
	defer rows.Close()
	out := []*store.WebhookEvent{}
	for rows.Next() {
		var e store.WebhookEvent
		var data sql.NullString
		var at int64
		var tags string
		if err := rows.Scan(&e.ID, &e.RunID, &e.Seq, &e.Kind, &e.Step, &e.Index, &e.Attempt, &e.Name, &e.Error, &data, &at,
			&e.Workflow, &e.BusinessID, &tags); err != nil {
			return nil, s.fail("webhook events", err)
		}
		if data.Valid && data.String != "" {
			e.Data = json.RawMessage(data.String)
		}
		if err := json.Unmarshal([]byte(tags), &e.Tags); err != nil {
			return nil, s.fail("webhook events", err)
		}
		e.At = fromMicros(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("webhook events", err)
	}
	return out, nil
}

// EnqueueWebhookDeliveries inserts deliveries and deletes the events
// they came from, in one write transaction.
func (s *Store) EnqueueWebhookDeliveries(ctx context.Context, p *store.EnqueueDeliveriesParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	consumed, err := json.Marshal(p.Consumed)
	if err != nil {
		return fmt.Errorf("enqueue webhook deliveries: %w", err)
	}
	err = s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, d := range p.Deliveries {
				for _, a := range []driver.Value{d.ID, d.WebhookID, d.Event, d.RunID, string(d.Body), micros(d.NextAt), micros(p.Now)} {
					w.arg(a)
				}
				if err := w.adhocExec(qDeliveryInsert); err != nil {
					return err
				}
			}
			if len(p.Consumed) == 0 {
				return nil
			}
			w.arg(string(consumed))
			return w.adhocExec(qEventsDelete)
		})
	})
	if err != nil {
		return s.fail("enqueue webhook deliveries", err)
	}
	return nil
}

func deliveryFromValues(v []driver.Value) *store.WebhookDelivery {
	return &store.WebhookDelivery{
		ID: vString(v[0]), WebhookID: vString(v[1]), Event: vString(v[2]), RunID: vString(v[3]), Body: vJSON(v[4]),
		Status: vString(v[5]), Attempts: int(vInt(v[6])), NextAt: vTime(v[7]), LastStatus: int(vInt(v[8])), LastError: vString(v[9]),
		Owner: vString(v[10]), Token: vInt(v[11]), LeaseUntil: vTime(v[12]), CreatedAt: vTime(v[13]), UpdatedAt: vTime(v[14]),
	}
}

// adhocRows runs q with the collected arguments and calls each with every
// row (of n columns).
func (w *wconn) adhocRows(q string, n int, each func([]driver.Value)) error {
	rows, err := w.queryText(q)
	if err != nil {
		return err
	}
	defer rows.Close()
	dest := make([]driver.Value, n)
	for {
		clear(dest)
		switch err := rows.Next(dest); {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
		each(dest)
	}
}

// ClaimWebhookDeliveries leases due deliveries. The writer is one
// connection and its transactions are IMMEDIATE, so two claims never get
// the same delivery.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, p *store.ClaimDeliveriesParams) ([]*store.WebhookDelivery, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	now := truncate(p.Now)
	var out []*store.WebhookDelivery
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			out = []*store.WebhookDelivery{}
			for _, a := range []driver.Value{p.Owner, micros(now.Add(p.LeaseFor)), micros(now), int64(p.Limit)} {
				w.arg(a)
			}
			return w.adhocRows(qDeliveryClaim, 15, func(v []driver.Value) { out = append(out, deliveryFromValues(v)) })
		})
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
	var refusal error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			refusal = nil
			for _, v := range []driver.Value{p.ID, p.Owner, p.Token, p.Status, int64(a.Attempt), nullMicros(a.NextAt), int64(a.StatusCode), msg, micros(a.At)} {
				w.arg(v)
			}
			n, err := w.adhocExecN(qDeliveryRecord)
			if err != nil {
				return err
			}
			if n == 0 {
				w.arg(p.ID)
				found, err := w.adhocRow(qDeliveryExists, 1)
				refusal = store.ErrWebhookNotFound
				if found {
					refusal = store.ErrLeaseLost
				}
				return err
			}
			for _, v := range []driver.Value{p.ID, int64(a.Attempt), micros(a.At), int64(a.StatusCode), msg, a.Duration.Microseconds(), nullMicros(a.NextAt)} {
				w.arg(v)
			}
			return w.adhocExec(qAttemptInsert)
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
	out, err := s.listDeliveries(ctx, p)
	if err != nil {
		return nil, s.fail("list webhook deliveries", err)
	}
	return out, nil
}

func (s *Store) listDeliveries(ctx context.Context, p *store.ListDeliveriesParams) ([]*store.WebhookDelivery, error) {
	rows, err := s.reader.QueryContext(ctx, qDeliveryList, p.WebhookID, p.Status, store.AccessLimit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*store.WebhookDelivery{}
	byID := map[string]*store.WebhookDelivery{}
	ids := []string{}
	for rows.Next() {
		var body string
		var lease sql.NullInt64
		var next, created, updated int64
		var d store.WebhookDelivery
		if err := rows.Scan(&d.ID, &d.WebhookID, &d.Event, &d.RunID, &body, &d.Status, &d.Attempts, &next, &d.LastStatus, &d.LastError,
			&d.Owner, &d.Token, &lease, &created, &updated); err != nil {
			return nil, err
		}
		d.Body, d.NextAt, d.CreatedAt, d.UpdatedAt = json.RawMessage(body), fromMicros(next), fromMicros(created), fromMicros(updated)
		if lease.Valid {
			d.LeaseUntil = fromMicros(lease.Int64)
		}
		out = append(out, &d)
		byID[d.ID] = &d
		ids = append(ids, d.ID)
	}
	if err := rows.Err(); err != nil || len(out) == 0 {
		return out, err
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	arows, err := s.reader.QueryContext(ctx, qAttemptList, string(idsJSON))
	if err != nil {
		return nil, err
	}
	defer arows.Close()
	for arows.Next() {
		var id string
		var a store.WebhookAttempt
		var at, us int64
		var next sql.NullInt64
		if err := arows.Scan(&id, &a.Attempt, &at, &a.StatusCode, &a.Error, &us, &next); err != nil {
			return nil, err
		}
		a.At, a.Duration = fromMicros(at), time.Duration(us)*time.Microsecond
		if next.Valid {
			a.NextAt = fromMicros(next.Int64)
		}
		byID[id].Log = append(byID[id].Log, a)
	}
	return out, arows.Err()
}

// PruneWebhookDeliveries deletes finished deliveries by age.
func (s *Store) PruneWebhookDeliveries(ctx context.Context, p *store.PruneDeliveriesParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	n, err := s.writeN(ctx, "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND updated_at < ?", micros(p.Before))
	if err != nil {
		return 0, s.fail("prune webhook deliveries", err)
	}
	return int(n), nil
}
