-- Webhook subscriptions, the events captured for them and their
-- deliveries (store.Webhooks). Retention (PruneRuns) does not touch these
-- tables; delivered and dead deliveries are pruned by age
-- (PruneWebhookDeliveries).
CREATE TABLE webhooks (
    id         text COLLATE "C" PRIMARY KEY,
    url        text NOT NULL,
    events     jsonb NOT NULL,
    workflows  jsonb NOT NULL DEFAULT '[]',
    tags       jsonb NOT NULL DEFAULT '[]',
    format     text NOT NULL,
    enabled    boolean NOT NULL,
    key_id     text NOT NULL DEFAULT '', -- '' when secret is in clear
    nonce      bytea,
    secret     bytea NOT NULL,
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);

-- The outbox: history entries of the kinds webhooks report, and failed
-- schedule ticks, copied by the triggers below in the transaction that
-- writes them, while a webhook is enabled. The dispatcher turns each
-- into deliveries and deletes it.
CREATE TABLE webhook_events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id  text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    kind    text NOT NULL,
    step    text NOT NULL,
    idx     bigint NOT NULL,
    attempt bigint NOT NULL,
    name    text NOT NULL,
    error   text NOT NULL,
    data    jsonb,
    at      timestamptz NOT NULL
);

-- A history row holds the entries seq .. seq+n-1 of a change as a JSON
-- array of [kind, step, index, attempt, name, error, data?] (0004).
CREATE FUNCTION webhooks_capture_history() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM webhooks WHERE enabled) THEN
        INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
        SELECT h.run_id, h.seq + e.i - 1, e.v->>0, e.v->>1, (e.v->>2)::bigint, (e.v->>3)::bigint, e.v->>4, e.v->>5,
            (e.v->6)::jsonb, h.at
        FROM new_history h, json_array_elements(h.entries::json) WITH ORDINALITY AS e (v, i)
        WHERE e.v->>0 IN ('run_started', 'run_completed', 'run_failed', 'run_cancelled', 'step_completed', 'step_failed',
            'step_waiting', 'step_resumed')
        ORDER BY h.run_id, h.seq, e.i;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER history_webhooks AFTER INSERT ON history REFERENCING NEW TABLE AS new_history
FOR EACH STATEMENT EXECUTE FUNCTION webhooks_capture_history();

CREATE FUNCTION webhooks_capture_tick() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.outcome = 'failed' AND (TG_OP = 'INSERT' OR OLD.outcome <> 'failed') AND EXISTS (SELECT 1 FROM webhooks WHERE enabled) THEN
        INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
        VALUES ('', 0, 'schedule_tick_failed', NEW.schedule_id, 0, 0, '', NEW.error, NULL, NEW.tick);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER schedule_ticks_webhooks AFTER INSERT OR UPDATE OF outcome ON schedule_ticks
FOR EACH ROW EXECUTE FUNCTION webhooks_capture_tick();

-- One row per (webhook, event): id is derived from both, so a dispatch
-- repeated after a crash inserts nothing new.
CREATE TABLE webhook_deliveries (
    id          text COLLATE "C" PRIMARY KEY,
    webhook_id  text COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event       text NOT NULL,
    run_id      text NOT NULL,
    body        text NOT NULL,
    status      text NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    next_at     timestamptz NOT NULL,
    last_status integer NOT NULL DEFAULT 0,
    last_error  text NOT NULL DEFAULT '',
    owner       text NOT NULL DEFAULT '',
    token       bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (updated_at) WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
    delivery_id text COLLATE "C" NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    at          timestamptz NOT NULL,
    status_code integer NOT NULL,
    error       text NOT NULL,
    duration_us bigint NOT NULL,
    next_at     timestamptz,
    PRIMARY KEY (delivery_id, attempt)
);
