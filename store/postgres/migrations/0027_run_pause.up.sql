-- A paused run (store.Run.Paused): {"by", "at"}, NULL while the run is
-- not paused. Claims skip the tasks of paused runs through runs_paused,
-- which holds only the (few) paused runs.
ALTER TABLE runs ADD COLUMN paused jsonb;
CREATE INDEX runs_paused ON runs (id) WHERE paused IS NOT NULL;
