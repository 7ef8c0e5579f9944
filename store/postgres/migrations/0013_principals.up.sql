-- Principals (store.Principal): the users and services that call the API.
-- Every API token belongs to one (api_tokens.principal); a dashboard
-- session too (sessions). groups is sorted. Every token stored before
-- this migration gets a principal named after the token (a user, without
-- groups). A NULL time is none.
CREATE TABLE principals (
    name        text COLLATE "C" PRIMARY KEY,
    kind        text NOT NULL,
    groups      text[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    disabled_at timestamptz
);

INSERT INTO principals (name, kind, created_at, updated_at)
SELECT name, 'user', MIN(created_at), MIN(created_at) FROM api_tokens GROUP BY name;

-- A token's principal, and its options (store.TokenOptions, JSON).
ALTER TABLE api_tokens ADD COLUMN principal text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE api_tokens ADD COLUMN options text NOT NULL DEFAULT '{}';
UPDATE api_tokens SET principal = name;
CREATE INDEX api_tokens_principal ON api_tokens (principal);

-- Dashboard sessions (store.Session), by the hex SHA-256 of their secret;
-- deleted at sign-out, when their principal is disabled, and once expired
-- (by the next session created).
CREATE TABLE sessions (
    hash       text COLLATE "C" PRIMARY KEY,
    principal  text COLLATE "C" NOT NULL,
    groups     text[] NOT NULL,
    role       text NOT NULL,
    token_id   text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX sessions_principal ON sessions (principal);
CREATE INDEX sessions_expires ON sessions (expires_at);
