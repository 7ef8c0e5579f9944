package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

// Webhook capture triggers (store.Webhooks): they copy the history
// entries of the kinds webhooks report, and failed schedule ticks, into
// webhook_events. Migration 0020_webhook_capture dropped those of 0017;
// they exist only while at least one webhook is enabled, created and
// dropped by syncWebhookCapture in the transaction of every webhook
// change (SQLite has a single writer: the count it reads is the count
// the transaction commits) and right after migrating. Without the
// triggers a history insert does no webhook work at all.
var (
	captureTriggers = []string{
		`CREATE TRIGGER IF NOT EXISTS events_webhooks AFTER INSERT ON events
WHEN NEW.kind IN ('run_started', 'run_completed', 'run_failed', 'run_cancelled', 'step_completed', 'step_failed', 'step_waiting', 'step_resumed')
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    VALUES (NEW.run_id, NEW.seq, NEW.kind, NEW.step, NEW.idx, NEW.attempt, NEW.name, NEW.error, NEW.data, NEW.at);
END`,
		`CREATE TRIGGER IF NOT EXISTS schedule_ticks_webhooks AFTER INSERT ON schedule_ticks
WHEN NEW.outcome = 'failed'
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    VALUES ('', NEW.tick, 'schedule_tick_failed', NEW.schedule_id, 0, 0, '', NEW.error, NULL, NEW.tick);
END`,
		`CREATE TRIGGER IF NOT EXISTS schedule_ticks_webhooks_update AFTER UPDATE OF outcome ON schedule_ticks
WHEN NEW.outcome = 'failed' AND OLD.outcome <> 'failed'
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    VALUES ('', NEW.tick, 'schedule_tick_failed', NEW.schedule_id, 0, 0, '', NEW.error, NULL, NEW.tick);
END`,
	}
	captureDrops = []string{
		"DROP TRIGGER IF EXISTS events_webhooks",
		"DROP TRIGGER IF EXISTS schedule_ticks_webhooks",
		"DROP TRIGGER IF EXISTS schedule_ticks_webhooks_update",
	}
)

const (
	qCaptureState = "SELECT EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1), " +
		"(SELECT count(*) FROM sqlite_master WHERE type = 'trigger' " +
		"AND name IN ('events_webhooks', 'schedule_ticks_webhooks', 'schedule_ticks_webhooks_update'))"
	qWebhookUpdate = "UPDATE webhooks SET url = COALESCE(?1, url), events = COALESCE(?2, events), workflows = COALESCE(?3, workflows), " +
		"tags = COALESCE(?4, tags), format = COALESCE(?5, format), enabled = COALESCE(?6, enabled), " +
		"key_id = CASE WHEN ?7 IS NULL THEN key_id ELSE ?8 END, nonce = CASE WHEN ?7 IS NULL THEN nonce ELSE ?9 END, " +
		"secret = COALESCE(?7, secret) WHERE id = ?10"
)

// syncWebhookCapture, inside a write transaction, creates the capture
// triggers when a webhook is enabled and drops them when none is; it
// changes the schema only when the triggers' presence is not what it
// should be.
func (w *wconn) syncWebhookCapture() error {
	if _, err := w.adhocRow(qCaptureState, 2); err != nil {
		return fmt.Errorf("webhook capture: %w", err)
	}
	enabled, have := vInt(w.dest[0]) != 0, int(vInt(w.dest[1]))
	var ddl []string
	switch {
	case enabled && have < len(captureTriggers):
		ddl = captureTriggers
	case !enabled && have > 0:
		ddl = captureDrops
	}
	for _, q := range ddl {
		if err := w.adhocExec(q); err != nil {
			return fmt.Errorf("webhook capture: %w", err)
		}
	}
	return nil
}

// syncCaptureAfterMigrate puts the capture triggers in the state the
// stored webhooks call for (Open, after the migrations).
//
// It reads first, outside a transaction (a WAL read waits for no writer),
// and takes the write lock only when the triggers must change: a process
// that opens a busy database, as every worker of a deployment does at
// start, does not queue behind the other processes' writers for nothing.
func (s *Store) syncCaptureAfterMigrate(ctx context.Context) error {
	var enabled bool
	var have int
	if err := s.writer.QueryRowContext(ctx, qCaptureState).Scan(&enabled, &have); err != nil {
		return fmt.Errorf("webhook capture: %w", err)
	}
	if (enabled && have == len(captureTriggers)) || (!enabled && have == 0) {
		return nil
	}
	return s.withWriter(ctx, func(w *wconn) error { return w.tx(w.syncWebhookCapture) })
}

func nullList(l *[]string) driver.Value {
	if l == nil {
		return nil
	}
	return listText(*l)
}

// UpdateWebhook changes the fields of a webhook that p sets, and creates
// or drops the capture triggers in the same transaction.
func (s *Store) UpdateWebhook(ctx context.Context, p *store.WebhookUpdate) (*store.Webhook, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("update webhook: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("update webhook: %w", err)
	}
	args := make([]driver.Value, 10)
	if p.URL != nil {
		args[0] = *p.URL
	}
	args[1], args[2], args[3] = nullList(p.Events), nullList(p.Workflows), nullList(p.Tags)
	if p.Format != nil {
		args[4] = *p.Format
	}
	if p.Enabled != nil {
		args[5] = boolInt(*p.Enabled)
	}
	if p.Secret != nil {
		args[6], args[7], args[8] = p.Secret.Secret, p.Secret.KeyID, p.Secret.Nonce
	}
	args[9] = p.ID
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range args {
				w.arg(a)
			}
			var err error
			if n, err = w.adhocExecN(qWebhookUpdate); err != nil || n == 0 {
				return err
			}
			return w.syncWebhookCapture()
		})
	})
	if err != nil {
		return nil, s.fail("update webhook", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("update webhook %q: %w", p.ID, store.ErrWebhookNotFound)
	}
	return s.GetWebhook(ctx, p.ID)
}
