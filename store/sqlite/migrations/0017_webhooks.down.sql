DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TRIGGER schedule_ticks_webhooks_update;
DROP TRIGGER schedule_ticks_webhooks;
DROP TRIGGER events_webhooks;
DROP TABLE webhook_events;
DROP TABLE webhooks;
