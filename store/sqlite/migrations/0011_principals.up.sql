-- Principals (store.Principal): the users and services that call the API.
-- Every API token belongs to one (api_tokens.principal); a dashboard
-- session too (sessions). groups is a JSON array of strings, sorted.
-- Every token stored before this migration gets a principal named after
-- the token (a user, without groups). Times are Unix microseconds UTC; a
-- NULL time is none.
CREATE TABLE principals (
    name        TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    groups      TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    disabled_at INTEGER
) STRICT, WITHOUT ROWID;

INSERT INTO principals (name, kind, created_at, updated_at)
SELECT name, 'user', MIN(created_at), MIN(created_at) FROM api_tokens GROUP BY name;

-- A token's principal, and its options (store.TokenOptions, JSON).
ALTER TABLE api_tokens ADD COLUMN principal TEXT NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
UPDATE api_tokens SET principal = name;
CREATE INDEX api_tokens_principal ON api_tokens (principal);

-- Dashboard sessions (store.Session), by the hex SHA-256 of their secret;
-- deleted at sign-out, when their principal is disabled, and once expired
-- (by the next session created).
CREATE TABLE sessions (
    hash       TEXT PRIMARY KEY,
    principal  TEXT NOT NULL,
    groups     TEXT NOT NULL,
    role       TEXT NOT NULL,
    token_id   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX sessions_principal ON sessions (principal);
CREATE INDEX sessions_expires ON sessions (expires_at);
