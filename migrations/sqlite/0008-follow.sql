-- coursed schema, version 8 (PRAGMA user_version = 8): following another coursed's catalogue.
--
-- `coursed_feed` names this database's change feed: a random id made once, which a follower
-- keeps beside its cursor, so that a cursor is never taken to another feed (a delta of
-- another district, a feed begun again elsewhere).
--
-- `coursed_follow` holds at most one row, when this database follows another's feed: the
-- `upstream` it follows (a URL, or `bundles` when deltas are imported by hand), that feed's
-- id, and `feed_cursor`, the place in it up to which every revision is applied here; it moves
-- on in the transaction that applies them. `applied_at` is when (ms since the Unix epoch, UTC).
-- While the row exists, the catalogue's writes through the API are refused.
-- Mirrors migrations/postgres/0009-follow.sql.

CREATE TABLE coursed_feed (
    id  TEXT PRIMARY KEY NOT NULL
);
INSERT INTO coursed_feed (id) SELECT lower(hex(randomblob(16)));

CREATE TABLE coursed_follow (
    id          INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    upstream    TEXT NOT NULL,
    feed        TEXT NOT NULL,
    feed_cursor INTEGER NOT NULL,
    applied_at  INTEGER
);
