-- coursed schema, version 2 (PRAGMA user_version = 2): access tokens kept in the database.
--
-- A token is `crsd_<id>_<secret>`; the row keeps its public id and a PBKDF2-HMAC-SHA256 hash of
-- the secret (hex, with its own salt and iteration count), never the token. Times are
-- milliseconds since the Unix epoch (UTC), compared as integers on both engines. A revoked
-- token's row is deleted. Mirrors migrations/postgres/0002-tokens.sql.

CREATE TABLE coursed_tokens (
    id           TEXT PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    name         TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 64),
    scope        TEXT NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    salt         TEXT NOT NULL,
    hash         TEXT NOT NULL,
    iterations   INTEGER NOT NULL CHECK (iterations > 0),
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER
);
