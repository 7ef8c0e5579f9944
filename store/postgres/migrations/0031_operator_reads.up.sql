-- Operator reads that do not grow with the runs stored (docs/api.md, What
-- the frequent reads cost). runs_active holds only the active runs: the
-- active counts, the blocked and stale runs of RunStats (the overview,
-- GET /stats, the gauges of a scrape), lists by an active status and the
-- approvals inbox read it and no finished run. runs_finished holds the
-- finished runs by their finish time: the finished counts and the latency
-- of a window read the runs that finished in it.
--
-- Updates of runs that change no indexed column stay HOT as before:
-- status was already in the predicate of runs_deadline, so a change of
-- status (the only update that sets finished_at) was never HOT; these
-- indexes add an entry to such an update (runs_active while the run is
-- active, runs_finished when it finishes), and none to the others.
CREATE INDEX runs_active ON runs (created_at, id) WHERE status IN ('pending', 'running', 'waiting');
CREATE INDEX runs_finished ON runs (finished_at, id) WHERE finished_at IS NOT NULL;
