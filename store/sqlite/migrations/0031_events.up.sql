-- Events sent to the engine (store.Events): one row per event id; seq
-- orders them (AUTOINCREMENT: a pruned seq is never reused, so a list's
-- cursor stays valid). The table is not named events: that is the
-- runs' history here.
CREATE TABLE sent_events (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    id   TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    data TEXT,
    at   INTEGER NOT NULL
);
CREATE INDEX sent_events_name ON sent_events (name, seq);
CREATE INDEX sent_events_at ON sent_events (at, seq);

-- Triggers (store.Triggers) and their firings: one per (event, trigger),
-- written with the event; pending ones are claimed under a lease.
CREATE TABLE triggers (
    name        TEXT PRIMARY KEY,
    event       TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    target_name TEXT NOT NULL,
    filter      TEXT NOT NULL DEFAULT '',
    input       TEXT NOT NULL DEFAULT '',
    declared    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX triggers_event ON triggers (event);

CREATE TABLE event_firings (
    event_id     TEXT NOT NULL,
    trigger_name TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    run_id       TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    owner        TEXT NOT NULL DEFAULT '',
    token        INTEGER NOT NULL DEFAULT 0,
    lease_until  INTEGER,
    ended_at     INTEGER,
    PRIMARY KEY (event_id, trigger_name)
);
CREATE INDEX event_firings_pending ON event_firings (trigger_name, seq) WHERE status = 'pending';
