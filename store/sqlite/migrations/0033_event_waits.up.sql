-- Waits of runs for events (store.EventWaits): one row per wait id. A
-- wait is matched once (matched_event_id, a compare-and-set) and then
-- delivered to its run (delivered_at).
CREATE TABLE event_waits (
    id               TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    step             TEXT NOT NULL DEFAULT '',
    kind             TEXT NOT NULL,
    resume_with      TEXT NOT NULL DEFAULT '',
    event            TEXT NOT NULL,
    match_expr       TEXT NOT NULL DEFAULT '',
    input            TEXT,
    from_time        INTEGER NOT NULL,
    until_time       INTEGER,
    created_at       INTEGER NOT NULL,
    matched_event_id TEXT,
    matched_at       INTEGER,
    delivered_at     INTEGER
);
CREATE INDEX event_waits_open ON event_waits (created_at) WHERE delivered_at IS NULL;
CREATE INDEX event_waits_run ON event_waits (run_id);
CREATE INDEX event_waits_matched ON event_waits (matched_event_id) WHERE matched_event_id IS NOT NULL;
