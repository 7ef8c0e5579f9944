-- Schedules (store.Schedule) and their tick log. Every change of a
-- schedule is a compare-and-set on version; the log holds one row per
-- (schedule, tick). Times are Unix microseconds UTC, durations
-- nanoseconds; a NULL time is none.
CREATE TABLE schedules (
    id              TEXT PRIMARY KEY,
    target_kind     TEXT NOT NULL,
    target_name     TEXT NOT NULL,
    cron            TEXT NOT NULL,
    every           INTEGER NOT NULL,
    anchor          INTEGER,
    time_zone       TEXT NOT NULL,
    jitter          INTEGER NOT NULL,
    overlap         TEXT NOT NULL,
    catchup_ticks   INTEGER NOT NULL,
    catchup_within  INTEGER NOT NULL,
    input           TEXT,
    paused          INTEGER NOT NULL,
    declared        INTEGER NOT NULL,
    since           INTEGER NOT NULL,
    next_fire       INTEGER,
    last_tick       INTEGER,
    last_run_id     TEXT NOT NULL,
    buffered_tick   INTEGER,
    pending_tick    INTEGER,
    pending_run_id  TEXT NOT NULL,
    pending_cancel  TEXT NOT NULL,
    version         INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX schedules_next_fire ON schedules (next_fire) WHERE paused = 0;

CREATE TABLE schedule_ticks (
    schedule_id TEXT NOT NULL,
    tick        INTEGER NOT NULL,
    outcome     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    error       TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, tick)
) STRICT, WITHOUT ROWID;
