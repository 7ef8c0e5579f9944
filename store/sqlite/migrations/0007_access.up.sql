-- What API servers on one database share (store.Access): API tokens, the
-- audit log of mutating calls, and bulk operations. Retention (PruneRuns)
-- touches none of these tables. Times are Unix microseconds UTC; a NULL
-- time is none.

-- API tokens (store.Token), by id. The secret is never stored: hash is
-- the hex SHA-256 of it, unique. A name is unique among active tokens
-- (api_tokens_active_name); a revoked token keeps its row, with
-- revoked_at, and frees its name.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_created ON api_tokens (created_at, id);

-- The audit log (store.AuditEntry): append-only, newest by the highest
-- id (AUTOINCREMENT: an id is never used twice). Listed newest first, by
-- actor or by action.
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

CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_action ON audit_log (action, id);

-- Bulk operations (store.Operation), by id, with their progress and the
-- lease of the server that carries them out (owner, token, lease_until):
-- a claim takes the oldest pending operation, or running one whose lease
-- ended (operations_claimable), and increments token; a save is fenced by
-- (owner, token). filter is kept as given (opaque); errors is a JSON
-- array of at most 20 strings.
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

CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_claimable ON operations (created_at, id) WHERE status IN ('pending', 'running');
