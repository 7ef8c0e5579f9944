DROP INDEX trigger_groups_ended;
DROP TRIGGER runs_event_waits_delete;
