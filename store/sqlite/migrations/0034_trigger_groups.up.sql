-- Flow control over events (store.TriggerGroups): a trigger may debounce,
-- throttle or batch its events per key (a CEL expression over the event).
ALTER TABLE triggers ADD COLUMN group_key TEXT NOT NULL DEFAULT '';
ALTER TABLE triggers ADD COLUMN debounce_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN throttle_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN throttle_period_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN batch_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD COLUMN batch_window_us INTEGER NOT NULL DEFAULT 0;

-- A group of events of one key of a trigger, that starts one run when due;
-- claimed under a lease like a firing (token fences its end, run_id is
-- fixed at its first claim). closed: it takes no more events.
CREATE TABLE trigger_groups (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    trigger_name TEXT NOT NULL,
    key          TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'open',
    closed       INTEGER NOT NULL DEFAULT 0,
    due_at       INTEGER NOT NULL,
    run_id       TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    owner        TEXT NOT NULL DEFAULT '',
    token        INTEGER NOT NULL DEFAULT 0,
    lease_until  INTEGER,
    ended_at     INTEGER
);
CREATE INDEX trigger_groups_open ON trigger_groups (trigger_name, key) WHERE closed = 0;
CREATE INDEX trigger_groups_due ON trigger_groups (due_at) WHERE status = 'open';

-- The events of the groups: an event joins a trigger's groups once.
CREATE TABLE trigger_group_events (
    trigger_name    TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    group_id        INTEGER NOT NULL,
    seq             INTEGER NOT NULL,
    input           TEXT,
    business_key    TEXT NOT NULL DEFAULT '',
    concurrency_key TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (trigger_name, event_id)
);
CREATE INDEX trigger_group_events_group ON trigger_group_events (group_id, seq);

-- Throttle windows: the groups due in a window of a key of a trigger.
CREATE TABLE trigger_windows (
    trigger_name TEXT NOT NULL,
    key          TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    runs         INTEGER NOT NULL,
    PRIMARY KEY (trigger_name, key, window_start)
);
