DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TRIGGER schedule_ticks_webhooks ON schedule_ticks;
DROP FUNCTION webhooks_capture_tick();
DROP TRIGGER history_webhooks ON history;
DROP FUNCTION webhooks_capture_history();
DROP TABLE webhook_events;
DROP TABLE webhooks;
