-- Flow control over events (store.TriggerGroups): a trigger may debounce,
-- throttle or batch its events per key (a CEL expression over the event).
ALTER TABLE triggers ADD COLUMN group_key text NOT NULL DEFAULT '';
ALTER TABLE triggers ADD COLUMN debounce_us bigint NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN throttle_limit integer NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN throttle_period_us bigint NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN batch_size integer NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN batch_window_us bigint NOT NULL DEFAULT 0;

-- A group of events of one key of a trigger, that starts one run when due;
-- claimed under a lease like a firing (token fences its end, run_id is
-- fixed at its first claim). closed: it takes no more events.
CREATE TABLE trigger_groups (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_name text COLLATE "C" NOT NULL,
    key          text COLLATE "C" NOT NULL,
    status       text NOT NULL DEFAULT 'open',
    closed       boolean NOT NULL DEFAULT false,
    due_at       timestamptz NOT NULL,
    run_id       text NOT NULL DEFAULT '',
    error        text NOT NULL DEFAULT '',
    owner        text NOT NULL DEFAULT '',
    token        bigint NOT NULL DEFAULT 0,
    lease_until  timestamptz,
    ended_at     timestamptz
);
CREATE INDEX trigger_groups_open ON trigger_groups (trigger_name, key) WHERE NOT closed;
CREATE INDEX trigger_groups_due ON trigger_groups (due_at) WHERE status = 'open';

-- The events of the groups: an event joins a trigger's groups once.
CREATE TABLE trigger_group_events (
    trigger_name    text COLLATE "C" NOT NULL,
    event_id        text COLLATE "C" NOT NULL,
    group_id        bigint NOT NULL,
    seq             bigint NOT NULL,
    input           jsonb,
    business_key    text NOT NULL DEFAULT '',
    concurrency_key text NOT NULL DEFAULT '',
    PRIMARY KEY (trigger_name, event_id)
);
CREATE INDEX trigger_group_events_group ON trigger_group_events (group_id, seq);

-- Throttle windows: the groups due in a window of a key of a trigger.
CREATE TABLE trigger_windows (
    trigger_name text COLLATE "C" NOT NULL,
    key          text COLLATE "C" NOT NULL,
    window_start timestamptz NOT NULL,
    runs         integer NOT NULL,
    PRIMARY KEY (trigger_name, key, window_start)
);
