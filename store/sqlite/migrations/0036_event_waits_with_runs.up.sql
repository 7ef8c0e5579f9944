-- A run's event waits go with the run: DeleteRun and PruneRuns delete
-- the run's row, and this trigger its waits (their inputs are payloads of
-- the run). A wait has no foreign key to its run, since it may be stored
-- before the run's row commits; the trigger needs none.
CREATE TRIGGER runs_event_waits_delete AFTER DELETE ON runs
BEGIN
    DELETE FROM event_waits WHERE run_id = OLD.id;
END;

-- Waits of runs deleted before this migration, closed since.
DELETE FROM event_waits WHERE delivered_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = event_waits.run_id);

-- Ended trigger groups go with PruneEvents (the groups that ended before
-- its cutoff, with their events), found through this index.
CREATE INDEX trigger_groups_ended ON trigger_groups (ended_at) WHERE status <> 'open';
