-- coursed schema for PostgreSQL, version 2: access tokens kept in the database.
--
-- A token is `crsd_<id>_<secret>`; the row keeps its public id and a PBKDF2-HMAC-SHA256 hash of
-- the secret (hex, with its own salt and iteration count), never the token. Times are
-- milliseconds since the Unix epoch (UTC), compared as integers on both engines. A revoked
-- token's row is deleted. Mirrors migrations/sqlite/0002-tokens.sql.

CREATE TABLE coursed_tokens (
    id           text COLLATE "C" PRIMARY KEY CHECK (char_length(id) = 16),
    name         text COLLATE "C" NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 64),
    scope        text COLLATE "C" NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
    salt         text NOT NULL,
    hash         text NOT NULL,
    iterations   bigint NOT NULL CHECK (iterations > 0),
    created_at   bigint NOT NULL,
    expires_at   bigint,
    last_used_at bigint
);
