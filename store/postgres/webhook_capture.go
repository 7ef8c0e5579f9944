package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

// Webhook capture triggers (store.Webhooks): migration 0022_webhook_capture
// made them exist only while at least one webhook is enabled. Every
// webhook change runs in a transaction that first takes a
// transaction-level advisory lock on the schema's webhooks (so changes of
// the enabled state are serialized), makes the change, then reads the
// number of enabled webhooks and whether the triggers exist, and creates
// or drops them when they disagree: the count it reads is the count it
// commits. The DDL locks history (CREATE TRIGGER: SHARE ROW EXCLUSIVE,
// DROP TRIGGER: ACCESS EXCLUSIVE) until the change commits, which waits
// for the transactions writing history and holds new ones back for that
// moment; only the changes that flip 0 <-> 1 enabled webhooks do it.
const (
	qWebhookLock  = "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/webhooks', 0))"
	qCaptureState = "SELECT EXISTS (SELECT 1 FROM §webhooks WHERE enabled), " +
		"(SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace " +
		"WHERE n.nspname = $1 AND t.tgname IN ('history_webhooks', 'schedule_ticks_webhooks'))"
	qCaptureCreate = "DROP TRIGGER IF EXISTS history_webhooks ON §history; " +
		"DROP TRIGGER IF EXISTS schedule_ticks_webhooks ON §schedule_ticks; " +
		"CREATE TRIGGER history_webhooks AFTER INSERT ON §history REFERENCING NEW TABLE AS new_history " +
		"FOR EACH STATEMENT EXECUTE FUNCTION §webhooks_capture_history(); " +
		"CREATE TRIGGER schedule_ticks_webhooks AFTER INSERT OR UPDATE OF outcome ON §schedule_ticks " +
		"FOR EACH ROW EXECUTE FUNCTION §webhooks_capture_tick()"
	qCaptureDrop = "DROP TRIGGER IF EXISTS history_webhooks ON §history; " +
		"DROP TRIGGER IF EXISTS schedule_ticks_webhooks ON §schedule_ticks"
	qWebhookUpdate = "UPDATE §webhooks SET url = COALESCE($1, url), events = COALESCE($2, events), workflows = COALESCE($3, workflows), " +
		"tags = COALESCE($4, tags), format = COALESCE($5, format), enabled = COALESCE($6, enabled), " +
		"key_id = CASE WHEN $7::bytea IS NULL THEN key_id ELSE $8 END, nonce = CASE WHEN $7::bytea IS NULL THEN nonce ELSE $9 END, " +
		"secret = COALESCE($7, secret) WHERE id = $10 RETURNING " + webhookCols
)

// webhookTx runs fn in a transaction that holds the webhooks' advisory
// lock, then puts the capture triggers in the state the webhooks call
// for (when fn changed something: changed reports it).
func (s *Store) webhookTx(ctx context.Context, fn func(tx pgx.Tx) (changed bool, err error)) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qWebhookLock, s.schema); err != nil {
			return err
		}
		changed, err := fn(tx)
		if err != nil || !changed {
			return err
		}
		var enabled bool
		var have int
		if err := tx.QueryRow(ctx, s.webhookQ(qCaptureState), s.schema).Scan(&enabled, &have); err != nil {
			return fmt.Errorf("webhook capture: %w", err)
		}
		var ddl string
		switch {
		case enabled && have < 2:
			ddl = qCaptureCreate
		case !enabled && have > 0:
			ddl = qCaptureDrop
		default:
			return nil
		}
		if _, err := tx.Exec(ctx, s.webhookQ(ddl), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("webhook capture: %w", err)
		}
		return nil
	})
}

func listPtr(l *[]string) any {
	if l == nil {
		return nil
	}
	return listArg(*l)
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
	var secret, nonce []byte
	var keyID *string
	if p.Secret != nil {
		secret, nonce, keyID = p.Secret.Secret, p.Secret.Nonce, &p.Secret.KeyID
	}
	var out *store.Webhook
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = nil
		return s.webhookTx(ctx, func(tx pgx.Tx) (bool, error) {
			w, err := scanWebhook(tx.QueryRow(ctx, s.webhookQ(qWebhookUpdate), p.URL, listPtr(p.Events), listPtr(p.Workflows),
				listPtr(p.Tags), p.Format, p.Enabled, secret, keyID, nonce, p.ID))
			if err == pgx.ErrNoRows {
				return false, nil
			}
			out = w
			return err == nil, err
		})
	})
	if err != nil {
		return nil, s.fail("update webhook", err)
	}
	if out == nil {
		return nil, fmt.Errorf("update webhook %q: %w", p.ID, store.ErrWebhookNotFound)
	}
	return out, nil
}
