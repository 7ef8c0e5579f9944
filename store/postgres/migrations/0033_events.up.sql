-- Events sent to the engine (store.Events): one row per event id; seq
-- orders them. Named like SQLite's table (where events is the history).
CREATE TABLE sent_events (
    seq  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id   text COLLATE "C" NOT NULL UNIQUE,
    name text COLLATE "C" NOT NULL,
    data jsonb,
    at   timestamptz NOT NULL
);
CREATE INDEX sent_events_name ON sent_events (name, seq);
CREATE INDEX sent_events_at ON sent_events (at, seq);

-- Triggers (store.Triggers) and their firings: one per (event, trigger),
-- written with the event; pending ones are claimed under a lease.
CREATE TABLE triggers (
    name        text COLLATE "C" PRIMARY KEY,
    event       text COLLATE "C" NOT NULL,
    target_kind text NOT NULL,
    target_name text NOT NULL,
    filter      text NOT NULL DEFAULT '',
    input       text NOT NULL DEFAULT '',
    declared    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX triggers_event ON triggers (event);

CREATE TABLE event_firings (
    event_id     text COLLATE "C" NOT NULL,
    trigger_name text COLLATE "C" NOT NULL,
    seq          bigint NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    run_id       text NOT NULL DEFAULT '',
    error        text NOT NULL DEFAULT '',
    owner        text NOT NULL DEFAULT '',
    token        bigint NOT NULL DEFAULT 0,
    lease_until  timestamptz,
    ended_at     timestamptz,
    PRIMARY KEY (event_id, trigger_name)
);
CREATE INDEX event_firings_pending ON event_firings (trigger_name, seq) WHERE status = 'pending';
