-- Schedules (store.Schedule) and their tick log. Every change of a
-- schedule is a compare-and-set on version (UPDATE … WHERE version = $n:
-- of two processes that read one version, the second's update finds the
-- row changed and writes nothing); the log holds one row per (schedule,
-- tick). Durations are nanoseconds; a NULL time is none.
CREATE TABLE schedules (
    id              text COLLATE "C" PRIMARY KEY,
    target_kind     text NOT NULL,
    target_name     text NOT NULL,
    cron            text NOT NULL,
    every           bigint NOT NULL,
    anchor          timestamptz,
    time_zone       text NOT NULL,
    jitter          bigint NOT NULL,
    overlap         text NOT NULL,
    catchup_ticks   bigint NOT NULL,
    catchup_within  bigint NOT NULL,
    input           text,
    paused          boolean NOT NULL,
    declared        boolean NOT NULL,
    since           timestamptz NOT NULL,
    next_fire       timestamptz,
    last_tick       timestamptz,
    last_run_id     text NOT NULL,
    buffered_tick   timestamptz,
    pending_tick    timestamptz,
    pending_run_id  text NOT NULL,
    pending_cancel  text NOT NULL,
    version         bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

CREATE INDEX schedules_next_fire ON schedules (next_fire) WHERE NOT paused;

CREATE TABLE schedule_ticks (
    schedule_id text COLLATE "C" NOT NULL,
    tick        timestamptz NOT NULL,
    outcome     text NOT NULL,
    run_id      text NOT NULL,
    error       text NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (schedule_id, tick)
);
