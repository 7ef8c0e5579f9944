-- Webhook capture costs nothing while no webhook is enabled: the capture
-- triggers of 0017_webhooks evaluated "is a webhook enabled?" on every
-- history insert. They are dropped here and exist from now on only while
-- at least one webhook is enabled: the store creates them (without that
-- condition) and drops them in the transaction of the webhook change that
-- makes the number of enabled webhooks go from 0 to 1 or from 1 to 0,
-- and right after migrating (store/sqlite/webhook_capture.go).
DROP TRIGGER IF EXISTS schedule_ticks_webhooks_update;
DROP TRIGGER IF EXISTS schedule_ticks_webhooks;
DROP TRIGGER IF EXISTS events_webhooks;
