-- What API servers on one database share (store.Access): API tokens, the
-- audit log of mutating calls, and bulk operations. Retention (PruneRuns)
-- touches none of these tables.

-- API tokens (store.Token), by id. The secret is never stored: hash is
-- the hex SHA-256 of it, unique. A name is unique among active tokens
-- (api_tokens_active_name); a revoked token keeps its row, with
-- revoked_at, and frees its name. A NULL time is none.
CREATE TABLE api_tokens (
    id           text COLLATE "C" PRIMARY KEY,
    name         text COLLATE "C" NOT NULL,
    role         text NOT NULL,
    hash         text COLLATE "C" NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz
);

CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_created ON api_tokens (created_at, id);

-- The audit log (store.AuditEntry): append-only, newest by the highest
-- id. Listed newest first, by actor or by action.
CREATE TABLE audit_log (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text COLLATE "C" NOT NULL,
    role   text NOT NULL,
    method text NOT NULL,
    path   text NOT NULL,
    action text COLLATE "C" NOT NULL,
    target text NOT NULL,
    status integer NOT NULL,
    detail text NOT NULL
);

CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_action ON audit_log (action, id);

-- Bulk operations (store.Operation), by id, with their progress and the
-- lease of the server that carries them out (owner, token, lease_until):
-- a claim takes the oldest pending operation, or running one whose lease
-- ended (operations_claimable), and increments token; a save is fenced by
-- (owner, token). filter is kept as given (text, opaque); errors is a
-- JSON array of at most 20 strings.
CREATE TABLE operations (
    id          text COLLATE "C" PRIMARY KEY,
    action      text NOT NULL,
    filter      text,
    reason      text NOT NULL,
    created_by  text NOT NULL,
    status      text NOT NULL,
    total       bigint NOT NULL,
    done        bigint NOT NULL,
    failed      bigint NOT NULL,
    errors      text NOT NULL,
    cursor      text NOT NULL,
    owner       text NOT NULL,
    token       bigint NOT NULL,
    lease_until timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE INDEX operations_created ON operations (created_at, id);
CREATE INDEX operations_claimable ON operations (created_at, id) WHERE status IN ('pending', 'running');
