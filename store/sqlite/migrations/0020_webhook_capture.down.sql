DROP TRIGGER IF EXISTS schedule_ticks_webhooks_update;
DROP TRIGGER IF EXISTS schedule_ticks_webhooks;
DROP TRIGGER IF EXISTS events_webhooks;

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
