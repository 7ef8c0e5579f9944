-- Operator reads that do not grow with the runs stored (docs/api.md, What
-- the frequent reads cost). runs_active holds only the active runs: the
-- active counts, the blocked and stale runs of RunStats (the overview,
-- GET /stats, the gauges of a scrape), lists by an active status and the
-- approvals inbox read it and no finished run (runs_finished, of 0001,
-- serves the finished counts and the latency of a window). SQLite reads a
-- partial index only for a statement whose WHERE clause has its terms:
-- each of those statements has status IN ('pending', 'running',
-- 'waiting') word for word.
CREATE INDEX runs_active ON runs (created_at, id) WHERE status IN ('pending', 'running', 'waiting');
