-- One index entry fewer per run (issue 31: a run's and a job's WAL and
-- bytes).
--
-- runs_workflow_version is gone: CountRunsByVersion, its only reader,
-- reads the status and kind of every run of a name from the heap anyway,
-- and finds them as well through runs_workflow (workflow, created_at,
-- id). The index cost an entry at every insert of a run and at every
-- update that is not HOT (every change of status, a run's finish
-- included), and its bytes for as long as a finished run is kept.
DROP INDEX runs_workflow_version;
