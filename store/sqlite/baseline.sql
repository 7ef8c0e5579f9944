-- the schema of migrations 1 to 37, for a new database (go test -run TestSchemaBaseline -update writes it)
PRAGMA defer_foreign_keys = ON;
CREATE TABLE runs (
    id          TEXT PRIMARY KEY,
    workflow    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    status      TEXT NOT NULL,
    input       TEXT,
    output      TEXT,
    error       TEXT NOT NULL DEFAULT '',
    business_id TEXT, -- NULL when the run has none
    key_scope   TEXT NOT NULL DEFAULT '',
    -- The business id while it must stay unique: for scope active while
    -- the run is active, for scope forever always; NULL otherwise.
    unique_key  TEXT,
    parent_id   TEXT NOT NULL DEFAULT '',
    tags        TEXT NOT NULL DEFAULT '[]',
    metadata    TEXT,
    state       TEXT,
    published   TEXT,
    seq         INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER
, condition TEXT, concurrency_key TEXT NOT NULL DEFAULT '', trace_context TEXT NOT NULL DEFAULT '', build_id TEXT NOT NULL DEFAULT '', paused TEXT, deadline INTEGER, search_attributes TEXT) STRICT;
CREATE TABLE events (
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    step    TEXT NOT NULL DEFAULT '',
    idx     INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    name    TEXT NOT NULL DEFAULT '',
    data    TEXT,
    error   TEXT NOT NULL DEFAULT '',
    at      INTEGER NOT NULL, key TEXT,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE tasks (
    -- AUTOINCREMENT: an id is never reused, so a lease (id, token) never
    -- names a later task.
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    queue       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    workflow    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    step        TEXT NOT NULL DEFAULT '',
    idx         INTEGER NOT NULL DEFAULT -1,
    attempt     INTEGER NOT NULL DEFAULT 0,
    payload     TEXT,
    item        TEXT,
    priority    INTEGER NOT NULL DEFAULT 0,
    ready_at    INTEGER NOT NULL,
    owner       TEXT,
    -- Incremented by every claim: a task's tokens never repeat.
    token       INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER,
    claims      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
, handler TEXT NOT NULL DEFAULT '', details TEXT, flow_key TEXT, trace_context TEXT NOT NULL DEFAULT '', tags TEXT NOT NULL DEFAULT '[]', metadata TEXT) STRICT;
CREATE TABLE workers (
    id         TEXT PRIMARY KEY,
    queues     TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    handlers   TEXT NOT NULL DEFAULT '[]', -- JSON array of strings
    host       TEXT NOT NULL DEFAULT '',
    pid        INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
, build_id TEXT NOT NULL DEFAULT '') STRICT, WITHOUT ROWID;
CREATE TABLE requests (
    run_id      TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    args        TEXT,
    seq         INTEGER NOT NULL,
    status      TEXT NOT NULL,
    result      TEXT,
    code        TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    answered_at INTEGER,
    PRIMARY KEY (run_id, id)
) STRICT, WITHOUT ROWID;
CREATE TABLE documents (
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    format     TEXT NOT NULL,
    content    BLOB NOT NULL,
    size       INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version),
    UNIQUE (name, hash)
) STRICT, WITHOUT ROWID;
CREATE TABLE queues (
    name                TEXT PRIMARY KEY,
    paused              INTEGER NOT NULL DEFAULT 0,
    max_running         INTEGER NOT NULL DEFAULT 0,
    max_running_per_key INTEGER NOT NULL DEFAULT 0,
    rate_limit          INTEGER NOT NULL DEFAULT 0,
    rate_period         INTEGER NOT NULL DEFAULT 0, -- microseconds
    key_rate_limit      INTEGER NOT NULL DEFAULT 0,
    key_rate_period     INTEGER NOT NULL DEFAULT 0, -- microseconds
    fair                INTEGER NOT NULL DEFAULT 0,
    weights             TEXT,
    controlled          INTEGER GENERATED ALWAYS AS (paused OR max_running > 0 OR max_running_per_key > 0
                            OR rate_limit > 0 OR key_rate_limit > 0 OR fair OR weights IS NOT NULL) STORED,
    window_start        INTEGER,
    window_starts       INTEGER NOT NULL DEFAULT 0,
    vclock              REAL NOT NULL DEFAULT 0,
    key_cursor          TEXT,
    updated_at          INTEGER NOT NULL
) STRICT;
CREATE TABLE queue_keys (
    queue         TEXT NOT NULL,
    key           TEXT NOT NULL,
    vtime         REAL NOT NULL DEFAULT 0,
    window_start  INTEGER,
    window_starts INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
) STRICT, WITHOUT ROWID;
CREATE TABLE queue_leases (
    task_id INTEGER PRIMARY KEY,
    token   INTEGER NOT NULL,
    queue   TEXT NOT NULL,
    key     TEXT NOT NULL
) STRICT;
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
CREATE TABLE schedule_ticks (
    schedule_id TEXT NOT NULL,
    tick        INTEGER NOT NULL,
    outcome     TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    error       TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, tick)
) STRICT, WITHOUT ROWID;
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
, principal TEXT NOT NULL DEFAULT '', options TEXT NOT NULL DEFAULT '{}') STRICT, WITHOUT ROWID;
CREATE TABLE audit_log (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT NOT NULL,
    role   TEXT NOT NULL,
    method TEXT NOT NULL,
    path   TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    status INTEGER NOT NULL,
    detail TEXT NOT NULL
) STRICT;
CREATE TABLE operations (
    id          TEXT PRIMARY KEY,
    action      TEXT NOT NULL,
    filter      TEXT,
    reason      TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    status      TEXT NOT NULL,
    total       INTEGER NOT NULL,
    done        INTEGER NOT NULL,
    failed      INTEGER NOT NULL,
    errors      TEXT NOT NULL,
    cursor      TEXT NOT NULL,
    owner       TEXT NOT NULL,
    token       INTEGER NOT NULL,
    lease_until INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE principals (
    name        TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    groups      TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    disabled_at INTEGER
) STRICT, WITHOUT ROWID;
CREATE TABLE sessions (
    hash       TEXT PRIMARY KEY,
    principal  TEXT NOT NULL,
    groups     TEXT NOT NULL,
    role       TEXT NOT NULL,
    token_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE remote_claims (
    task_id     INTEGER PRIMARY KEY,
    token       INTEGER NOT NULL,
    run_id      TEXT NOT NULL,
    secret_hash BLOB NOT NULL,
    principal   TEXT NOT NULL,
    worker_id   TEXT NOT NULL,
    claimed_at  INTEGER NOT NULL,
    deadline    INTEGER NOT NULL,
    lease_us    INTEGER NOT NULL
) STRICT;
CREATE TABLE secrets (
    name       TEXT PRIMARY KEY,
    key_id     TEXT NOT NULL,
    nonce      BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE definitions (
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    row_build     TEXT NOT NULL,
    build_id      TEXT NOT NULL,
    hash          TEXT NOT NULL,
    spec          TEXT NOT NULL,
    input_schema  TEXT NOT NULL,
    output_schema TEXT NOT NULL,
    queues        TEXT NOT NULL,
    handlers      TEXT NOT NULL,
    schedules     TEXT NOT NULL,
    published_at  INTEGER NOT NULL,
    published_by  TEXT NOT NULL,
    PRIMARY KEY (kind, name, version, row_build)
) STRICT, WITHOUT ROWID;
CREATE TABLE version_rules (
    name       TEXT PRIMARY KEY,
    rule       TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL DEFAULT ''
) STRICT, WITHOUT ROWID;
CREATE TABLE definition_versions (
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    state      TEXT NOT NULL,
    changed_at INTEGER NOT NULL,
    changed_by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (name, version)
) STRICT, WITHOUT ROWID;
CREATE TABLE retired_builds (
    workflow   TEXT NOT NULL,
    build_id   TEXT NOT NULL,
    retired_at INTEGER NOT NULL,
    PRIMARY KEY (workflow, build_id)
) STRICT, WITHOUT ROWID;
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,           -- JSON array of event types
    workflows  TEXT NOT NULL DEFAULT '[]',
    tags       TEXT NOT NULL DEFAULT '[]',
    format     TEXT NOT NULL,
    enabled    INTEGER NOT NULL,
    key_id     TEXT NOT NULL DEFAULT '', -- '' when secret is in clear
    nonce      BLOB,
    secret     BLOB NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE webhook_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    step    TEXT NOT NULL,
    idx     INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    name    TEXT NOT NULL,
    error   TEXT NOT NULL,
    data    TEXT,
    at      INTEGER NOT NULL
) STRICT;
CREATE TABLE webhook_deliveries (
    id          TEXT PRIMARY KEY,
    webhook_id  TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event       TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    body        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,
    last_status INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT NOT NULL DEFAULT '',
    owner       TEXT NOT NULL DEFAULT '',
    token       INTEGER NOT NULL DEFAULT 0,
    lease_until INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    status_code INTEGER NOT NULL,
    error       TEXT NOT NULL,
    duration_us INTEGER NOT NULL,
    next_at     INTEGER,
    PRIMARY KEY (delivery_id, attempt)
) STRICT, WITHOUT ROWID;
CREATE TABLE step_logs (
    run_id  TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    step    TEXT NOT NULL,
    idx     INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    worker  TEXT NOT NULL,
    at      INTEGER NOT NULL,
    level   INTEGER NOT NULL,
    message TEXT NOT NULL,
    attrs   TEXT,
    size    INTEGER NOT NULL,
    dropped INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE run_attributes (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name   TEXT NOT NULL,
    type   TEXT NOT NULL,
    s      TEXT,
    n      INTEGER,
    f      REAL
) STRICT;
CREATE TABLE version_generation (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    n   INTEGER NOT NULL
) STRICT;
CREATE TABLE sent_events (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    id   TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    data TEXT,
    at   INTEGER NOT NULL
);
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
, business_key TEXT NOT NULL DEFAULT '', concurrency_key TEXT NOT NULL DEFAULT '', group_key TEXT NOT NULL DEFAULT '', debounce_us INTEGER NOT NULL DEFAULT 0, throttle_limit INTEGER NOT NULL DEFAULT 0, throttle_period_us INTEGER NOT NULL DEFAULT 0, batch_size INTEGER NOT NULL DEFAULT 0, batch_window_us INTEGER NOT NULL DEFAULT 0);
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
CREATE TABLE trigger_windows (
    trigger_name TEXT NOT NULL,
    key          TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    runs         INTEGER NOT NULL,
    PRIMARY KEY (trigger_name, key, window_start)
);
INSERT INTO "version_generation" ("one", "n") VALUES (1,1);
CREATE UNIQUE INDEX runs_unique_key ON runs (unique_key) WHERE unique_key IS NOT NULL;
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_workflow ON runs (workflow, created_at, id);
CREATE INDEX runs_business ON runs (business_id, created_at, id) WHERE business_id IS NOT NULL;
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, ready_at, id);
CREATE INDEX tasks_run ON tasks (run_id, kind, step);
CREATE UNIQUE INDEX events_key ON events (run_id, key) WHERE key IS NOT NULL;
CREATE INDEX documents_hash ON documents (hash, created_at, name);
CREATE INDEX tasks_flow ON tasks (queue, flow_key, priority DESC, ready_at, id);
CREATE INDEX queue_leases_queue ON queue_leases (queue);
CREATE INDEX schedules_next_fire ON schedules (next_fire) WHERE paused = 0;
CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_created ON api_tokens (created_at, id);
CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_action ON audit_log (action, id);
CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_claimable ON operations (created_at, id) WHERE status IN ('pending', 'running');
CREATE INDEX runs_parent ON runs (parent_id, created_at, id) WHERE parent_id <> '';
CREATE INDEX api_tokens_principal ON api_tokens (principal);
CREATE INDEX sessions_principal ON sessions (principal);
CREATE INDEX sessions_expires ON sessions (expires_at);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX webhook_deliveries_done ON webhook_deliveries (updated_at) WHERE status <> 'pending';
CREATE INDEX step_logs_attempt ON step_logs (run_id, step, idx, attempt, seq);
CREATE INDEX runs_paused ON runs (id) WHERE paused IS NOT NULL;
CREATE INDEX runs_deadline ON runs (deadline, id)
    WHERE deadline IS NOT NULL AND status IN ('pending', 'running', 'waiting');
CREATE INDEX run_attributes_run ON run_attributes (run_id, name);
CREATE INDEX run_attributes_s ON run_attributes (name, s) WHERE s IS NOT NULL;
CREATE INDEX run_attributes_n ON run_attributes (name, n) WHERE n IS NOT NULL;
CREATE INDEX run_attributes_f ON run_attributes (name, f) WHERE f IS NOT NULL;
CREATE INDEX runs_active ON runs (created_at, id) WHERE status IN ('pending', 'running', 'waiting');
CREATE INDEX tasks_handler ON tasks (queue, handler, priority DESC, ready_at, id);
CREATE INDEX sent_events_name ON sent_events (name, seq);
CREATE INDEX sent_events_at ON sent_events (at, seq);
CREATE INDEX triggers_event ON triggers (event);
CREATE INDEX event_firings_pending ON event_firings (trigger_name, seq) WHERE status = 'pending';
CREATE INDEX event_waits_open ON event_waits (created_at) WHERE delivered_at IS NULL;
CREATE INDEX event_waits_run ON event_waits (run_id);
CREATE INDEX event_waits_matched ON event_waits (matched_event_id) WHERE matched_event_id IS NOT NULL;
CREATE INDEX trigger_groups_open ON trigger_groups (trigger_name, key) WHERE closed = 0;
CREATE INDEX trigger_groups_due ON trigger_groups (due_at) WHERE status = 'open';
CREATE INDEX trigger_group_events_group ON trigger_group_events (group_id, seq);
CREATE INDEX trigger_groups_ended ON trigger_groups (ended_at) WHERE status <> 'open';
CREATE INDEX trigger_groups_list ON trigger_groups (trigger_name, id);
CREATE TRIGGER runs_attributes_insert AFTER INSERT ON runs WHEN NEW.search_attributes IS NOT NULL
BEGIN
    INSERT INTO run_attributes (run_id, name, type, s, n, f)
    SELECT NEW.id, a.key, a.value ->> '$.t',
        CASE WHEN a.value ->> '$.t' IN ('string', 'keyword') THEN a.value ->> '$.v' ELSE e.value END,
        CASE WHEN a.value ->> '$.t' IN ('int', 'time', 'bool') THEN a.value ->> '$.v' END,
        CASE WHEN a.value ->> '$.t' = 'float' THEN a.value ->> '$.v' END
    FROM json_each(NEW.search_attributes) a
    LEFT JOIN json_each(CASE WHEN a.value ->> '$.t' = 'keyword_list' THEN a.value -> '$.v' ELSE '[]' END) e;
END;
CREATE TRIGGER runs_attributes_update AFTER UPDATE OF search_attributes ON runs
WHEN OLD.search_attributes IS NOT NEW.search_attributes
BEGIN
    DELETE FROM run_attributes WHERE run_id = NEW.id;
    INSERT INTO run_attributes (run_id, name, type, s, n, f)
    SELECT NEW.id, a.key, a.value ->> '$.t',
        CASE WHEN a.value ->> '$.t' IN ('string', 'keyword') THEN a.value ->> '$.v' ELSE e.value END,
        CASE WHEN a.value ->> '$.t' IN ('int', 'time', 'bool') THEN a.value ->> '$.v' END,
        CASE WHEN a.value ->> '$.t' = 'float' THEN a.value ->> '$.v' END
    FROM json_each(NEW.search_attributes) a
    LEFT JOIN json_each(CASE WHEN a.value ->> '$.t' = 'keyword_list' THEN a.value -> '$.v' ELSE '[]' END) e;
END;
CREATE TRIGGER version_rules_generation_insert AFTER INSERT ON version_rules
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER version_rules_generation_update AFTER UPDATE ON version_rules
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER version_rules_generation_delete AFTER DELETE ON version_rules
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER definition_versions_generation_insert AFTER INSERT ON definition_versions
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER definition_versions_generation_update AFTER UPDATE ON definition_versions
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER definition_versions_generation_delete AFTER DELETE ON definition_versions
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER documents_generation_insert AFTER INSERT ON documents
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER documents_generation_update AFTER UPDATE ON documents
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER documents_generation_delete AFTER DELETE ON documents
BEGIN UPDATE version_generation SET n = n + 1; END;
CREATE TRIGGER runs_event_waits_delete AFTER DELETE ON runs
BEGIN
    DELETE FROM event_waits WHERE run_id = OLD.id;
END;
