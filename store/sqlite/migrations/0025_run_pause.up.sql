-- A paused run (store.Run.Paused): JSON {"by", "at"}, NULL while the run
-- is not paused. Claims skip the tasks of paused runs through
-- runs_paused, which holds only the (few) paused runs.
ALTER TABLE runs ADD COLUMN paused TEXT;
CREATE INDEX runs_paused ON runs (id) WHERE paused IS NOT NULL;
