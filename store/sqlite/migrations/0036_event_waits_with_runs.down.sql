DROP TRIGGER runs_event_waits_delete;
