-- Webhook subscriptions, the events captured for them and their
-- deliveries (store.Webhooks). Times are Unix microseconds UTC.
-- Retention (PruneRuns) does not touch these tables; delivered and dead
-- deliveries are pruned by age (PruneWebhookDeliveries).
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,           -- JSON array of event types
    workflows  TEXT NOT NULL DEFAULT '[]',
    tags       TEXT NOT NULL DEFAULT '[]',
    format     TEXT NOT NULL,
    enabled    INTEGER NOT NULL,
    key_id     TEXT NOT NULL DEFAULT '', -- '' when secret is in clear
    nonce      BLOB,
    secret     BLOB NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The outbox: history entries of the kinds webhooks report, and failed
-- schedule ticks, copied by the triggers below in the transaction that
-- writes them, while a webhook is enabled. The dispatcher turns each
-- into deliveries and deletes it.
CREATE TABLE webhook_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    step    TEXT NOT NULL,
    idx     INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    name    TEXT NOT NULL,
    error   TEXT NOT NULL,
    data    TEXT,
    at      INTEGER NOT NULL
) STRICT;

CREATE TRIGGER events_webhooks AFTER INSERT ON events
WHEN NEW.kind IN ('run_started', 'run_completed', 'run_failed', 'run_cancelled', 'step_completed', 'step_failed', 'step_waiting', 'step_resumed')
    AND EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    VALUES (NEW.run_id, NEW.seq, NEW.kind, NEW.step, NEW.idx, NEW.attempt, NEW.name, NEW.error, NEW.data, NEW.at);
END;

CREATE TRIGGER schedule_ticks_webhooks AFTER INSERT ON schedule_ticks
WHEN NEW.outcome = 'failed' AND EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    VALUES ('', NEW.tick, 'schedule_tick_failed', NEW.schedule_id, 0, 0, '', NEW.error, NULL, NEW.tick);
END;

CREATE TRIGGER schedule_ticks_webhooks_update AFTER UPDATE OF outcome ON schedule_ticks
WHEN NEW.outcome = 'failed' AND OLD.outcome <> 'failed' AND EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    VALUES ('', NEW.tick, 'schedule_tick_failed', NEW.schedule_id, 0, 0, '', NEW.error, NULL, NEW.tick);
END;

-- One row per (webhook, event): id is derived from both, so a dispatch
-- repeated after a crash inserts nothing new.
CREATE TABLE webhook_deliveries (
    id          TEXT PRIMARY KEY,
    webhook_id  TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event       TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    body        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,
    last_status INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    owner       TEXT NOT NULL DEFAULT '',
    token       INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (updated_at) WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status_code INTEGER NOT NULL,
    error       TEXT NOT NULL,
    duration_us INTEGER NOT NULL,
    next_at     INTEGER,
    PRIMARY KEY (delivery_id, attempt)
) STRICT, WITHOUT ROWID;
