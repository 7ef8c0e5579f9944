-- Waits of runs for events (store.EventWaits): one row per wait id. A
-- wait is matched once (matched_event_id, a compare-and-set) and then
-- delivered to its run (delivered_at).
CREATE TABLE event_waits (
    id               text COLLATE "C" PRIMARY KEY,
    run_id           text COLLATE "C" NOT NULL,
    step             text NOT NULL DEFAULT '',
    kind             text NOT NULL,
    resume_with      text NOT NULL DEFAULT '',
    event            text COLLATE "C" NOT NULL,
    match_expr       text NOT NULL DEFAULT '',
    input            jsonb,
    from_time        timestamptz NOT NULL,
    until_time       timestamptz,
    created_at       timestamptz NOT NULL,
    matched_event_id text COLLATE "C",
    matched_at       timestamptz,
    delivered_at     timestamptz
);
CREATE INDEX event_waits_open ON event_waits (created_at) WHERE delivered_at IS NULL;
CREATE INDEX event_waits_run ON event_waits (run_id);
CREATE INDEX event_waits_matched ON event_waits (matched_event_id) WHERE matched_event_id IS NOT NULL;
