CREATE TABLE events (
    run_id  text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    kind    text NOT NULL,
    step    text NOT NULL DEFAULT '',
    idx     bigint NOT NULL DEFAULT 0,
    attempt bigint NOT NULL DEFAULT 0,
    name    text NOT NULL DEFAULT '',
    data    jsonb,
    error   text NOT NULL DEFAULT '',
    at      timestamptz NOT NULL,
    key     text COLLATE "C",
    PRIMARY KEY (run_id, seq)
);

INSERT INTO events (run_id, seq, kind, step, idx, attempt, name, error, data, key, at)
SELECT h.run_id, h.seq + e.i - 1, e.v->>0, e.v->>1, (e.v->>2)::bigint, (e.v->>3)::bigint, e.v->>4, e.v->>5,
    (e.v->6)::jsonb, CASE WHEN e.i = 1 THEN h.key END, h.at
FROM history h CROSS JOIN LATERAL json_array_elements(h.entries::json) WITH ORDINALITY AS e(v, i);

CREATE UNIQUE INDEX events_key ON events (run_id, key) WHERE key IS NOT NULL;

DROP TABLE history;
