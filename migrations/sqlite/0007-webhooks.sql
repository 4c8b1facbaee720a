-- coursed schema, version 7 (PRAGMA user_version = 7): webhooks, kept in the database so that
-- every server on it knows them and exactly one delivers each at a time.
--
-- A webhook is a reader of the change feed with a cursor of its own: each revision after
-- `feed_cursor` that its filter keeps (`types`, `actions`: comma-separated, empty for all) is POSTed
-- to `url`, signed with `secret` (Standard Webhooks: `whsec_` and the key in base64), one at a
-- time, in feed order; a 2xx moves `feed_cursor` on. A failure is tried again from `next_at` on (ms);
-- `failures` counts those in a row since `failing_since`, and after 24 hours of them the state is
-- `failing` until `coursed webhook resume`. The server delivering holds the lease
-- (`lease_owner` until `lease_until`). Times are milliseconds since the Unix epoch (UTC).
-- Mirrors migrations/postgres/0008-webhooks.sql.

CREATE TABLE coursed_webhooks (
    id                TEXT PRIMARY KEY NOT NULL,
    url               TEXT NOT NULL,
    types             TEXT NOT NULL,
    actions           TEXT NOT NULL,
    secret            TEXT NOT NULL,
    feed_cursor       INTEGER NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('active', 'failing')),
    created_at        INTEGER NOT NULL,
    failures          INTEGER NOT NULL DEFAULT 0,
    failing_since     INTEGER,
    next_at           INTEGER NOT NULL DEFAULT 0,
    last_attempt_at   INTEGER,
    last_status       INTEGER,
    last_error        TEXT,
    delivered         INTEGER NOT NULL DEFAULT 0,
    last_delivered_at INTEGER,
    lease_owner       TEXT,
    lease_until       INTEGER NOT NULL DEFAULT 0
);
