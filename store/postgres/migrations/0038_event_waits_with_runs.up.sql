-- A run's event waits go with the run (DeleteRun and PruneRuns delete
-- them in the statement that deletes the run): here, the waits of runs
-- deleted before, closed since. An open wait of a missing run is left:
-- it may be stored before its run's row commits.
DELETE FROM event_waits w WHERE delivered_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.run_id);

-- Ended trigger groups go with PruneEvents (the groups that ended before
-- its cutoff, with their events), found through this index.
CREATE INDEX trigger_groups_ended ON trigger_groups (ended_at) WHERE status <> 'open';
