-- coursed schema for PostgreSQL, version 8: webhooks, kept in the database so that
-- every server on it knows them and exactly one delivers each at a time.
--
-- A webhook is a reader of the change feed with a cursor of its own: each revision after
-- `feed_cursor` that its filter keeps (`types`, `actions`: comma-separated, empty for all) is POSTed
-- to `url`, signed with `secret` (Standard Webhooks: `whsec_` and the key in base64), one at a
-- time, in feed order; a 2xx moves `feed_cursor` on. A failure is tried again from `next_at` on (ms);
-- `failures` counts those in a row since `failing_since`, and after 24 hours of them the state is
-- `failing` until `coursed webhook resume`. The server delivering holds the lease
-- (`lease_owner` until `lease_until`). Times are milliseconds since the Unix epoch (UTC).
-- Mirrors migrations/sqlite/0007-webhooks.sql.

CREATE TABLE coursed_webhooks (
    id                text COLLATE "C" PRIMARY KEY,
    url               text NOT NULL,
    types             text NOT NULL,
    actions           text NOT NULL,
    secret            text NOT NULL,
    feed_cursor       bigint NOT NULL,
    state             text NOT NULL CHECK (state IN ('active', 'failing')),
    created_at        bigint NOT NULL,
    failures          bigint NOT NULL DEFAULT 0,
    failing_since     bigint,
    next_at           bigint NOT NULL DEFAULT 0,
    last_attempt_at   bigint,
    last_status       bigint,
    last_error        text,
    delivered         bigint NOT NULL DEFAULT 0,
    last_delivered_at bigint,
    lease_owner       text,
    lease_until       bigint NOT NULL DEFAULT 0
);
