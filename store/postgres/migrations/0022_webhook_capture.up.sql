-- Webhook capture costs nothing while no webhook is enabled: the capture
-- triggers of 0019_webhooks ran (and asked "is a webhook enabled?") on
-- every history insert. From now on they exist only while at least one
-- webhook is enabled: the store creates and drops them in the
-- transaction of the webhook change that makes the number of enabled
-- webhooks go from 0 to 1 or from 1 to 0, under the transaction-level
-- advisory lock that serializes those changes (store/postgres/
-- webhook_capture.go). The functions no longer ask.
CREATE OR REPLACE FUNCTION webhooks_capture_history() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
    SELECT h.run_id, h.seq + e.i - 1, e.v->>0, e.v->>1, (e.v->>2)::bigint, (e.v->>3)::bigint, e.v->>4, e.v->>5,
        (e.v->6)::jsonb, h.at
    FROM new_history h, json_array_elements(h.entries::json) WITH ORDINALITY AS e (v, i)
    WHERE e.v->>0 IN ('run_started', 'run_completed', 'run_failed', 'run_cancelled', 'step_completed', 'step_failed',
        'step_waiting', 'step_resumed')
    ORDER BY h.run_id, h.seq, e.i;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION webhooks_capture_tick() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.outcome = 'failed' AND (TG_OP = 'INSERT' OR OLD.outcome <> 'failed') THEN
        INSERT INTO webhook_events (run_id, seq, kind, step, idx, attempt, name, error, data, at)
        VALUES ('', 0, 'schedule_tick_failed', NEW.schedule_id, 0, 0, '', NEW.error, NULL, NEW.tick);
    END IF;
    RETURN NULL;
END $$;

DO $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || '/webhooks', 0));
    DROP TRIGGER IF EXISTS history_webhooks ON history;
    DROP TRIGGER IF EXISTS schedule_ticks_webhooks ON schedule_ticks;
    IF EXISTS (SELECT 1 FROM webhooks WHERE enabled) THEN
        CREATE TRIGGER history_webhooks AFTER INSERT ON history REFERENCING NEW TABLE AS new_history
        FOR EACH STATEMENT EXECUTE FUNCTION webhooks_capture_history();
        CREATE TRIGGER schedule_ticks_webhooks AFTER INSERT OR UPDATE OF outcome ON schedule_ticks
        FOR EACH ROW EXECUTE FUNCTION webhooks_capture_tick();
    END IF;
END $$;
